"""One run of the simulator for a declared stream (``slidewin client --stream NAME``).

The generator (``client.sim.typed_generator``) writes the stream's events into
``<landing>/<name>/`` in the calling thread; a reporter thread prints a report every display
interval:

- *rows* the stream holds (its rollups' ``sum(n)``), written and ingested per second (the
  ingest batches of the stream's own query, ``<id>/stream-<name>/...``), rejected events (its
  dead letters) and rows deleted (by conservation, as ``client.sim.reporter.StoreWatch``
  counts them for ``events``);
- per measure, count, sum, min, max and average over the report window (``--historyseconds``,
  else the stream's history, else 30 s), read with ``db.streams.summary`` from the rollups;
- freshness: how old the newest event the ingest committed is (``slidewin.stream_state``).

With a match (``slidewin client --stream orders --match shipments.order_id``, see
``client.sim.matched``) the session writes a second stream beside it whose records refer to the
first one's keys; each report then adds the second stream's lines and a line of the matches so
far.

Retention is the stream's own (its history, applied by ``slidewin jobs run``): the session
deletes nothing. The run ends at ``duration`` or when ``stop`` is set; the written events then
get up to ``drain_s`` to be ingested (not after Ctrl-C), and a final summary is returned.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg

from slidewin.client.sim.generator import FORMATS, Batch, check_keys
from slidewin.client.sim.live import Display
from slidewin.client.sim.matched import MatchConfig, MatchedStreams, match_line
from slidewin.client.sim.reporter import Failures, StoreWatch, Totals, hms, show, stream_scope
from slidewin.client.sim.typed_generator import (
    DEFAULT_KEYS,
    TypedEventGenerator,
    TypedGeneratorConfig,
)
from slidewin.db import streams
from slidewin.db.clock import Clock, utc_now
from slidewin.db.connect import connect
from slidewin.db.errors import ConfigError, DatabaseUnavailable
from slidewin.db.reconnect import Reconnector, ReconnectPolicy, is_connection_lost
from slidewin.db.streams import Stream

DEFAULT_WINDOW_S = 30.0
NEWEST_SQL = "SELECT newest_ts FROM slidewin.stream_state WHERE stream = %s"


@dataclass(frozen=True)
class StreamClientConfig:
    """One run of the simulator for a declared stream; every error names the option."""

    landing: Path
    stream: str
    displayinterval: float = 5.0
    duration: float = 120.0
    warmup: float = 5.0
    ratelimit: float = 1000.0
    window_s: float | None = None  # the reports' window (None: the stream's history, or 30 s)
    seed: int | None = None
    fmt: str = "csv"
    keys: int | None = DEFAULT_KEYS
    burst: float = 5.0
    pause: float = 20.0
    reconnect_timeout: float = 180.0
    match: MatchConfig | None = None  # a second stream whose records refer to this one's

    def __post_init__(self) -> None:
        for option, value, example in (("--displayinterval", self.displayinterval, "5"),
                                       ("--duration", self.duration, "120"),
                                       ("--ratelimit", self.ratelimit, "1000")):
            if not value > 0:
                raise ConfigError(f"{option} {value:g} must be > 0; use e.g. {option} {example}")
        if not 0 <= self.warmup < self.duration:
            raise ConfigError(f"--warmup {self.warmup:g} must be from 0 to less than --duration "
                              f"{self.duration:g}; use e.g. --warmup 5 --duration 120")
        if self.window_s is not None and not 0 < self.window_s <= 7 * 86400:
            raise ConfigError(f"--historyseconds {self.window_s:g} must be more than 0 and at "
                              "most 7 days for a declared stream (the reports' window); use "
                              "e.g. --historyseconds 30")
        if self.reconnect_timeout < 0:
            raise ConfigError(f"--reconnect-timeout {self.reconnect_timeout:g} must be >= 0; "
                              "use e.g. --reconnect-timeout 3m (0 = fail at once)")
        if self.fmt not in FORMATS:
            raise ConfigError(f"--format {self.fmt!r} is not one of {', '.join(FORMATS)}")
        check_keys(self.keys, self.burst, self.pause)


def report_window(config: StreamClientConfig, stream: Stream) -> float:
    """The reports' window in seconds: --historyseconds, else the stream's history, else 30."""
    if config.window_s:
        return config.window_s
    if stream.history is not None:
        return stream.history.total_seconds()
    return DEFAULT_WINDOW_S


@dataclass(frozen=True)
class MeasureLine:
    """One measure over the window: ``cnt`` values (rows with a NULL left out)."""

    name: str
    cnt: int
    total: float | None
    vmin: float | None
    vmax: float | None
    avg: float | None

    def text(self, window_s: float) -> str:
        if not self.cnt:
            return f"{self.name} over the last {window_s:g}s: no data"
        return (f"{self.name} over the last {window_s:g}s: count {self.cnt}, "
                f"sum {show(self.total, '{:.6g}')}, min {show(self.vmin, '{:.6g}')}, "
                f"max {show(self.vmax, '{:.6g}')}, avg {show(self.avg, '{:.6g}')}")


def _number(value: Decimal | float | None) -> float | None:
    return None if value is None else float(value)


def measure_lines(conn: psycopg.Connection, stream: Stream, window_s: float,
                  now: datetime) -> list[MeasureLine]:
    """Each measure's count, sum, min, max, avg over ``[now - window, now)``."""
    start = now - timedelta(seconds=window_s)
    out = []
    for measure in stream.measures:
        row = streams.summary(conn, stream.name, start, now, measure)
        out.append(MeasureLine(measure, int(row["cnt"] or 0), _number(row["total"]),
                               _number(row["vmin"]), _number(row["vmax"]),
                               _number(row["avg"])))
    return out


