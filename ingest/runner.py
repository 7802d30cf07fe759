"""Running ``slidewin ingest``: checks first, then Spark, then a clean stop.

``preflight`` does everything that can fail cheaply -- Java, the database, the schema, the
retention limits -- so bad configuration is one clear line before a JVM is started.
``run`` starts one query per stream (and one per declared stream, ``ingest.typed_stream``,
each over ``<landing>/<name>/``; streams declared later are picked up while it runs), waits
until they finish (``--once``) or a stop is asked for (SIGTERM / SIGINT set ``stop``), then
stops the queries, Spark and its JVM, in that order.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from slidewin.db.clock import Clock, utc_now
from slidewin.db.connect import connect
from slidewin.db.errors import DatabaseUnavailable, fix_for_sqlstate
from slidewin.db.events import partition_count
from slidewin.db.reconnect import Heartbeat, Reconnector, fmt_duration
from slidewin.db.schema import require_schema
from slidewin.db.signals import stop_on_signals
from slidewin.ingest import checkpoints, java
from slidewin.ingest.backlog import BehindAlarm, behind_after, measure
from slidewin.ingest.config import FOREVER, IngestConfig, resolve_retention
from slidewin.ingest.errors import IngestError, first_line
from slidewin.ingest.landing import SWEEP_EVERY_S, LandingSweep
from slidewin.ingest.progress import Totals, batch_line
from slidewin.ingest.sink import BatchResult
from slidewin.ingest.tidy import tidy_last_batch

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from slidewin.ingest.stream import BatchHandler
    from slidewin.ingest.typed_stream import DeclaredStreams, StreamHandler


STOP_WAIT_S = 3.0  # a batch under way may commit; then its statement is cancelled
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
    """Java 17+, checkpoints that belong to this landing folder, a reachable store with the
    ingest schema, retention limits resolved."""
    major = java.check_java()
    checkpoints.claim(config)
    with connect(dsn, autocommit=True) as conn:
        require_schema(conn, "stream_state")  # the ingest's own table
        resolved = resolve_retention(conn, config)
        partitions = partition_count(conn)
    return Prepared(resolved, partitions, major)


def run(
    prepared: Prepared,
    dsn: str,
    progress: Callable[[str], None],
    stop: threading.Event | None = None,
    spark: SparkSession | None = None,
    on_batch: Callable[[str, BatchResult], None] | None = None,
    clock: Clock = utc_now,
    warn: Callable[[str], None] | None = None,
) -> Totals:
    """Run the ingest until done (``--once``) or ``stop`` is set. Returns the totals.

    Unless ``--once``, a warning goes to ``warn`` (default ``progress``) while the ingest falls
    behind: the files waiting in the landing folders and the oldest one's age
    (``ingest.backlog``), at most every 30 s, and a line when it has caught up.

    With ``spark`` given (tests share one session) the queries are stopped but the session is
    left running; otherwise the session is built here and stopped, JVM included, at the end.
    ``clock`` is "now" for the future rule and the lag in the progress lines (tests pin it).
    """
    from slidewin.ingest.spark import build_session, class_cache_state, stop_session
    from slidewin.ingest.stream import BatchHandler, start_stream
    from slidewin.ingest.typed_stream import DeclaredStreams

    config, stop = prepared.config, stop or threading.Event()
    totals = Totals()

    sweep = LandingSweep(config, progress, clock)

    def on_result(stream: str, result: BatchResult) -> None:
        totals.add(result)
        if on_batch is not None:
            on_batch(stream, result)
        progress(batch_line(stream, result, clock()))
        with contextlib.suppress(Exception):  # the batch committed: the next sweep retries
            sweep.after_batch(stream, result.batch_id)  # before Spark's clean-up moves files

    owned = spark is None
    session = (
        build_session(config.master, ui=config.spark_ui, verbose=config.verbose)
        if spark is None else spark
    )
    # one waiter for every stream: a restart prints its lost/back lines once; a stop ends a wait
    reconnect = Reconnector(dsn, config.reconnect, progress, stop=stop)
    # an idle ingest runs no statement: this notices a database gone while no file arrives
    heartbeat = Heartbeat(dsn, reconnect)
    def on_declared(stream: str, result: BatchResult) -> None:
        totals.add(result)
        if on_batch is not None:
            on_batch(stream, result)
        progress(batch_line(stream, result, clock()))

    declared = DeclaredStreams(
        session, config, dsn, progress, on_declared, on_failure=_stream_failed,
        reconnect=reconnect, clock=clock,
    )
    handlers = [
        BatchHandler(
            config, dsn, name, prepared.partitions, on_result, reconnect=reconnect, clock=clock
        )
        for name in config.stream_names
    ]
    queries: list[StreamingQuery] = []
    # before the queries list the landing directory: --once reads what it hands back, never
    # meets what it moves aside, and a killed run's leftovers are tidied
    sweep.sweep(leftovers=True)
    swept = threading.Event()
    try:
        for handler in handlers:
            queries.append(start_stream(session, config, handler))
        progress(_started_line(config, session))
        # the declared streams' folders before their queries list them, then with each sweep
        sweep.set_aside_declared(declared_folders(config, declared.names(dsn)))
        declared.sync()
        if not config.once:
            watch = _backlog_watch(config, sweep, declared, warn or progress, clock)
            _sweep_until(sweep, swept, watch, lambda: sweep.set_aside_declared(
                declared_folders(config, list(declared.running))))
        # PySpark's SparkContext installs its own SIGINT handler (cancel jobs, raise
        # KeyboardInterrupt); ours goes back on top so Ctrl-C and SIGTERM stop cleanly
        with stop_on_signals(stop):
            _wait(queries, handlers, stop, reconnect, declared, heartbeat)
    finally:
        swept.set()
        heartbeat.close()
        _stop_all([*queries, *declared.queries()], [*handlers, *declared.handlers()])
        for name in config.stream_names:
            tidy_last_batch(config, name)
        declared.tidy()
        with contextlib.suppress(OSError):
            sweep.prune()  # --archive-for 0 (or a short one) holds for a --once run too
        if owned:
            if class_cache_state(session) == "created":
                progress(CLASS_CACHE_NOTE)
            stop_session(session)
    return totals


def _sweep_until(
    sweep: LandingSweep, stop: threading.Event, watch: Callable[[], None] = lambda: None,
    declared: Callable[[], object] = lambda: None,
) -> None:
    """Sweep the landing directory every few seconds in a thread until ``stop`` is set; then
    ``watch`` what is left waiting."""

    def loop() -> None:
        while not stop.wait(SWEEP_EVERY_S):
            with contextlib.suppress(Exception):  # a sweep that fails is tried again later
                sweep.sweep()
                declared()
            with contextlib.suppress(Exception):  # so is a measurement
                watch()

    threading.Thread(target=loop, name="slidewin-landing-sweep", daemon=True).start()


def declared_folders(config: IngestConfig, names: list[str]
                     ) -> list[tuple[Path, Path, tuple[str, ...]]]:
    """(folder, checkpoint, file suffixes) of each declared stream named."""
    from slidewin.ingest.typed import EXTENSIONS
    from slidewin.ingest.typed_stream import checkpoint_name, folder_of

    suffixes = tuple(f".{ext}" for ext in EXTENSIONS)
    return [(folder_of(config, name), config.checkpoint_for(checkpoint_name(name)), suffixes)
            for name in names]


def _backlog_watch(
    config: IngestConfig,
    sweep: LandingSweep,
    declared: DeclaredStreams,
    warn: Callable[[str], None],
    clock: Clock,
) -> Callable[[], None]:
    """Measure the files waiting in every stream's folder; warn while the ingest is behind."""
    alarm = BehindAlarm(behind_after(config.trigger, config.streams_trigger or config.trigger))

    def watch() -> None:
        folders = sweep.folders(declared_folders(config, list(declared.running)))
        now = clock()
        line = alarm.check(measure(folders, now), now)
        if line is not None:
            warn(line)

    return watch


