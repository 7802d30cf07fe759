"""``slidewin jobs run``: the APScheduler 3.x scheduler and the functions its jobs call.

Stored jobs name a function here (``jobs.scheduler:retention_job`` ...) and plain kwargs; the
functions find their database through the *runtime* the running scheduler installs (the DSN it
was started with, a stop flag, where progress lines go). Each executor thread keeps one
autocommit connection and reconnects after an error.

Scheduling: a retention job fires every ``yield`` (IntervalTrigger, one instance at a time,
missed runs coalesced). Each run calls ``run_until_caught_up``: back-to-back rounds while any
partition fills its chunk, then it returns and the next run comes ``yield`` after the previous
one started (so the pause is at most ``yield``). Stopping sets the flag the rounds check, so
shutdown waits for one round at most (and for a vacuum pass in progress).

Time: what is expired, and the times a run is recorded with, come from the runtime's ``clock``
(default the wall clock; tests pin it). APScheduler's own timing and the durations reported
are the wall / monotonic clock: they say when and how long, not which rows go.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from apscheduler.executors.pool import ThreadPoolExecutor

from slidewin.db.clock import Clock, utc_now
from slidewin.db.connect import ThreadConnections
from slidewin.db.errors import DatabaseUnavailable, SlidewinError
from slidewin.db.reconnect import Reconnector, ReconnectPolicy, is_connection_lost
from slidewin.db.retention_settings import DEFAULT_NAME, read_settings
from slidewin.jobs.config import RetentionPolicy
from slidewin.jobs.errors import JobError
from slidewin.jobs.retention import (
    CatchUpResult,
    NibblePool,
    RoundResult,
    expire_sessions,
    nibble_streams,
    run_until_caught_up,
    tick_joins,
)
from slidewin.jobs.runs import JobRun, record_run
from slidewin.jobs.status import no_jit, retention_lag
from slidewin.jobs.store import JOB_DEFAULTS, Scheduler, check_schema, make_engine, make_jobstore
from slidewin.jobs.vacuum import BackgroundVacuum

MAX_ROUNDS = 500  # rounds per run, so one run stays bounded and gets recorded
VACUUM_EVERY_S = 1.0  # check for partitions due a vacuum this often during long catch-ups
SKIPS_BEFORE_WARNING = 3  # retention runs skipped in a row, by one holder, before a warning
POLL_S = 1.0  # wake the scheduler this often to see jobs other processes added


@dataclass
class Runtime:
    """What the running scheduler gives its jobs."""

    dsn: str
    stop: threading.Event = field(default_factory=threading.Event)
    report: Callable[[str], None] = lambda _msg: None
    on_round: Callable[[RoundResult], None] | None = None
    # each declared stream's nibble call: (stream, rows deleted, ms) -- `bench retention --stream`
    on_nibble: Callable[[str, int, float], None] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    pools: dict[tuple[str, int], NibblePool] = field(default_factory=dict)
    vacuums: list[BackgroundVacuum] = field(default_factory=list)
    reconnect_policy: ReconnectPolicy = field(default_factory=ReconnectPolicy)
    clock: Clock = utc_now  # "now" for the retention cutoff and the recorded run times
    conns: ThreadConnections = field(init=False)  # each job thread's own connection
    reconnector: Reconnector = field(init=False)  # one wait for every thread, lines once
    fatal: DatabaseUnavailable | None = None  # the database did not come back in time
    skipping: dict[str, tuple[int | None, int]] = field(default_factory=dict)  # job -> holder
    # pid, runs skipped in a row

    def vacuum(self) -> BackgroundVacuum:
        """The one background vacuumer of this scheduler (started on first use)."""
        with self.lock:
            if not self.vacuums:
                self.vacuums.append(BackgroundVacuum(self.dsn))
            return self.vacuums[0]

    def pool(self, job: str, workers: int) -> NibblePool | None:
        """The job's nibble workers (None for one worker: the job's own connection does it)."""
        if workers <= 1:
            return None
        with self.lock:
            key = (job, workers)
            if key not in self.pools:
                self.pools[key] = NibblePool(self.dsn, workers)
            return self.pools[key]

    def __post_init__(self) -> None:
        self.conns = ThreadConnections(self.dsn, no_jit)
        self.reconnector = Reconnector(self.dsn, self.reconnect_policy, self.report, stop=self.stop)

    def await_database(self, exc: BaseException) -> None:
        """The database went away: wait for it (``--reconnect-timeout``); if it does not come
        back, remember why and stop the scheduler (``run_scheduler`` then raises it)."""
        self.drop_connection()
        try:
            self.reconnector.wait(exc)
        except DatabaseUnavailable:
            if self.fatal is None:
                self.fatal = self.reconnector.gave_up  # None when the wait ended for a stop
            self.stop.set()

    def on_store_error(self, exc: Exception) -> None:
        """The job store (APScheduler's own connection) failed: wait if the database left."""
        if is_connection_lost(exc):
            self.await_database(exc)

    def connection(self) -> psycopg.Connection:
        return self.conns.get()

    def drop_connection(self) -> None:
        self.conns.drop()

    def close(self) -> None:
        with self.lock:
            for vacuum in self.vacuums:
                vacuum.close()
            self.vacuums.clear()
            for pool in self.pools.values():
                pool.close()
            self.pools.clear()
        self.conns.close_all()


_RUNTIME: Runtime | None = None


def _runtime() -> Runtime:
    if _RUNTIME is None:
        raise JobError("slidewin jobs run only inside a running scheduler: slidewin jobs run")
    return _RUNTIME


# -- the job functions (module level, plain kwargs: they pickle into the job store) ----------


def retention_job(name: str, **policy_kwargs: Any) -> None:
    """Catch up with the policy, vacuum partitions that need it, record the run."""
    rt = _runtime()
    policy = RetentionPolicy.from_kwargs(policy_kwargs)
    _guarded(rt, name, "retention", lambda conn: _retention(rt, conn, name, policy))


def refresh_job(name: str) -> None:
    """Refresh slidewin.minute_history (single-flight in SQL)."""
    rt = _runtime()
    _guarded(rt, name, "refresh", lambda conn: _refresh(rt, conn, name))


def stats_job(name: str) -> None:
    """Snapshot rows, sizes, dead tuples and retention lag; record it and print one line."""
    rt = _runtime()
    _guarded(rt, name, "stats", lambda conn: _stats(rt, conn, name))


def _guarded(rt: Runtime, name: str, kind: str, body: Callable[[psycopg.Connection], None]) -> None:
    """Run ``body``; a failure is reported and recorded, never raised into the scheduler."""
    started = rt.clock()
    try:
        body(rt.connection())
    except (psycopg.Error, SlidewinError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if is_connection_lost(exc):  # said by the lost/back lines, recorded once it is back
            rt.await_database(exc)
            if rt.stop.is_set():
                return
        else:
            rt.report(f"job {name}: {kind} failed: {first}")
            rt.drop_connection()
        _record_failure(rt, JobRun(name, kind, started, rt.clock(), error=first))


def _record_failure(rt: Runtime, run: JobRun) -> None:
    try:
        record_run(rt.connection(), run)
    except (psycopg.Error, SlidewinError):
        rt.drop_connection()


def _retention(rt: Runtime, conn: psycopg.Connection, name: str, policy: RetentionPolicy) -> None:
    started, began = rt.clock(), time.monotonic()
    vacuum = rt.vacuum()
    last_nudge = [began]

    def on_round(result: RoundResult) -> None:
        if rt.on_round is not None:
            rt.on_round(result)
        if time.monotonic() - last_nudge[0] >= VACUUM_EVERY_S:
            vacuum.nudge()
            last_nudge[0] = time.monotonic()

    result = run_until_caught_up(
        conn, policy, rt.clock, stop=rt.stop, max_rounds=MAX_ROUNDS, on_round=on_round,
        pool=rt.pool(name, policy.workers),
    )
    if not result.skipped:
        vacuum.nudge()
    expired = expire_sessions(conn, policy.chunk, MAX_ROUNDS) if not result.skipped else 0
    by_stream = nibble_streams(conn, rt.clock(), policy.chunk, MAX_ROUNDS, rt.on_nibble)
    by_join = tick_joins(conn, rt.clock(), policy.chunk, MAX_ROUNDS)
    vacuumed, vacuum_ms = vacuum.drain()
    finished = rt.clock()
    run = _retention_run(name, started, finished, result, vacuumed, vacuum_ms)
    if expired:
        run = replace(run, detail={**run.detail, "sessions_expired": expired})
    if by_stream:
        run = replace(run, detail={**run.detail, "streams_deleted": by_stream})
    if by_join:
        run = replace(run, detail={**run.detail, "joins_deleted": by_join})
    if result.skipped:
        run = replace(run, detail={**run.detail, **skipped_detail(result)})
    record_run(conn, run)
    _report_skips(rt, name, result)
    if result.total or vacuumed or expired or by_stream or by_join:
        took = timedelta(seconds=time.monotonic() - began)
        line = _round_line(name, result, took, vacuumed)
        line += f"; {expired} sessions past their retention deleted" if expired else ""
        line += "".join(f"; stream {s}: {n} rows past its history deleted"
                        for s, n in sorted(by_stream.items()))
        line += "".join(f"; join {j}: {n} results past both inputs' history deleted"
                        for j, n in sorted(by_join.items()))
        rt.report(line)


def skipped_detail(result: CatchUpResult) -> dict[str, Any]:
    """What a run whose round was skipped records: why, and the lock holder's pid."""
    holder = f"pid {result.held_by}" if result.held_by is not None else "another process"
    return {"skipped_because": f"{holder} holds the retention lock (slidewin.job_locks)",
            "held_by_pid": result.held_by}


def _report_skips(rt: Runtime, name: str, result: CatchUpResult) -> None:
    """A warning line once the job's rounds were skipped SKIPS_BEFORE_WARNING runs in a row
    for the same holder (two schedulers meeting now and then say nothing), and a line when they
    run again after it: every run is recorded, the terminal gets the lasting changes."""
    if result.skipped:
        holder, runs = rt.skipping.get(name, (result.held_by, 0))
        runs = runs + 1 if holder == result.held_by else 1
        rt.skipping[name] = (result.held_by, runs)
        if runs == SKIPS_BEFORE_WARNING:
            rt.report(f"warning: retention {name}: {runs} runs in a row skipped, "
                      f"{skipped_detail(result)['skipped_because']}; no rows are deleted "
                      "while it holds it (see: slidewin jobs status)")
    elif name in rt.skipping:
        _holder, runs = rt.skipping.pop(name)
        if runs >= SKIPS_BEFORE_WARNING:
            rt.report(f"retention {name}: the retention lock is free again; rounds run")


def _retention_run(
    name: str, started: datetime, finished: datetime, result: CatchUpResult,
    vacuumed: list[str], vacuum_ms: float,
) -> JobRun:
    detail = {"vacuumed": vacuumed, "vacuum_ms": round(vacuum_ms, 1)} if vacuumed else {}
    return JobRun(
        name, "retention", started, finished, result.rounds, result.deleted,
        result.caught_up, result.skipped, detail,
    )


def _round_line(
    name: str, result: CatchUpResult, took: timedelta, vacuumed: list[str]
) -> str:
    busiest = max(result.deleted.items(), key=lambda kv: kv[1], default=(None, 0))
    line = (
        f"retention {name}: {result.rounds} round(s), deleted {result.total} rows "
        f"in {took.total_seconds() * 1000:.0f} ms (most from partition {busiest[0]}: {busiest[1]})"
        f"{'' if result.caught_up else ', not caught up yet'}"
    )
    return line + (f"; vacuumed {', '.join(vacuumed)}" if vacuumed else "")


def _refresh(rt: Runtime, conn: psycopg.Connection, name: str) -> None:
    started = rt.clock()
    row = conn.execute("SELECT slidewin.refresh_minute_history()").fetchone()
    refreshed = bool(row and row[0])
    finished = rt.clock()
    record_run(conn, JobRun(name, "refresh", started, finished, detail={"refreshed": refreshed}))


def _stats(rt: Runtime, conn: psycopg.Connection, name: str) -> None:
    started = rt.clock()
    detail = store_stats(conn, started)
    record_run(conn, JobRun(name, "stats", started, rt.clock(), detail=detail))
    rt.report(
        f"stats: {detail['rows']} rows, {detail['bytes'] // 1024} kB table+index, "
        f"{detail['dead_tuples']} dead tuples, oldest age over history "
        f"{detail['max_age_over_s']} s, rows over target {detail['max_rows_over']}"
    )


def store_stats(conn: psycopg.Connection, now: datetime) -> dict[str, Any]:
    """Totals over the partitions plus the worst lag of the ``default`` policy (if any)."""
    policy = _default_policy(conn)
    lag = retention_lag(conn, policy, now) if policy else []
    sizes = conn.execute(
        "SELECT coalesce(sum(pg_table_size(i.inhrelid) + pg_indexes_size(i.inhrelid)), 0),"
        " coalesce(sum(s.n_dead_tup), 0)"
        " FROM pg_inherits i LEFT JOIN pg_stat_user_tables s ON s.relid = i.inhrelid"
        " WHERE i.inhparent = 'slidewin.events'::regclass"
    ).fetchone() or (0, 0)
    rows = conn.execute("SELECT coalesce(sum(n), 0) FROM slidewin.rollups").fetchone() or (0,)
    ages = [p.age_over_s for p in lag if p.age_over_s is not None]
    overs = [p.rows_over for p in lag if p.rows_over is not None]
    return {
        "rows": int(rows[0]),
        "bytes": int(sizes[0]),
        "dead_tuples": int(sizes[1]),
        "max_age_over_s": max(ages) if ages else None,
        "max_rows_over": max(overs) if overs else None,
    }


def _default_policy(conn: psycopg.Connection) -> RetentionPolicy | None:
    settings = read_settings(conn, DEFAULT_NAME)
    return RetentionPolicy.from_settings(settings) if settings is not None else None


# -- running ---------------------------------------------------------------------------------


def make_scheduler(
    dsn: str, *, threads: int = 4, on_store_error: Callable[[Exception], None] | None = None
) -> Scheduler:
    """A scheduler over the PostgreSQL job store (not started). Its engine pings pooled
    connections before use, so after a database restart it reconnects instead of failing."""
    return Scheduler(
        jobstores={"default": make_jobstore(make_engine(dsn), on_store_error)},
        executors={"default": ThreadPoolExecutor(threads)},
        job_defaults=JOB_DEFAULTS,
        timezone=UTC,
        on_store_error=on_store_error,
    )


def run_scheduler(
    dsn: str,
    *,
    stop: threading.Event | None = None,
    duration: timedelta | None = None,
    report: Callable[[str], None] = lambda _msg: None,
    on_round: Callable[[RoundResult], None] | None = None,
    reconnect: ReconnectPolicy | None = None,
    clock: Clock = utc_now,
    on_nibble: Callable[[str, int, float], None] | None = None,
) -> None:
    """Run the stored jobs until ``stop`` is set (or ``duration`` passed); then shut down cleanly.

    Callers install signal handlers that set ``stop``. Shutdown waits for running jobs, which
    check the same flag between rounds. A database that goes away is waited for (``reconnect``,
    default 3 minutes); if it does not come back, the scheduler stops and DatabaseUnavailable
    is raised. ``clock`` is "now" for the jobs' retention cutoffs and run records; ``on_round``
    hears of each retention round of the built-in stream, ``on_nibble`` of each nibble call of
    a declared stream.
    """
    global _RUNTIME
    check_schema(dsn)
    _quiet_apscheduler()
    runtime = Runtime(dsn, stop or threading.Event(), report, on_round, on_nibble,
                      reconnect_policy=reconnect or ReconnectPolicy(), clock=clock)
    _RUNTIME = runtime
    scheduler = make_scheduler(dsn, on_store_error=runtime.on_store_error)
    scheduler.start()
    deadline = time.monotonic() + duration.total_seconds() if duration is not None else None
    try:
        while not runtime.stop.wait(_next_wait(deadline)):
            if deadline is not None and time.monotonic() >= deadline:
                break
            scheduler.wakeup()
    finally:
        scheduler.pause()  # no new runs; running ones see the stop flag after their round
        runtime.stop.set()
        scheduler.shutdown(wait=True)
        runtime.close()
        _RUNTIME = None
    if runtime.fatal is not None:
        raise runtime.fatal


def _next_wait(deadline: float | None) -> float:
    if deadline is None:
        return POLL_S
    return max(0.0, min(POLL_S, deadline - time.monotonic()))


def _quiet_apscheduler() -> None:
    """A fast retention job often finds its previous run still going; APScheduler logs each
    such skip as a warning. That is the design (one instance, coalesced), not news."""
    logging.getLogger("apscheduler").setLevel(logging.ERROR)