def newest_age_s(conn: psycopg.Connection, name: str, now: datetime) -> float | None:
    """Seconds since the newest event time the ingest committed for the stream (None: none)."""
    row = conn.execute(NEWEST_SQL, (name,)).fetchone()
    if row is None or row[0] is None:
        return None
    return max(0.0, (now - row[0]).total_seconds())


@dataclass(frozen=True)
class StreamReport:
    stream: str
    elapsed_s: float
    rows: int
    written_per_s: float
    ingested_per_s: float
    rejected: int
    deleted: int
    newest_age_s: float | None
    window_s: float
    measures: list[MeasureLine]
    failures: int = 0


def format_stream_report(r: StreamReport) -> list[str]:
    """The report as text lines, laid out as the built-in stream's."""
    return [f"{hms(r.elapsed_s)} Report: stream {r.stream}", *stream_lines(r)]


def stream_lines(r: StreamReport, indent: str = "  ") -> list[str]:
    """The report without its header: rows and rates, then a line per measure."""
    age = "no event yet" if r.newest_age_s is None else f"newest event {r.newest_age_s:.1f}s old"
    return [
        f"{indent}Rows {r.rows}, {r.ingested_per_s:.0f}/s ingested, {r.written_per_s:.0f}/s "
        f"written, {age}; rejected {r.rejected}, deleted {r.deleted}, failures {r.failures}",
        *(f"{indent}  {m.text(r.window_s)}" for m in r.measures),
    ]


class StreamReporter:
    """Builds one ``StreamReport`` per call from the store and the generator's counts."""

    def __init__(self, conn: psycopg.Connection, watch: StoreWatch, stream: Stream,
                 generator: TypedEventGenerator, window_s: float, failures: Failures,
                 clock: Clock = utc_now) -> None:
        self.conn, self.watch, self.stream, self.generator = conn, watch, stream, generator
        self.window_s, self.failures, self.clock = window_s, failures, clock
        self.started = time.monotonic()
        self._last = watch.totals.copy()
        self._last_written = (self.started, 0)

    @classmethod
    def open(cls, dsn: str, stream: Stream, generator: TypedEventGenerator, window_s: float,
             failures: Failures, clock: Clock = utc_now) -> StreamReporter:
        """A reporter on two new connections (its own and its watch's)."""
        watch = StoreWatch(connect(dsn, autocommit=True), stream_scope(stream.name))
        return cls(connect(dsn, autocommit=True), watch, stream, generator, window_s, failures,
                   clock)

    def reopen(self, conn: psycopg.Connection, watch_conn: psycopg.Connection) -> None:
        """Go on with new connections (the old ones died with their server)."""
        self.close()
        self.conn = conn
        self.watch.reopen(watch_conn)

    def close(self) -> None:
        for conn in (self.conn, self.watch.conn):
            conn.close()

    def report(self) -> StreamReport:
        now = self.clock()
        measures = measure_lines(self.conn, self.stream, self.window_s, now)
        age = newest_age_s(self.conn, self.stream.name, now)
        totals = self.watch.refresh()
        mono = time.monotonic()
        with self.generator.stats.lock:
            written = self.generator.stats.events
        span = max(mono - self._last.at_mono, 1e-6)
        wrote_span = max(mono - self._last_written[0], 1e-6)
        report = StreamReport(
            stream=self.stream.name,
            elapsed_s=mono - self.started,
            rows=totals.rows,
            written_per_s=(written - self._last_written[1]) / wrote_span,
            ingested_per_s=(totals.ingested - self._last.ingested) / span,
            rejected=totals.rejected - self._last.rejected,
            deleted=totals.deleted - self._last.deleted,
            newest_age_s=age,
            window_s=self.window_s,
            measures=measures,
            failures=self.failures.count,
        )
        self._last, self._last_written = totals, (mono, written)
        return report


