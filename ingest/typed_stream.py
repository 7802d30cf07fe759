"""The Spark side of declared streams: one file-source query per stream over its own folder.

Stream ``<name>`` reads ``<landing>/<name>/`` (the file source does not descend into folders,
so the built-in stream's queries over ``<landing>/`` never see these files). The streaming
query only lists each micro-batch's files (the ``binaryFile`` source, its ``content`` never
selected, so never read); Spark's own readers then parse them on the executors with the
stream's declared columns (``ingest.typed_spark``) -- JSON Lines, CSV and Parquet alike,
matched by extension in any case. Each query has a checkpoint of its own
(``<checkpoint dir>/stream-<name>``) and writes through ``ingest.typed_sink``, exactly once
per batch.

``DeclaredStreams`` keeps one query per declared stream: started when the ingest starts and,
unless ``--once``, for streams declared while it runs (the registry is read again every
``POLL_S`` seconds); the query of a dropped stream is stopped.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath

import psycopg
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from slidewin.db.clock import Clock, utc_now
from slidewin.db.connect import connect
from slidewin.db.errors import DatabaseUnavailable
from slidewin.db.reconnect import Reconnector, is_connection_lost
from slidewin.db.streams import list_streams
from slidewin.ingest.config import IngestConfig
from slidewin.ingest.landing import not_a_file
from slidewin.ingest.parse import any_case_glob
from slidewin.ingest.sink import BatchResult
from slidewin.ingest.stream import triggered
from slidewin.ingest.tidy import batch_entries, batch_files, dispose, last_committed_batch
from slidewin.ingest.typed import EXTENSIONS, Layout, Limits, Parsed
from slidewin.ingest.typed_sink import StreamGone, stream_query_id, write_stream_batch
from slidewin.ingest.typed_spark import SpanningCsv, group_files, pieces

POLL_S = 3.0  # how often a running ingest looks for streams declared or dropped
BIND_TIMEOUT_S = 120.0
BINARY_SCHEMA = "path string, modificationTime timestamp, length bigint, content binary"
OnResult = Callable[[str, BatchResult], None]


def label(name: str) -> str:
    """How progress lines name a declared stream: ``[stream sensors] batch 0: ...``."""
    return f"stream {name}"


def checkpoint_name(name: str) -> str:
    return f"stream-{name}"


def folder_of(config: IngestConfig, name: str) -> Path:
    return config.landing / name


class StreamHandler:
    """The ``foreachBatch`` callable of one declared stream's query."""

    failure: tuple[int, BaseException] | None = None

    def __init__(self, config: IngestConfig, dsn: str, name: str, on_result: OnResult, *,
                 reconnect: Reconnector | None = None, clock: Clock = utc_now) -> None:
        self.config, self.dsn, self.name = config, dsn, name
        self.stream = label(name)  # what progress lines call it: "[stream s] batch 0: ..."
        self.subject = self.stream  # and errors: "stream s failed ..." (the label says stream)
        self.on_result, self.reconnect, self.clock = on_result, reconnect, clock
        self._conn: psycopg.Connection | None = None
        self._checkpoint_id: str | None = None
        self._bound = threading.Event()

    def bind(self, checkpoint_id: str) -> None:
        self._checkpoint_id = checkpoint_id
        self._bound.set()

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        try:
            if not self._bound.wait(BIND_TIMEOUT_S):
                raise RuntimeError("the streaming query's id was never bound to its handler")
            result = self._write(df, batch_id)
            self.on_result(self.stream, result)
        except BaseException as exc:
            self.failure = (batch_id, exc)
            raise

    def _write(self, df: DataFrame, batch_id: int) -> BatchResult:
        """The batch, written again on a new connection if the database went away (the
        marker makes that exactly once), or with the CSV files whose records span lines read
        whole (``typed_spark.SpanningCsv``: the first try rolled back)."""
        query_id = stream_query_id(self.config.query_id, self.name, str(self._checkpoint_id))
        listed = list_files(df, self.config.checkpoint_for(checkpoint_name(self.name)),
                            batch_id)
        whole: set[str] = set()
        while True:
            try:
                return write_stream_batch(
                    self._connection(), self.name, query_id, batch_id, [],
                    now=self.clock(), max_future=self.config.max_future,
                    pieces=partial(spark_pieces, df.sparkSession, listed, frozenset(whole)),
                )
            except SpanningCsv as spanning:
                paths = {p for p in listed.readable if PurePosixPath(p).name in spanning.names}
                if not paths - whole:
                    raise
                whole |= paths
            except Exception as exc:
                if self.reconnect is None or not is_connection_lost(exc):
                    raise
                self.close()
                self.reconnect.wait(exc)

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = connect(self.dsn, autocommit=True)
        return self._conn

    def cancel(self) -> None:
        conn = self._conn
        if conn is not None and not conn.closed:
            with contextlib.suppress(Exception):
                conn.cancel_safe(timeout=5.0)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@dataclass(frozen=True)
