"""One run of the client simulator: the generator in the calling thread, the rest in threads.

Threads (each with its own connection, as psycopg connections are not shared across threads):
- reporter: a report every display interval;
- max tracker: looks every 10 ms, queries the window max after a change (``client.sim.maxtracker``);
- freshness: looks every 10 ms, queries the rollups of pending seconds after an insert;
- deleter (only with ``--no-inline --deleter client``): retention rounds via
  ``jobs.retention.run_until_caught_up``, pausing ``deleteyieldtime`` after a round that filled no
  chunk -- VoltDB's ContinuousDeleter.

The run ends at ``duration`` or when ``stop`` is set (Ctrl-C, SIGTERM). The generator stops
first; then the session waits up to ``drain_s`` for the events already written to become
visible (so they count in the summary), stops the threads, prints a last report and returns the
final summary.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import TypeVar

import psycopg

from slidewin.client.sim.config import ClientConfig
from slidewin.client.sim.freshness import FreshnessTracker
from slidewin.client.sim.generator import Batch, EventGenerator, GeneratorConfig
from slidewin.client.sim.live import Display
from slidewin.client.sim.maxtracker import MaxTracker
from slidewin.client.sim.reporter import (
    Failures,
    Report,
    Reporter,
    StoreWatch,
    Totals,
    format_report,
)
from slidewin.client.sim.summary import Summary, build_summary
from slidewin.db.clock import Clock, utc_now
from slidewin.db.connect import connect
from slidewin.db.errors import DatabaseUnavailable
from slidewin.db.reconnect import Reconnector, ReconnectPolicy, is_connection_lost
from slidewin.db.retention_settings import (
    DEFAULT_NAME,
    RetentionSettings,
    read_settings,
    upsert_settings,
)
from slidewin.jobs.config import RetentionPolicy

FRESHNESS_POLL_S = 0.01
T = TypeVar("T")
Step = Callable[[], object]

def policy_of(config: ClientConfig) -> RetentionPolicy:
    return RetentionPolicy(
        history=timedelta(seconds=config.history_s) if config.history_s else None,
        max_rows=config.max_rows,
        chunk=config.deletechunksize,
        yield_=timedelta(milliseconds=config.deleteyieldtime_ms),
    )


def record_retention(conn: psycopg.Connection, config: ClientConfig) -> None:
    """Store the policy as retention setting 'default', which ingest reads for its horizon."""
    upsert_settings(
        conn,
        RetentionSettings(DEFAULT_NAME, config.history_s, config.max_rows,
                          config.deletechunksize, round(config.deleteyieldtime_ms)),
    )


@dataclass
class Timing:
    started_mono: float
    warmup_end_mono: float
    end_mono: float


class ClientSession:
    """Wire the parts together; ``run`` blocks until the end and returns the summary."""

    def __init__(
        self,
        config: ClientConfig,
        dsn: str,
        display: Display,
        clock: Clock = utc_now,
        drain_s: float = 10.0,
        extra_report: Callable[[], list[str]] | None = None,
    ) -> None:
        self.config, self.dsn, self.display, self.clock = config, dsn, display, clock
        self.drain_s = drain_s
        # lines added to every report (the demo's second stream), read in the reporter thread
        self.extra_report = extra_report
        self.failures = Failures()
        self.freshness = FreshnessTracker(clock=clock)
        self.generator = EventGenerator(
            GeneratorConfig(config.landing, rate=config.ratelimit, seed=config.seed,
                            fmt=config.fmt, keys=config.keys, burst_s=config.burst,
                            pause_s=config.pause),
            clock=clock,
        )
        self._threads_stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: list[psycopg.Connection] = []
        self.reporter: Reporter | None = None
        # one wait for every thread: a restart prints its lost/back lines once
        policy = ReconnectPolicy(timeout=timedelta(seconds=config.reconnect_timeout))
        self.reconnector = Reconnector(dsn, policy, display.line, stop=self._threads_stop)
        self._stop = threading.Event()  # run()'s stop: set when the database did not come back

    def _connect(self) -> psycopg.Connection:
        conn = connect(self.dsn, autocommit=True)
        self._conns.append(conn)
        return conn

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=f"slidewin-{name}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def _loop(
        self, name: str, interval_s: float, step: Step,
        reopen: Callable[[psycopg.Connection], Step],
    ) -> None:
        """Call ``step`` every ``interval_s`` until the threads stop; count its failures. When
        the database went away, wait for it and go on with ``reopen(a new connection)``."""
        while not self._threads_stop.wait(interval_s):
            try:
                step()
            except psycopg.Error as exc:
                self.failures.add(name, exc)
                if is_connection_lost(exc):
                    step = self._after_lost(exc, reopen) or step

    def _after_lost(
        self, exc: BaseException, reopen: Callable[[psycopg.Connection], T]
    ) -> T | None:
        """Wait for the database (``--reconnect-timeout``), then ``reopen`` on a new connection.
        None when that failed (the caller's next attempt tries again) or the wait gave up (the
        session then stops and ``run`` raises why)."""
        try:
            self.reconnector.wait(exc)
            return reopen(self._connect())
        except (psycopg.Error, DatabaseUnavailable):
            if self.reconnector.gave_up is not None:
                self._threads_stop.set()
                self._stop.set()
            return None

    def start_threads(self) -> None:
        watch = StoreWatch(self._connect())
        self.reporter = Reporter(self._connect(), watch, self.generator.stats, self.freshness,
                                 self.failures, self.clock)
        tracker = MaxTracker(self._connect(), self.config.max_window_s, self.clock,
                             emit=self.display.line)
        fresh_step = self.freshness.poller(self._connect())
        max_every = self.config.maxinterval_ms / 1000
        self._spawn("max", lambda: self._loop(
            "max tracker", max_every, tracker.poll, partial(_reopened, tracker)))
        self._spawn("freshness", lambda: self._loop(
            "freshness", FRESHNESS_POLL_S, fresh_step, self._reopen_freshness))
        self._spawn("reporter", lambda: self._loop(
            "reporter", self.config.displayinterval, self._report, self._reopen_reporter))
        if self.config.runs_deleter:
            self._spawn("deleter", self._deleter(self._connect()))

    def _reopen_freshness(self, conn: psycopg.Connection) -> Step:
        step = self.freshness.poller(conn)  # LISTENs first, then looks once: inserts
        self.freshness.poll(conn)  # committed while disconnected signalled nobody
        return step

    def _reopen_reporter(self, conn: psycopg.Connection) -> Step:
        assert self.reporter is not None
        self.reporter.reopen(conn, self._connect())
        return self._report

    def _report(self) -> None:
        assert self.reporter is not None
        self.display.report(self._lines(self.reporter.report()))

    def _lines(self, report: Report) -> list[str]:
        extra = self.extra_report() if self.extra_report is not None else []
        return [*format_report(report), *extra]

    def _deleter(self, conn: psycopg.Connection) -> Callable[[], None]:
        from slidewin.jobs.retention import run_until_caught_up

        policy = policy_of(self.config)
        pause = self.config.deleteyieldtime_ms / 1000

        def run() -> None:
            current = conn
            while not self._threads_stop.is_set():
                try:
                    result = run_until_caught_up(current, policy, self.clock,
                                                 stop=self._threads_stop, wait=True)
                except psycopg.Error as exc:
                    self.failures.add("deleter", exc)
                    result = None
                    if is_connection_lost(exc):
                        current = self._after_lost(exc, lambda new: new) or current
                if result is None or result.caught_up:
                    self._threads_stop.wait(pause)

        return run

    def run(self, stop: threading.Event) -> Summary:
        """Generate until the duration ends or ``stop`` is set; then drain and summarise.

        A database that goes away is waited for by the threads (the generator only writes
        files); if it does not come back within --reconnect-timeout, DatabaseUnavailable."""
        self._stop = stop
        with connect(self.dsn, autocommit=True) as conn:
            if self.config.record_policy or read_settings(conn, DEFAULT_NAME) is None:
                record_retention(conn, self.config)
        started = time.monotonic()
        timing = Timing(started, started + self.config.warmup, started + self.config.duration)
        self.start_threads()
        assert self.reporter is not None
        warm = _WarmupMark(self, timing.warmup_end_mono)
        try:
            self.generator.run(stop, until=timing.end_mono, on_batch=warm.on_batch)
            ended = time.monotonic()
            self._drain(stop)
        finally:
            self._threads_stop.set()
            for thread in self._threads:
                thread.join(timeout=10)
        if self.reconnector.gave_up is not None:
            raise self.reconnector.gave_up
        return self._finish(timing, ended, warm)

    def _drain(self, stop: threading.Event) -> None:
        """Give ingest up to ``drain_s`` to make the written events visible (not after Ctrl-C:
        then the user wants out, and the summary counts the rest as pending)."""
        deadline = time.monotonic() + self.drain_s
        while self.freshness.pending_events and time.monotonic() < deadline:
            if stop.wait(0.1):
                return

    def _finish(self, timing: Timing, ended: float, warm: _WarmupMark) -> Summary:
        assert self.reporter is not None
        try:
            self.display.report(self._lines(self.reporter.report()))
            totals = self.reporter.watch.totals.copy()
            with connect(self.dsn, autocommit=True) as conn:
                return build_summary(
                    conn=conn,
                    now=self.clock(),
                    duration_s=ended - timing.started_mono,
                    measured_s=max(0.0, ended - timing.warmup_end_mono),
                    written=(self.generator.stats.events,
                             self.generator.stats.events - warm.written_at_warmup),
                    totals=totals,
                    at_warmup=warm.totals or Totals(),
                    failures=(self.failures.count, self.failures.last),
                    freshness=self.freshness.overall(since=warm.wall),
                    unmeasured=self.freshness.unmeasured_events,
                    pending=self.freshness.pending_events,
                )
        finally:
            for conn in self._conns:
                conn.close()


def _reopened(tracker: MaxTracker, conn: psycopg.Connection) -> Step:
    tracker.reopen(conn)
    return tracker.poll


class _WarmupMark:
    """Takes the totals once, at the first batch after the warmup ends."""

    def __init__(self, session: ClientSession, at_mono: float) -> None:
        self.session, self.at_mono = session, at_mono
        self.totals: Totals | None = None
        self.written_at_warmup = 0
        self.wall = session.clock()
        self._taken = at_mono <= time.monotonic()
        if self._taken:
            self.totals = Totals()

    def on_batch(self, batch: Batch) -> None:
        self.session.freshness.add_batch(batch)
        if self._taken or time.monotonic() < self.at_mono:
            return
        self._taken = True
        self.wall = self.session.clock()
        self.written_at_warmup = self.session.generator.stats.events
        try:
            assert self.session.reporter is not None
            self.totals = self.session.reporter.watch.refresh()
        except psycopg.Error as exc:
            self.session.failures.add("warmup mark", exc)
            self.totals = Totals()