def _wait(
    queries: list[StreamingQuery],
    handlers: list[BatchHandler],
    stop: threading.Event,
    reconnect: Reconnector | None = None,
    declared: DeclaredStreams | None = None,
    heartbeat: Heartbeat | None = None,
) -> None:
    """Until every query ended (``--once``) or ``stop`` is set; ``declared``: the declared
    streams' queries, waited on, checked and kept in step with the registry as well;
    ``heartbeat``: the database checked every few seconds, batches or none (a database gone
    is waited for, and ends the run after ``--reconnect-timeout``)."""
    from pyspark.errors import StreamingQueryException

    pairs = list(zip(queries, handlers, strict=True))

    def running() -> bool:
        return any(q.isActive for q in queries) or (declared is not None and declared.active())

    while not stop.is_set() and running():
        for q, handler in pairs:
            with contextlib.suppress(StreamingQueryException):  # raised again just below
                q.awaitTermination(0.5)  # type: ignore[arg-type]  # seconds, a float in PySpark
            _check(q, handler, stop, reconnect)
        if declared is not None:
            declared.tick(stop)
        if heartbeat is not None:
            _beat(heartbeat, stop)
    for q, handler in pairs:  # a stream that failed as the last one ended
        _check(q, handler, stop, reconnect)
    if declared is not None:
        declared.check(stop)