@dataclass(frozen=True)
class StreamSummary:
    stream: str
    duration_s: float
    measured_s: float
    written: int
    written_measured: int
    ingested: int
    ingested_measured: int
    rejected: int
    duplicates: int
    deleted: int
    rows: int
    failures: int
    last_failure: str
    window_s: float
    measures: list[MeasureLine]
    rejected_by_reason: dict[str, int] = field(default_factory=dict)

    @property
    def pending(self) -> int:
        """Written events neither stored, duplicates nor rejected yet (not ingested)."""
        return max(0, self.written - self.ingested - self.duplicates - self.rejected)

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["pending"] = self.pending
        out["measures"] = {m.name: {k: v for k, v in asdict(m).items() if k != "name"}
                           for m in self.measures}
        return out


def format_stream_summary(s: StreamSummary) -> list[str]:
    measured = max(s.measured_s, 1e-6)
    lines = [
        f"Final summary: stream {s.stream}",
        f"  Run {s.duration_s:.1f} s ({s.measured_s:.1f} s measured after the warmup)",
        f"  Written {s.written}, ingested {s.ingested}, duplicates {s.duplicates}, rejected "
        f"{s.rejected}, pending {s.pending}, deleted {s.deleted}, failures {s.failures}",
        f"  Throughput {s.ingested_measured / measured:.0f}/s ingested, "
        f"{s.written_measured / measured:.0f}/s written (after the warmup)",
        f"  Rows retained {s.rows}",
        *(f"  {m.text(s.window_s)}" for m in s.measures),
    ]
    if s.rejected_by_reason:
        lines.append("  Rejected by reason: " + ", ".join(
            f"{k} {v}" for k, v in sorted(s.rejected_by_reason.items())))
    if s.last_failure:
        lines.append(f"  Last failure: {s.last_failure}")
    return lines


