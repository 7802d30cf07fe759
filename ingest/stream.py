"""The streaming queries: one file-source stream per reader, each with a foreachBatch shell.

``BatchHandler`` is the thin shell Spark calls per micro-batch: it keeps one psycopg connection
per stream and hands ``sink.write_batch`` a ``compute`` callback that runs the Spark side
(parse -> classify -> in-batch dedup -> Arrow) once the sink has locked the stream state.
Event-time lateness is decided here against the committed stream state, NOT with Spark's
``withWatermark`` (which drops late rows silently; promise 2 says nothing is dropped silently).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import PurePosixPath

import psycopg
import pyarrow as pa
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from db.connect import connect
from db.reconnect import Reconnector, is_connection_lost
from ingest import batch, parse
from ingest.config import IngestConfig
from ingest.errors import first_line
from ingest.pull import PullUnavailable, arrow_partitions
from ingest.sink import BatchResult, Chunk, InlineRetention, write_batch
from ingest.tidy import batch_files

OnResult = Callable[[str, BatchResult], None]
SPARK_ERRORS = (PySparkException, Py4JJavaError)
BIND_TIMEOUT_S = 120.0
CHUNK_BYTES = 2 * 2**20  # input bytes per Spark job when a batch is read file by file


class _PulledBatchFailed(Exception):
    """Spark failed the batch's single plan; the batch is retried file by file."""


