"""The streaming queries: one file-source stream per reader, each with a foreachBatch shell.

``BatchHandler`` is the thin shell Spark calls per micro-batch: it keeps one psycopg connection
per stream and hands ``sink.write_batch`` a ``compute`` callback that runs the Spark side
(parse -> classify -> in-batch dedup -> Arrow) once the sink has locked the stream state.
Event-time lateness is decided here against the committed stream state, NOT with Spark's
``withWatermark`` (which drops late rows silently; promise 2 says nothing is dropped silently).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import PurePosixPath

import psycopg
import pyarrow as pa
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery
from pyspark.util import inheritable_thread_target

from slidewin.db.clock import Clock, utc_now
from slidewin.db.connect import connect
from slidewin.db.reconnect import Reconnector, is_connection_lost
from slidewin.db.streams import BUILTIN
from slidewin.ingest import batch, foreign, isolate, landing, parse
from slidewin.ingest.config import IngestConfig
from slidewin.ingest.errors import BatchCancelled, first_line, is_cancellation, spark_error_text
from slidewin.ingest.pull import PullUnavailable, indexed_partitions
from slidewin.ingest.sink import (
    BatchResult,
    BatchRows,
    Chunk,
    InlineRetention,
    Partials,
    PartialsMismatch,
    StreamState,
    insert_rows,
    presummable,
    write_batch,
)
from slidewin.ingest.tidy import batch_files

OnResult = Callable[[str, BatchResult], None]
SPARK_ERRORS = (PySparkException, Py4JJavaError)
BIND_TIMEOUT_S = 120.0
CHUNK_BYTES = 2 * 2**20  # input bytes per Spark job when a batch is read file by file
# the store's stream: every ingest of it -- both queries of one `slidewin ingest`, and ingests
# of other landing directories -- shares its state row and so its one watermark
STREAM = BUILTIN
_GLOB_CHARS = frozenset("{}[]*?\\")


class _PulledBatchFailed(Exception):
    """Spark failed the batch's single plan; the batch is retried file by file."""