class Listed:
    """A micro-batch's files: local paths Spark reads, and (name, why) of entries nobody may
    open -- a named pipe would block the batch forever, a device or socket fail it."""

    readable: list[str]
    refused: list[tuple[str, str]]


def list_files(df: DataFrame, checkpoint: Path, batch_id: int) -> Listed:
    """The batch's files as the file source logged them in the checkpoint (their contents
    are not read here); where that log cannot be read, as the batch's DataFrame lists them
    -- each once: Spark repeats a path there once per name in the batch that holds a glob
    character."""
    paths = [str(p) for p in batch_files(checkpoint, batch_id)]
    if not paths:
        prefix = "file:"
        listed = [row["path"] for row in df.select("path").collect()]
        paths = list(dict.fromkeys(p[len(prefix):] if p.startswith(prefix) else p
                                   for p in listed))
    readable: list[str] = []
    refused: list[tuple[str, str]] = []
    for local in paths:
        why = not_a_file(local)
        if why is None and os.path.exists(local) and not os.access(local, os.R_OK):
            why = "a file this process may not read"
        if why is None:
            readable.append(local)
        else:
            refused.append((PurePosixPath(local).name, why))
    return Listed(readable, refused)


def spark_pieces(spark: SparkSession, listed: Listed, whole: frozenset[str], layout: Layout,
                 limits: Limits) -> Iterator[Parsed]:
    """The batch parsed on Spark (``ingest.typed_spark``); refused entries, and the files
    the record path reads whole, after."""
    groups = group_files(layout, listed.readable, whole)
    yield from pieces(spark, layout, groups, limits, _whole_files(groups.whole, listed.refused))


def _whole_files(paths: list[str], refused: list[tuple[str, str]]
                 ) -> Iterator[tuple[str, bytes | str]]:
    yield from refused
    for path in paths:
        try:
            with open(path, "rb") as f:
                yield PurePosixPath(path).name, f.read()
        except OSError as exc:
            yield PurePosixPath(path).name, f"a file that cannot be read ({exc.strerror})"


def read_stream(spark: SparkSession, config: IngestConfig, name: str) -> DataFrame:
    """The stream's files as a streaming DataFrame of the ``binaryFile`` source."""
    reader = (
        spark.readStream.format("binaryFile")
        .schema(BINARY_SCHEMA)
        .option("maxFilesPerTrigger", config.max_files_per_trigger)
        .option("pathGlobFilter", any_case_glob(*EXTENSIONS))
    )
    if config.processed != "keep":
        reader = reader.option("cleanSource", config.processed)
    if config.processed == "archive":
        reader = reader.option("sourceArchiveDir", str(config.archive_dir))
    return reader.load(str(folder_of(config, name)))


def start_query(spark: SparkSession, config: IngestConfig, handler: StreamHandler
                ) -> StreamingQuery:
    """Start one declared stream's query (its folder created when missing)."""
    folder_of(config, handler.name).mkdir(parents=True, exist_ok=True)
    name = f"slidewin_{config.query_id}_stream_{handler.name}"
    writer = (
        read_stream(spark, config, handler.name).writeStream.foreachBatch(handler)
        .queryName(name.replace("-", "_").replace(".", "_"))
        .option("checkpointLocation",
                str(config.checkpoint_for(checkpoint_name(handler.name))))
    )
    query = triggered(writer, config, config.streams_trigger).start()
    handler.bind(query.id)
    return query