class BatchHandler:
    """The ``foreachBatch`` callable of one stream."""

    def __init__(
        self, config: IngestConfig, dsn: str, stream: str, partitions: int, on_result: OnResult,
        *, reconnect: Reconnector | None = None,
    ) -> None:
        self.config, self.dsn, self.stream = config, dsn, stream
        self.partitions, self.on_result = partitions, on_result
        self.reconnect = reconnect  # None: a lost database fails the batch (and the query)
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()
        self._checkpoint_id: str | None = None
        self._bound = threading.Event()
        self._fixed: tuple[list[parse.Step], list[parse.Step]] | None = None  # parse, output
        self._pull = True  # False once this Spark turned out to lack ingest.pull's path

    def bind(self, checkpoint_id: str) -> None:
        """Called with the started query's id (stable for the life of its checkpoint)."""
        self._checkpoint_id = checkpoint_id
        self._bound.set()

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        if not self._bound.wait(BIND_TIMEOUT_S):
            raise RuntimeError("the streaming query's id was never bound to its batch handler")
        with self._lock:
            try:
                result = self._write(df, batch_id, by_file=not self._pull)
            except _PulledBatchFailed as failed:  # its transaction rolled back: file by file
                if isinstance(failed.__cause__, PullUnavailable):
                    self._pull = False
                result = self._write(df, batch_id, by_file=True)
        self.on_result(self.stream, result)

    def _write(self, df: DataFrame, batch_id: int, **how: bool) -> BatchResult:
        """Write the batch (``how``: ``_write_once``'s options); if the database went away,
        wait for it (``--reconnect-timeout``) and write the same batch again on a new
        connection. The batch marker makes that exactly once: a batch whose commit reached the
        server before the connection died is skipped, one that did not commit rolled back and
        is written whole."""
        while True:
            try:
                return self._write_once(df, batch_id, **how)
            except Exception as exc:
                if self.reconnect is None or not is_connection_lost(exc):
                    raise
                self.close()
                self.reconnect.wait(exc)

    def _write_once(self, df: DataFrame, batch_id: int, *, by_file: bool) -> BatchResult:
        return write_batch(
            self._connection(),
            self.config.marker_id(self.stream, str(self._checkpoint_id)),
            self.config.query_id,
            batch_id,
            lambda newest: self.compute(df, newest, batch_id, by_file=by_file),
            self._inline(),
        )

    def compute(
        self, df: DataFrame, newest_before: datetime | None, batch_id: int, *, by_file: bool
    ) -> Iterator[Chunk]:
        """Spark: parse and classify against the stream state, one Arrow table per Spark
        partition (the sink writes partition k while Spark computes partition k+1); the
        in-batch dedup runs on Arrow (``ingest.batch``), and the sink's ON CONFLICT catches a
        key repeated across partitions. The batch is planned once (``ingest.pull``) from
        Columns built once (the clock rules once per batch).

        If that fails -- a file Spark cannot read fails the whole job -- the sink's transaction
        rolls back and ``by_file`` computes the batch again from its files, a chunk of files per
        plan, so that an unreadable file becomes one dead letter instead of failing the batch.
        """
        limits = parse.Limits(
            now=datetime.now(UTC),
            newest_before=newest_before,
            grace=self.config.grace,
            history=self.config.history,
            max_future=self.config.max_future,
        )
        if self._fixed is None:
            self._fixed = (
                parse.parse_steps(self.stream),
                parse.output_steps(self.stream, self.partitions),
            )
        head, tail = self._fixed
        steps = [*head, *parse.classify_steps(self.stream, limits), *tail]
        if not by_file:
            try:
                for table in arrow_partitions(parse.apply(df, steps)):
                    # split here: this thread waits on Spark's helper thread anyway, and the
                    # dedup is then off the database's path (the writer only writes)
                    yield batch.split(table)
            except (*SPARK_ERRORS, PullUnavailable) as exc:
                raise _PulledBatchFailed(first_line(str(exc))) from exc
            return
        paths = [str(p) for p in batch_files(self.config.checkpoint_for(self.stream), batch_id)]
        if not paths:  # the file list is unknown (e.g. a remote checkpoint): one chunk
            yield partial(batch.split, parse.apply(df, steps).toArrow())
            return
        spark = df.sparkSession
        for names in file_chunks(paths):  # Spark runs in this thread: dedup in the writer's
            yield partial(batch.split, self._collect_files(spark, names, steps))

    def _collect_files(
        self, spark: SparkSession, paths: list[str], steps: list[parse.Step]
    ) -> pa.Table:
        """One chunk of the batch's files, read by path; if Spark cannot read it, file by
        file, and a file Spark cannot read (e.g. Parquet with another schema) becomes one
        dead letter, reason ``unreadable_file``."""
        try:
            return parse.apply(parse.read_files(spark, self.stream, paths), steps).toArrow()
        except SPARK_ERRORS as exc:
            if len(paths) == 1:
                name = PurePosixPath(paths[0]).name
                return batch.unreadable_file(name, paths[0], first_line(str(exc)))
        return pa.concat_tables(
            [self._collect_files(spark, [path], steps) for path in paths],
            promote_options="permissive",
        )

    def _inline(self) -> InlineRetention | None:
        if not self.config.inline:
            return None
        return InlineRetention(self.config.history, self.config.max_rows, self.config.chunk or 100)

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = connect(self.dsn, autocommit=True)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def file_chunks(paths: list[str], target_bytes: int = CHUNK_BYTES) -> list[list[str]]:
    """Group a batch's files into chunks of about ``target_bytes`` each, in path order; sizes
    come from the local file system (unknown sizes count as one full chunk)."""
    chunks: list[list[str]] = []
    size = target_bytes
    for path in sorted(paths):
        if size >= target_bytes:
            chunks.append([])
            size = 0
        chunks[-1].append(path)
        size += _size(path, target_bytes)
    return chunks


def _size(path: str, unknown: int) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return unknown


def start_stream(
    spark: SparkSession, config: IngestConfig, handler: BatchHandler
) -> StreamingQuery:
    """Start one stream's query with its own checkpoint and trigger."""
    df = parse.read_stream(spark, config, handler.stream)
    writer = (
        df.writeStream.foreachBatch(handler)
        .queryName(
            f"slidewin_{config.query_id}_{handler.stream}".replace("-", "_").replace(".", "_")
        )
        .option("checkpointLocation", str(config.checkpoint_for(handler.stream)))
    )
    if config.once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(
            processingTime=f"{int(config.trigger.total_seconds() * 1000)} milliseconds"
        )
    query = writer.start()
    handler.bind(query.id)
    return query