class StreamSession:
    """Wire the generator and the reporter for one declared stream (and, with the config's
    match, the ``right`` stream beside it); ``run`` blocks."""

    def __init__(self, config: StreamClientConfig, stream: Stream, dsn: str, display: Display,
                 clock: Clock = utc_now, drain_s: float = 10.0,
                 right: Stream | None = None) -> None:
        self.config, self.stream, self.dsn, self.display = config, stream, dsn, display
        self.clock, self.drain_s = clock, drain_s
        self.failures = Failures()
        self.window_s = report_window(config, stream)
        self.generator = TypedEventGenerator(
            TypedGeneratorConfig(config.landing, stream, rate=config.ratelimit, seed=config.seed,
                                 fmt=config.fmt, keys=config.keys, burst_s=config.burst,
                                 pause_s=config.pause),
            clock=clock)
        self.matched: MatchedStreams | None = None
        self.side: SideStream | None = None  # the matched stream's reports and summary
        if config.match is not None:
            if right is None:
                raise ValueError("a match needs its right stream")
            self.matched = MatchedStreams(self.generator, right, config.match)
            self.side = SideStream(right, config.landing, dsn, rate=0.0,
                                   window_s=report_window(config, right),
                                   generator=self.matched.right, clock=clock)
        self.reporter: StreamReporter | None = None
        self._threads_stop = threading.Event()
        self._stop = threading.Event()
        policy = ReconnectPolicy(timeout=timedelta(seconds=config.reconnect_timeout))
        self.reconnector = Reconnector(dsn, policy, display.line, stop=self._threads_stop)

    def _report(self) -> None:
        assert self.reporter is not None
        self.display.report(self._lines(self.reporter.report()))

    def _lines(self, report: StreamReport) -> list[str]:
        lines = format_stream_report(report)
        if self.matched is not None and self.side is not None and self.config.match:
            lines += [*self.side.lines(), "  " + match_line(
                self.matched.stats, self.stream.name, self.side.stream.name, self.config.match)]
        return lines

    def _loop(self) -> None:
        """A report every display interval; a lost database is waited for, then the reporter
        goes on with new connections (its counts kept)."""
        while not self._threads_stop.wait(self.config.displayinterval):
            try:
                self._report()
            except psycopg.Error as exc:
                self.failures.add("reporter", exc)
                if is_connection_lost(exc):
                    self._reopen(exc)

    def _reopen(self, exc: BaseException) -> None:
        assert self.reporter is not None
        try:
            self.reconnector.wait(exc)
            self.reporter.reopen(connect(self.dsn, autocommit=True),
                                 connect(self.dsn, autocommit=True))
        except (psycopg.Error, DatabaseUnavailable):
            if self.reconnector.gave_up is not None:
                self._threads_stop.set()
                self._stop.set()

    def run(self, stop: threading.Event) -> StreamSummary:
        """Generate until the duration ends or ``stop`` is set; then drain and summarise."""
        self._stop = stop
        self.reporter = StreamReporter.open(self.dsn, self.stream, self.generator, self.window_s,
                                            self.failures, self.clock)
        started = time.monotonic()
        warm = _Warmup(self.reporter.watch, self.generator, started + self.config.warmup,
                       self.failures)
        thread = threading.Thread(target=self._loop, name="slidewin-stream-reporter",
                                  daemon=True)
        thread.start()
        writer = self.matched or self.generator
        if self.side is not None:
            self.side.begin()
        try:
            writer.run(stop, until=started + self.config.duration, on_batch=warm.on_batch)
            ended = time.monotonic()
            self._drain(stop)
        finally:
            self._threads_stop.set()
            thread.join(timeout=10)
        if self.reconnector.gave_up is not None:
            self.reporter.close()
            raise self.reconnector.gave_up
        try:
            return self._finish(started, ended, warm)
        finally:
            self.reporter.close()

    def _drain(self, stop: threading.Event) -> None:
        """Give the ingest up to ``drain_s`` to take the written events (not after Ctrl-C)."""
        assert self.reporter is not None
        deadline = time.monotonic() + self.drain_s
        while time.monotonic() < deadline and not stop.is_set():
            try:
                t = self.reporter.watch.refresh()
            except psycopg.Error as exc:
                self.failures.add("drain", exc)
                return
            if t.ingested + t.duplicates + t.rejected >= self.generator.stats.events:
                return
            stop.wait(0.25)

    def _finish(self, started: float, ended: float, warm: _Warmup) -> StreamSummary:
        assert self.reporter is not None
        self.display.report(self._lines(self.reporter.report()))
        totals = self.reporter.watch.totals.copy()
        at_warmup = warm.totals or Totals()
        measures = measure_lines(self.reporter.conn, self.stream, self.window_s, self.clock())
        return StreamSummary(
            stream=self.stream.name,
            duration_s=ended - started,
            measured_s=max(0.0, ended - warm.at_mono),
            written=self.generator.stats.events,
            written_measured=self.generator.stats.events - warm.written,
            ingested=totals.ingested,
            ingested_measured=totals.ingested - at_warmup.ingested,
            rejected=totals.rejected,
            duplicates=totals.duplicates,
            deleted=totals.deleted,
            rows=totals.rows,
            failures=self.failures.count,
            last_failure=self.failures.last,
            window_s=self.window_s,
            measures=measures,
            rejected_by_reason=dict(totals.rejected_by_reason),
        )


class _Warmup:
    """The store's totals and the events written at the first batch after the warmup."""

    def __init__(self, watch: StoreWatch, generator: TypedEventGenerator, at_mono: float,
                 failures: Failures) -> None:
        self.watch, self.generator, self.at_mono, self.failures = (watch, generator, at_mono,
                                                                   failures)
        self.totals: Totals | None = Totals() if at_mono <= time.monotonic() else None
        self.written = 0

    def on_batch(self, batch: Batch) -> None:
        if self.totals is not None or time.monotonic() < self.at_mono:
            return
        self.written = self.generator.stats.events - batch.count
        try:
            self.totals = self.watch.refresh()
        except psycopg.Error as exc:
            self.failures.add("warmup mark", exc)
            self.totals = Totals()