class BatchHandler:
    """The ``foreachBatch`` callable of one stream."""

    # (batch id, exception) of the batch that failed: Spark reports it only as
    # FOREACH_BATCH_USER_FUNCTION_ERROR, the Python cause lost; the runner reports this instead
    failure: tuple[int, BaseException] | None = None

    def __init__(
        self, config: IngestConfig, dsn: str, stream: str, partitions: int, on_result: OnResult,
        *, reconnect: Reconnector | None = None, clock: Clock = utc_now,
    ) -> None:
        self.config, self.dsn, self.stream = config, dsn, stream
        self.subject = f"stream {stream}"  # what an error calls it: "stream text failed ..."
        self.partitions, self.on_result = partitions, on_result
        self.reconnect = reconnect  # None: a lost database fails the batch (and the query)
        self.clock = clock  # "now" of the future rule, read on the driver once per batch
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()
        self._checkpoint_id: str | None = None
        self._bound = threading.Event()
        self._fixed: tuple[list[parse.Step], list[parse.Step]] | None = None  # parse, output
        self._pull = True  # False once this Spark turned out to lack ingest.pull's path
        self._stopping = threading.Event()  # set by cancel(): a Spark failure now is the stop's

    def bind(self, checkpoint_id: str) -> None:
        """Called with the started query's id (stable for the life of its checkpoint)."""
        self._checkpoint_id = checkpoint_id
        self._bound.set()

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        try:
            if not self._bound.wait(BIND_TIMEOUT_S):
                raise RuntimeError("the streaming query's id was never bound to its handler")
            with self._lock:
                try:
                    result = self._write_or_narrow(df, batch_id)
                except isolate.NARROWABLE:  # rolled back: again file by file, row by row
                    result = self._write(df, batch_id, by_file=True, narrow=True)
            self.on_result(self.stream, result)
        except BaseException as exc:
            self.failure = (batch_id, exc)
            raise

    def _write_or_narrow(self, df: DataFrame, batch_id: int) -> BatchResult:
        try:
            return self._write(df, batch_id, by_file=self._by_file(batch_id))
        except (_PulledBatchFailed, PartialsMismatch) as failed:  # rolled back: file by file
            if isinstance(failed.__cause__, PullUnavailable):
                self._pull = False
            return self._write(df, batch_id, by_file=True)

    def _by_file(self, batch_id: int) -> bool:
        """Read this batch file by file: always once the pull is unavailable; when a file's
        name holds a glob character (Spark's own plan of the batch reads the other files again
        for each such name) or an entry is no file (a named pipe: never to be opened); and for
        Parquet when a file's footer shows another schema or none (``ingest.foreign``) -- such
        a file would fail the single plan or be read as rows of NULLs."""
        if not self._pull:
            return True
        paths = [str(p) for p in batch_files(self.config.checkpoint_for(self.stream), batch_id)]
        if any(read_alone(path) or landing.not_a_file(path) for path in paths):
            return True
        if self.stream != "parquet":
            return False
        return any(foreign.check(path).kind != "ok" for path in paths)

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

    def _write_once(
        self, df: DataFrame, batch_id: int, *, by_file: bool, narrow: bool = False
    ) -> BatchResult:
        """Write the batch; ``narrow`` (after a content failure): one chunk per file, and rows
        PostgreSQL refuses become dead letters (``ingest.isolate``)."""
        result = write_batch(
            self._connection(),
            self.config.marker_id(self.stream, str(self._checkpoint_id)),
            STREAM,
            batch_id,
            lambda state: self.compute(df, state, batch_id, by_file=by_file, narrow=narrow),
            self._inline(),
            isolate.insert_narrowed if narrow else insert_rows,
            self.config.grace,
        )
        if self.stream != "parquet" or result.skipped:
            return result
        # Parquet columns beyond uuid, val, ts are not read at all: their files' footers count
        paths = [str(p) for p in batch_files(self.config.checkpoint_for(self.stream), batch_id)]
        return replace(result, extra_fields=result.extra_fields + foreign.extra_rows(paths))

    def compute(
        self,
        df: DataFrame,
        state: StreamState,
        batch_id: int,
        *,
        by_file: bool,
        narrow: bool = False,
    ) -> Iterator[Chunk | Partials]:
        """Spark: parse and classify against the stream state, one Arrow table per Spark
        partition (the sink writes partition k while Spark computes partition k+1); the
        in-batch dedup runs on Arrow (``ingest.batch``), and the sink's ON CONFLICT catches a
        key repeated across partitions. The batch is planned once (``ingest.pull``) from
        Columns built once (the clock rules once per batch). The rollups' partials of each
        partition the sink COPYs whole come, by ``--rollups``, from the driver (``driver``, the
        default: ``batch.partials`` sums the pulled Arrow table, no second read of the files),
        from Spark (``spark``: ``parse.partials``, a second job over the same scan whose
        shuffle carries only the partials), or not at all (``database``: the triggers sum).

        If that fails -- a file Spark cannot read fails the whole job -- the sink's transaction
        rolls back and ``by_file`` computes the batch again from its files, a chunk of files per
        plan, so that an unreadable file becomes one dead letter instead of failing the batch.
        """
        limits = parse.Limits(
            now=self.clock(),
            newest_before=state.newest,
            grace=self.config.grace,
            history=self.config.history,
            max_future=self.config.max_future,
            watermark=state.watermark,
        )
        if self._fixed is None:
            self._fixed = (
                parse.parse_steps(self.stream, self.config.epoch_unit),
                parse.output_steps(self.stream, self.partitions),
            )
        head, tail = self._fixed
        if state.newest is None and self.config.history is not None:
            newest = self._newest_in_batch(df, batch_id, limits, by_file=by_file)
            limits = replace(limits, newest_in_batch=newest)
        steps = [*head, *parse.classify_steps(self.stream, limits), *tail]
        if not by_file:
            plan = parse.apply(df, steps)
            by_spark = self.config.rollups == "spark"
            by_driver = self.config.rollups == "driver"
            # beside the pull, not after it: a small batch's partials are ready as soon as its
            # rows (freshness), and a large one's cost the same either way
            summing = _start_partials(plan) if by_spark else None
            summed: list[pa.Table] = []  # the driver's partials, partition by partition
            try:
                for pid, table in indexed_partitions(plan):
                    # split here: this thread waits on Spark's helper thread anyway, and the
                    # dedup is then off the database's path (the writer only writes)
                    rows = batch.split(table)
                    if batch.unclosed_quotes(rows):  # a CSV record spans lines: read by files
                        raise _PulledBatchFailed("a quoted CSV field holds a line break")
                    rows = replace(rows, pid=pid if by_spark or by_driver else None)
                    if by_driver and presummable(rows):
                        summed.append(batch.partials(rows.good, pid))
                    yield rows
                partials = summing.result() if summing is not None else None
                if by_driver:
                    partials = pa.concat_tables(summed) if summed else None
            except (*SPARK_ERRORS, PullUnavailable) as exc:
                self._raise_if_cancelled(exc)
                raise _PulledBatchFailed(first_line(str(exc))) from exc
            finally:
                if summing is not None:
                    wait([summing])  # never leave the batch with its job still running
            if partials is not None:
                yield Partials(lambda: partials)
            return
        paths = [str(p) for p in batch_files(self.config.checkpoint_for(self.stream), batch_id)]
        if not paths:  # the file list is unknown (e.g. a remote checkpoint): one chunk
            yield partial(batch.split, parse.apply(df, steps).toArrow())
            return
        spark = df.sparkSession
        if narrow:  # one file per chunk, so a refused row's dead letter names its file
            for path in sorted(paths):
                rows = batch.split(self._collect_chunk(spark, [path], steps, limits))
                yield BatchRows(rows.good, rows.bad, PurePosixPath(path).name, extra=rows.extra)
            return
        for names in file_chunks(paths):  # Spark runs in this thread: dedup in the writer's
            yield partial(batch.split, self._collect_chunk(spark, names, steps, limits))

    def _newest_in_batch(
        self, df: DataFrame, batch_id: int, limits: parse.Limits, *, by_file: bool
    ) -> datetime | None:
        """A stream's first batch has no stream time: its own newest valid event time is what
        ``expired`` is judged against (``parse.Limits``), one pass over the batch before it."""
        assert self._fixed is not None
        head, tail = self._fixed
        judged = [*head, *parse.classify_steps(self.stream, limits)]
        paths = batch_files(self.config.checkpoint_for(self.stream), batch_id) if by_file else []
        if not paths:
            try:
                return parse.newest_valid(parse.apply(df, judged))
            except SPARK_ERRORS as exc:
                self._raise_if_cancelled(exc)
                if by_file:
                    raise
                raise _PulledBatchFailed(first_line(str(exc))) from exc
        spark, steps = df.sparkSession, [*judged, *tail]
        found = [
            batch.newest_valid(self._collect_chunk(spark, names, steps, limits))
            for names in file_chunks([str(p) for p in paths])
        ]
        return max((t for t in found if t is not None), default=None)

    def _collect_chunk(
        self, spark: SparkSession, paths: list[str], steps: list[parse.Step], limits: parse.Limits
    ) -> pa.Table:
        """One chunk of the batch's files. Parquet files of another schema are read with their
        own (``ingest.foreign``), files without a readable footer are one dead letter each,
        and the rest are read together. An entry that is no file (a named pipe the landing
        sweep had not moved aside yet) is one dead letter, never opened."""
        why = {path: landing.not_a_file(path) for path in paths}
        tables = [
            batch.unreadable_file(PurePosixPath(path).name, path, f"{reason}; not opened")
            for path, reason in why.items() if reason
        ]
        paths = [path for path, reason in why.items() if not reason]
        if self.stream != "parquet":
            if paths or not tables:
                tables.insert(0, self._collect_files(spark, paths, steps))
            return pa.concat_tables(tables, promote_options="permissive")
        checks = [foreign.check(path) for path in paths]
        tables += [self._odd_file(spark, check, limits) for check in checks if check.kind != "ok"]
        fine = [check.path for check in checks if check.kind == "ok"]
        if fine or not tables:
            tables.insert(0, self._collect_files(spark, fine, steps))
        return pa.concat_tables(tables, promote_options="permissive")

    def _odd_file(self, spark: SparkSession, check: foreign.FileCheck, limits: parse.Limits):
        if check.kind == "unreadable":
            return batch.unreadable_file(PurePosixPath(check.path).name, check.path, check.reason)
        steps = [
            *parse.parse_steps("text", self.config.epoch_unit),
            *parse.classify_steps("text", limits),
            *parse.output_steps("text", self.partitions),
        ]
        try:
            return parse.apply(foreign.read_foreign(spark, check.path), steps).toArrow()
        except SPARK_ERRORS as exc:
            self._raise_if_cancelled(exc)
            name = PurePosixPath(check.path).name
            return batch.unreadable_file(name, check.path, spark_error_text(exc))

    def _collect_files(
        self, spark: SparkSession, paths: list[str], steps: list[parse.Step]
    ) -> pa.Table:
        """Files read together by path; if Spark cannot read them, file by file, and a file
        Spark cannot read becomes one dead letter, reason ``unreadable_file``, with Spark's
        reason in words. A name holding a glob character is read alone (``read_alone``)."""
        alone = [path for path in paths if read_alone(path)]
        if alone and len(paths) > 1:
            rest = [path for path in paths if not read_alone(path)]
            parts = [[path] for path in alone] + ([rest] if rest else [])
            return pa.concat_tables(
                [self._collect_files(spark, part, steps) for part in parts],
                promote_options="permissive",
            )
        try:
            return parse.apply(parse.read_files(spark, self.stream, paths), steps).toArrow()
        except SPARK_ERRORS as exc:
            self._raise_if_cancelled(exc)
            if len(paths) == 1:
                name = PurePosixPath(paths[0]).name
                return batch.unreadable_file(name, paths[0], spark_error_text(exc))
        return pa.concat_tables(
            [self._collect_files(spark, [path], steps) for path in paths],
            promote_options="permissive",
        )

    def _raise_if_cancelled(self, exc: BaseException) -> None:
        """A Spark job cancelled by a stop (or a SparkContext shutting down) says nothing about
        the batch's files: the batch fails and rolls back -- read again at the next start --
        instead of being retried file by file or dead-lettering its files as unreadable."""
        if self._stopping.is_set() or is_cancellation(exc):
            raise BatchCancelled(
                f"[{self.stream}] batch cancelled: Spark stopped its job "
                f"({spark_error_text(exc)}); it rolled back and is read again when the ingest "
                "starts"
            ) from exc

    def _inline(self) -> InlineRetention | None:
        if not self.config.inline:
            return None
        return InlineRetention(self.config.history, self.config.max_rows, self.config.chunk or 100)

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = connect(self.dsn, autocommit=True)
        return self._conn

    def cancel(self) -> None:
        """Cancel the statement the batch is running in the database, if any (from another
        thread: a stop must not wait minutes for a long statement). The batch fails and rolls
        back; it is read again when the ingest restarts. From now on a failed Spark job is the
        stop's doing, never a file's (``_raise_if_cancelled``)."""
        self._stopping.set()
        conn = self._conn
        if conn is not None and not conn.closed:
            with contextlib.suppress(Exception):  # gone meanwhile: nothing left to cancel
                conn.cancel_safe(timeout=5.0)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _start_partials(plan: DataFrame) -> Future[pa.Table]:
    """Run ``parse.partials(plan)`` as a Spark job in a thread of its own (with the caller's
    job group, so stopping the query cancels it too)."""
    job: Callable[[], pa.Table] = inheritable_thread_target(plan.sparkSession)(
        lambda: parse.partials(plan).toArrow()
    )
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="slidewin-partials")
    try:
        return pool.submit(job)
    finally:
        pool.shutdown(wait=False)  # the thread ends with its one job


def read_alone(path: str) -> bool:
    """A path holding a Hadoop glob character (``{ } [ ] * ? \\``, as Spark tells a pattern)
    is read in a Spark read of its own: with globbing off, as the file source and
    ``parse.read_files`` read, Spark repeats every other path of the read once for each such
    path, so the other files would be read again."""
    return any(c in _GLOB_CHARS for c in path)


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
    query = triggered(writer, config).start()
    handler.bind(query.id)
    return query


def triggered(
    writer: DataStreamWriter, config: IngestConfig, every: timedelta | None = None
) -> DataStreamWriter:
    """The writer with the ingest's trigger: everything there now (--once), else ``every``
    (default --trigger)."""
    if config.once:
        return writer.trigger(availableNow=True)
    interval = every or config.trigger
    return writer.trigger(processingTime=f"{int(interval.total_seconds() * 1000)} milliseconds")
