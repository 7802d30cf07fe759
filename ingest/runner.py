"""Running ``slidewin ingest``: checks first, then Spark, then a clean stop.

``preflight`` does everything that can fail cheaply -- Java, the database, the schema, the
retention limits -- so bad configuration is one clear line before a JVM is started.
``run`` starts one query per stream, waits until they finish (``--once``) or a stop is asked
for (SIGTERM / SIGINT set ``stop``), then stops the queries, Spark and its JVM, in that order.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import psycopg

from db.connect import connect
from db.errors import SchemaMissing
from db.events import partition_count
from db.reconnect import Reconnector
from db.schema import current_version
from ingest import java
from ingest.config import IngestConfig, resolve_retention
from ingest.errors import IngestError, first_line
from ingest.progress import Totals, batch_line
from ingest.sink import BatchResult
from ingest.tidy import tidy_last_batch

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from ingest.stream import BatchHandler


STOP_WAIT_S = 30.0
CLASS_CACHE_NOTE = (
    "saving the JVM's class cache for faster Spark starts (once per Java and PySpark, "
    "about 10 s; SLIDEWIN_CLASS_CACHE=off skips it)"
)


@dataclass(frozen=True)
class Prepared:
    config: IngestConfig
    partitions: int
    java_major: int


def preflight(config: IngestConfig, dsn: str) -> Prepared:
    """Java 17+, a reachable store with the ingest schema, retention limits resolved."""
    major = java.check_java()
    with connect(dsn, autocommit=True) as conn:
        _check_schema(conn)
        resolved = resolve_retention(conn, config)
        partitions = partition_count(conn)
    return Prepared(resolved, partitions, major)


def _check_schema(conn: psycopg.Connection) -> None:
    fix = "run `slidewin db init` (it is idempotent) and try again"
    if current_version(conn) is None:
        raise SchemaMissing(f"the database has no slidewin schema; {fix}")
    found = conn.execute("SELECT to_regclass('slidewin.stream_state')").fetchone()
    if not found or found[0] is None:
        raise SchemaMissing(f"the slidewin schema lacks the ingest tables (stream_state); {fix}")


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set ``stop`` (the main loop then stops Spark cleanly)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    for sig in previous:
        signal.signal(sig, lambda *_: stop.set())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run(
    prepared: Prepared,
    dsn: str,
    progress: Callable[[str], None],
    stop: threading.Event | None = None,
    spark: SparkSession | None = None,
    on_batch: Callable[[str, BatchResult], None] | None = None,
) -> Totals:
    """Run the ingest until done (``--once``) or ``stop`` is set. Returns the totals.

    With ``spark`` given (tests share one session) the queries are stopped but the session is
    left running; otherwise the session is built here and stopped, JVM included, at the end.
    """
    from ingest.spark import build_session, class_cache_state, stop_session
    from ingest.stream import BatchHandler, start_stream

    config, stop = prepared.config, stop or threading.Event()
    totals = Totals()

    def on_result(stream: str, result: BatchResult) -> None:
        totals.add(result)
        if on_batch is not None:
            on_batch(stream, result)
        progress(batch_line(stream, result, datetime.now(UTC)))

    owned = spark is None
    session = build_session(config.master, ui=config.spark_ui) if spark is None else spark
    # one waiter for every stream: a restart prints its lost/back lines once; a stop ends a wait
    reconnect = Reconnector(dsn, config.reconnect, progress, stop=stop)
    handlers = [
        BatchHandler(config, dsn, name, prepared.partitions, on_result, reconnect=reconnect)
        for name in config.stream_names
    ]
    queries: list[StreamingQuery] = []
    try:
        for handler in handlers:
            queries.append(start_stream(session, config, handler))
        progress(_started_line(config, session))
        # PySpark's SparkContext installs its own SIGINT handler (cancel jobs, raise
        # KeyboardInterrupt); ours goes back on top so Ctrl-C and SIGTERM stop cleanly
        with stop_on_signals(stop):
            _wait(queries, stop, reconnect)
    finally:
        _stop_all(queries, handlers)
        for name in config.stream_names:
            tidy_last_batch(config, name)
        if owned:
            if class_cache_state(session) == "created":
                progress(CLASS_CACHE_NOTE)
            stop_session(session)
    return totals


def _wait(
    queries: list[StreamingQuery], stop: threading.Event, reconnect: Reconnector | None = None
) -> None:
    while not stop.is_set() and any(q.isActive for q in queries):
        for q in queries:
            try:
                q.awaitTermination(0.5)  # raises Spark's wrapping of a failed batch's error
            except Exception:
                if stop.is_set():  # a stop ended a batch that was waiting for the database
                    return
                if reconnect is not None and reconnect.gave_up is not None:
                    raise reconnect.gave_up from None  # our message, not Spark's wrapping
                raise
            failure = q.exception()
            if failure is not None:
                raise IngestError(f"stream {q.name} failed: {first_line(str(failure))}")


def _stop_all(queries: list[StreamingQuery], handlers: list[BatchHandler]) -> None:
    """Let a running batch finish (bounded wait), then stop: a stop mid-batch is safe -- the
    batch is replayed and skipped or redone -- but interrupts Spark's checkpoint writes."""
    for q in queries:
        with contextlib.suppress(Exception):
            _wait_between_batches(q, timeout_s=STOP_WAIT_S)
            q.stop()
    for h in handlers:
        h.close()


def _wait_between_batches(q: StreamingQuery, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while q.isActive and q.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.1)


def _started_line(config: IngestConfig, spark: SparkSession) -> str:
    mode = "once (availableNow)" if config.once else f"every {config.trigger.total_seconds():g}s"
    ui = f", UI {spark.sparkContext.uiWebUrl}" if config.spark_ui else ""
    return (
        f"ingest {config.query_id}: {', '.join(config.stream_names)} from {config.landing}, "
        f"{mode}, master {config.master}{ui}, grace {config.grace.total_seconds():g}s, "
        f"history {_opt(config.history)}, processed files: {config.processed}"
    )


def _opt(value: timedelta | None) -> str:
    return f"{value.total_seconds():g}s" if value is not None else "none"