def _beat(heartbeat: Heartbeat, stop: threading.Event) -> None:
    """One heartbeat; a wait for the database that a stop ended is the stop, not a failure."""
    try:
        heartbeat.beat()
    except DatabaseUnavailable:
        if not stop.is_set():
            raise


def _check(
    query: StreamingQuery,
    handler: BatchHandler,
    stop: threading.Event,
    reconnect: Reconnector | None,
) -> None:
    failure = query.exception()
    if failure is None or stop.is_set():  # a stop may end a batch waiting for the database
        return
    if reconnect is not None and reconnect.gave_up is not None:
        raise reconnect.gave_up from None  # our message, not Spark's wrapping
    raise _stream_failed(handler, failure)


def _stream_failed(
    handler: BatchHandler | StreamHandler, failure: BaseException
) -> IngestError:
    """The error that stopped a stream: the batch handler's own exception when it raised one
    (Spark's message wraps it as FOREACH_BATCH_USER_FUNCTION_ERROR and loses the cause)."""
    if handler.failure is None:
        text = first_line(str(failure))
        fix = "fix the cause"
        if "Wrong basePath" in text:  # a checkpoint of another landing folder
            fix = "give each landing folder its own --query-id (or --checkpoint-dir)"
        return IngestError(
            f"{handler.subject} failed in Spark: {text}; {fix} and run slidewin ingest "
            "again (uncommitted batches are read again)"
        )
    batch_id, exc = handler.failure
    fix = fix_for_sqlstate(getattr(exc, "sqlstate", None)) or "fix the cause"
    error = IngestError(
        f"{handler.subject} failed in batch {batch_id}: {type(exc).__name__}: "
        f"{first_line(str(exc))}; the batch's transaction rolled back and it is read again "
        f"when the ingest restarts -- {fix}, then run slidewin ingest again"
    )
    error.__cause__ = exc  # --debug shows where it was raised
    return error


def _stop_all(
    queries: list[StreamingQuery], handlers: list[BatchHandler | StreamHandler]
) -> None:
    """Let a running batch finish for a few seconds, then cancel its database statement and
    stop: a stop mid-batch is safe -- the batch rolls back and is replayed, skipped or redone,
    on the next start -- and a long statement (a large batch's session windows, a lock wait)
    must not hold a Ctrl-C for minutes, nor keep running in the server after we are gone."""
    for q in queries:
        with contextlib.suppress(Exception):
            _wait_between_batches(q, timeout_s=STOP_WAIT_S)
    for h in handlers:
        h.cancel()
    for q in queries:
        with contextlib.suppress(Exception):
            q.stop()
    for h in handlers:
        h.close()


def _wait_between_batches(q: StreamingQuery, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while q.isActive and q.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.1)


def _started_line(config: IngestConfig, spark: SparkSession) -> str:
    mode = "once (availableNow)" if config.once else f"every {config.trigger.total_seconds():g}s"
    if not config.once and config.streams_trigger is not None:
        mode += f" (declared streams every {config.streams_trigger.total_seconds():g}s)"
    ui = f", UI {spark.sparkContext.uiWebUrl}" if config.spark_ui else ""
    return (
        f"ingest {config.query_id}: {', '.join(config.stream_names)} from {config.landing}, "
        f"{mode}, master {config.master}{ui}, grace {config.grace.total_seconds():g}s, "
        f"history {_opt(config.history)}, processed files: {config.processed}{_kept(config)}"
    )


def _kept(config: IngestConfig) -> str:
    if config.processed != "archive" or config.archive_for is None:
        return ""
    if config.archive_for >= FOREVER:
        return " (kept forever)"
    return f" (kept {fmt_duration(config.archive_for)})"


def _opt(value: timedelta | None) -> str:
    return f"{value.total_seconds():g}s" if value is not None else "none"