def tidy_last_batch(config: IngestConfig, name: str) -> int:
    """Archive or delete the files of the stream's last committed batch still in its folder
    (Spark's ``cleanSource`` moves a batch's files only when it plans the next batch)."""
    if config.processed == "keep":
        return 0
    checkpoint = config.checkpoint_for(checkpoint_name(name))
    batch = last_committed_batch(checkpoint)
    if batch is None:
        return 0
    done, folder = 0, folder_of(config, name)
    for path, read_ms in batch_entries(checkpoint, batch):
        with contextlib.suppress(OSError):
            if path.parent == folder and int(os.stat(path).st_mtime * 1000) == read_ms:
                dispose(path, config)
                done += 1
    return done


def declared_names(dsn: str) -> list[str]:
    """The declared streams' names; none for a store made before streams existed."""
    with connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT to_regclass('slidewin.streams')").fetchone()
        if row is None or row[0] is None:
            return []
        return [s.name for s in list_streams(conn, declared_only=True)]


class DeclaredStreams:
    """One query per declared stream, kept in step with the registry."""

    def __init__(self, spark: SparkSession, config: IngestConfig, dsn: str,
                 progress: Callable[[str], None], on_result: OnResult, *,
                 on_failure: Callable[[StreamHandler, BaseException], Exception],
                 reconnect: Reconnector | None = None, clock: Clock = utc_now,
                 names: Callable[[str], list[str]] = declared_names) -> None:
        self.spark, self.config, self.dsn = spark, config, dsn
        self.progress, self.on_result, self.on_failure = progress, on_result, on_failure
        self.reconnect, self.clock, self.names = reconnect, clock, names
        self.running: dict[str, tuple[StreamingQuery, StreamHandler]] = {}
        self.started: list[str] = []  # every stream a query was started for (tidied at the end)
        self._polled = 0.0

    def sync(self) -> None:
        """Start a query for each declared stream without one; stop those of dropped streams."""
        self._polled = time.monotonic()
        declared = self.names(self.dsn)
        for name in declared:
            if name not in self.running:
                handler = StreamHandler(self.config, self.dsn, name, self.on_result,
                                        reconnect=self.reconnect, clock=self.clock)
                self.running[name] = (start_query(self.spark, self.config, handler), handler)
                if name not in self.started:
                    self.started.append(name)
                self.progress(f"[{label(name)}] reading {folder_of(self.config, name)}/")
        for name in [n for n in self.running if n not in declared]:
            self._stop(name, "the stream was dropped; its query stopped")

    def active(self) -> bool:
        return any(q.isActive for q, _h in self.running.values())

    def tick(self, stop: threading.Event) -> None:
        """Wait a little on the queries, raise the failure of one (a dropped stream's query
        just ends), and read the registry again when it is due (not with ``--once``)."""
        from pyspark.errors import StreamingQueryException

        for q, _h in list(self.running.values()):
            with contextlib.suppress(StreamingQueryException):
                q.awaitTermination(0.2)  # type: ignore[arg-type]  # seconds, a float in PySpark
        self.check(stop)
        if not self.config.once and time.monotonic() - self._polled >= POLL_S:
            # the database unreachable (a restart): the registry is read again at the next poll,
            # while the batches wait for it through the reconnect deadline
            with contextlib.suppress(psycopg.Error, DatabaseUnavailable):
                self.sync()

    def check(self, stop: threading.Event) -> None:
        for name, (q, handler) in list(self.running.items()):
            failure = q.exception()
            if failure is None or stop.is_set():
                continue
            cause = handler.failure[1] if handler.failure else None
            if isinstance(cause, StreamGone):
                self._stop(name, "the stream was dropped; its query stopped")
                continue
            raise self.on_failure(handler, failure)

    def _stop(self, name: str, why: str) -> None:
        q, handler = self.running.pop(name)
        handler.cancel()
        with contextlib.suppress(Exception):
            q.stop()
        handler.close()
        self.progress(f"[{label(name)}] {why}")

    def queries(self) -> list[StreamingQuery]:
        return [q for q, _h in self.running.values()]

    def handlers(self) -> list[StreamHandler]:
        return [h for _q, h in self.running.values()]

    def tidy(self) -> None:
        for name in self.started:
            with contextlib.suppress(OSError):
                tidy_last_batch(self.config, name)