class SideStream:
    """A declared stream fed beside the built-in one (``slidewin demo``): its generator runs in
    a thread of its own, and ``lines`` -- called by the built-in stream's reporter every
    interval -- adds the stream's report to each of its reports. A database error costs one
    report (the line says so) and the next call opens new connections."""

    def __init__(self, stream: Stream, landing: Path, dsn: str, *, rate: float,
                 window_s: float, seed: int | None = None, fmt: str = "jsonl",
                 keys: int | None = DEFAULT_KEYS, clock: Clock = utc_now,
                 generator: TypedEventGenerator | None = None) -> None:
        """``generator``: report on the records another writer writes through it (a matched
        stream's, ``client.sim.matched``) instead of a generator of its own; ``start`` is then
        not called."""
        self.stream, self.dsn, self.window_s, self.clock = stream, dsn, window_s, clock
        self.failures = Failures()
        self.generator = generator or TypedEventGenerator(
            TypedGeneratorConfig(landing, stream, rate=rate, seed=seed, fmt=fmt, keys=keys),
            clock=clock)
        self.reporter: StreamReporter | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.started = time.monotonic()

    def start(self, stop: threading.Event, duration_s: float) -> None:
        """Write the stream's events until ``stop`` or ``self.stop()``, at most ``duration_s``."""
        until = time.monotonic() + duration_s

        def run() -> None:
            self.generator.run(self._stop, until=until)

        def forward() -> None:  # the demo's stop (Ctrl-C, SIGTERM) stops this generator too
            while not self._stop.wait(0.1):
                if stop.is_set():
                    self._stop.set()

        threading.Thread(target=forward, name="slidewin-side-stop", daemon=True).start()

        self.begin()
        self._thread = threading.Thread(target=run, name=f"slidewin-{self.stream.name}",
                                        daemon=True)
        self._thread.start()

    def begin(self) -> None:
        """Start counting now, before the first record is written: the store's totals are
        counted from when the reporter opens (a failure here is counted, and the first report
        tries again)."""
        self.started = time.monotonic()
        with self._lock:
            try:
                self._reporter()
            except psycopg.Error as exc:
                self.failures.add(f"stream {self.stream.name} watch", exc)
                self.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _reporter(self) -> StreamReporter:
        if self.reporter is None:
            self.reporter = StreamReporter.open(self.dsn, self.stream, self.generator,
                                                self.window_s, self.failures, self.clock)
        return self.reporter

    def lines(self) -> list[str]:
        """The stream's report as lines for the built-in stream's report."""
        with self._lock:
            try:
                report = self._reporter().report()
            except psycopg.Error as exc:
                self.failures.add(f"stream {self.stream.name} report", exc)
                self.close()
                return [f"  Stream {self.stream.name}: no report this time "
                        f"({type(exc).__name__})"]
        return [f"  Stream {self.stream.name}:", *stream_lines(report, indent="    ")]

    def summary(self, drain_s: float = 5.0) -> StreamSummary:
        """The run's totals (after up to ``drain_s`` for the ingest to take what was written)."""
        self.stop()
        ended = time.monotonic()
        with self._lock:
            reporter = self._reporter()
            deadline = time.monotonic() + drain_s
            while time.monotonic() < deadline:
                t = reporter.watch.refresh()
                if t.ingested + t.duplicates + t.rejected >= self.generator.stats.events:
                    break
                time.sleep(0.25)
            totals = reporter.watch.totals.copy()
            measures = measure_lines(reporter.conn, self.stream, self.window_s, self.clock())
        written = self.generator.stats.events
        return StreamSummary(
            stream=self.stream.name, duration_s=ended - self.started,
            measured_s=ended - self.started, written=written, written_measured=written,
            ingested=totals.ingested, ingested_measured=totals.ingested,
            rejected=totals.rejected, duplicates=totals.duplicates, deleted=totals.deleted,
            rows=totals.rows, failures=self.failures.count, last_failure=self.failures.last,
            window_s=self.window_s, measures=measures,
            rejected_by_reason=dict(totals.rejected_by_reason))

    def close(self) -> None:
        if self.reporter is not None:
            with contextlib.suppress(psycopg.Error):
                self.reporter.close()
            self.reporter = None

