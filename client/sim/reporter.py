"""The periodic report (VoltDB's Reporter, plus what it never showed).

Every display interval: the averages over the last 1, 5, 10 and 30 complete seconds, with their
range (``db.windows.last_complete``, read from the rollups: the current second is still being
ingested, so "the past second" is the last complete one; an empty store prints "no data"), the
insert throughput, freshness
(see ``client.sim.freshness``), rows deleted since the last report, rejected events and failures.

Where the numbers come from, all bounded reads:
- *ingested*: ``accepted`` of the ingest batches committed since the last report (an index on
  ``ingest_batches.committed_at``, see procedures/client). Batches are re-read with a one-minute
  overlap and de-duplicated by (query_id, batch_id), so a batch whose transaction started before
  the previous report but committed after it is still counted once.
- *stored rows*: ``sum(n)`` of the rollups (exact; about retained seconds x partitions rows).
- *deleted*: by conservation, ``stored before + ingested - stored now`` -- whoever deleted (the
  client's deleter, the scheduler, inline ingest) -- read in one REPEATABLE READ snapshot, where
  the batch rows and the rollups they changed commit together.
- *rejected*: dead letters with an id above the last one seen, grouped by reason.
- *sessions*: per session window definition, open sessions (one index range of the sessions
  not yet final), merges, late events and the longest session (``db.sessions.all_stats``).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import psycopg
from psycopg import sql

from slidewin.client.sim.freshness import FreshnessTracker, latency_stats
from slidewin.client.sim.generator import GeneratorStats
from slidewin.db import sessions, windows
from slidewin.db.clock import Clock, utc_now
from slidewin.db.streams import BUILTIN

WINDOWS = (1, 5, 10, 30)
Query = str | sql.Composed
OVERLAP = "60 seconds"

SNAPSHOT_SQL = (
    "SELECT clock_timestamp(), (SELECT coalesce(sum(n), 0)::bigint FROM slidewin.rollups)"
)
# the built-in stream's batches: not those of a declared stream's query (<id>/stream-<name>/...)
BATCHES_SQL = f"""
SELECT query_id, batch_id, accepted, rejected, duplicates, committed_at
  FROM slidewin.ingest_batches
 WHERE committed_at > %s::timestamptz - interval '{OVERLAP}'
   AND query_id NOT LIKE '%%/stream-%%'
"""


def dead_letter_sql(stream: str) -> tuple[sql.Composed, sql.Composed]:
    """A stream's dead letters, the same for every stream: (those above an id, by reason, with
    the newest id; the newest id). Events late only for a session definition (source
    session:NAME) are stored, not rejected, so they are left out."""
    name = sql.Literal(stream)
    return (
        sql.SQL("SELECT reason, count(*)::bigint, max(id) FROM slidewin.dead_letters "
                "WHERE stream = {} AND id > %s AND source NOT LIKE 'session:%%' "
                "GROUP BY reason").format(name),
        sql.SQL("SELECT coalesce(max(id), 0) FROM slidewin.dead_letters "
                "WHERE stream = {}").format(name),
    )


@dataclass(frozen=True)
class WatchScope:
    """The statements a StoreWatch reads one stream's counts with: (clock, stored rows), the
    ingest batches committed since a time, the dead letters above an id."""

    snapshot: Query = SNAPSHOT_SQL
    batches: Query = BATCHES_SQL
    dead_letters: Query = field(default_factory=lambda: dead_letter_sql(BUILTIN)[0])
    last_dead_letter: Query = field(default_factory=lambda: dead_letter_sql(BUILTIN)[1])


EVENTS_SCOPE = WatchScope()


def stream_scope(name: str) -> WatchScope:
    """A declared stream's scope: its rollups, its query's batches, its dead letters."""
    rollups = sql.Identifier("slidewin_rollups", name)
    marker = sql.Literal(f"/stream-{name}/")
    dead_letters, last_dead_letter = dead_letter_sql(name)
    return WatchScope(
        snapshot=sql.SQL("SELECT clock_timestamp(), "
                         "(SELECT coalesce(sum(n), 0)::bigint FROM {})").format(rollups),
        batches=sql.SQL(
            "SELECT query_id, batch_id, accepted, rejected, duplicates, committed_at "
            "FROM slidewin.ingest_batches "
            f"WHERE committed_at > %s::timestamptz - interval '{OVERLAP}' "
            "AND strpos(query_id, {}) > 0").format(marker),
        dead_letters=dead_letters,
        last_dead_letter=last_dead_letter,
    )


@dataclass
class Failures:
    """Errors of the client's own work (writes, polls, deletes), counted and the last one kept."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    count: int = 0
    last: str = ""

    def add(self, where: str, exc: BaseException) -> None:
        with self.lock:
            self.count += 1
            self.last = f"{where}: {type(exc).__name__}: {str(exc).strip()[:200]}"


@dataclass
class Totals:
    """Cumulative counts since the client started."""

    at_mono: float = 0.0
    ingested: int = 0
    duplicates: int = 0
    deleted: int = 0
    rejected: int = 0
    rows: int = 0
    rejected_by_reason: Counter[str] = field(default_factory=Counter)

    def copy(self) -> Totals:
        return Totals(self.at_mono, self.ingested, self.duplicates, self.deleted, self.rejected,
                      self.rows, Counter(self.rejected_by_reason))


class StoreWatch:
    """Counts what the store did since the watch began (see the module docstring)."""

    def __init__(self, conn: psycopg.Connection, scope: WatchScope = EVENTS_SCOPE) -> None:
        self.conn, self.scope = conn, scope
        self.conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        self.totals = Totals()
        self._seen: dict[tuple[str, int], datetime] = {}
        self._dead_cursor = 0
        self._read_at: datetime | None = None
        self.lock = threading.Lock()
        with self.conn.transaction():
            self._read_at, self.totals.rows = self._snapshot()
            row = self.conn.execute(scope.last_dead_letter).fetchone()
            self._dead_cursor = int(row[0]) if row else 0
            for qid, bid, *_rest, committed in self.conn.execute(scope.batches,
                                                                 (self._read_at,)):
                self._seen[(qid, bid)] = committed
        self.totals.at_mono = time.monotonic()

    def reopen(self, conn: psycopg.Connection) -> None:
        """Go on with a new connection; the counts since the watch began are kept."""
        with self.lock:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            self.conn = conn

    def _snapshot(self) -> tuple[datetime, int]:
        row = self.conn.execute(self.scope.snapshot).fetchone()
        assert row is not None
        return row[0], int(row[1])

    def refresh(self) -> Totals:
        """Read the store once more; returns a copy of the updated totals."""
        with self.lock, self.conn.transaction():
            read_at, rows = self._snapshot()
            ingested = self._new_batches(read_at)
            self._new_dead_letters()
            t = self.totals
            t.deleted += max(0, t.rows + ingested - rows)
            t.rows, t.at_mono = rows, time.monotonic()
            self._read_at = read_at
            return t.copy()

    def _new_batches(self, read_at: datetime) -> int:
        accepted = 0
        since = self._read_at or read_at  # the previous read (set when the watch began)
        for qid, bid, acc, _rej, dup, committed in self.conn.execute(self.scope.batches, (since,)):
            if (qid, bid) not in self._seen:
                self._seen[(qid, bid)] = committed
                accepted += int(acc)
                self.totals.duplicates += int(dup)
        for key in [k for k, c in self._seen.items() if (since - c).total_seconds() > 120]:
            del self._seen[key]
        self.totals.ingested += accepted
        return accepted

    def _new_dead_letters(self) -> None:
        for reason, count, top in self.conn.execute(self.scope.dead_letters,
                                                          (self._dead_cursor,)):
            self.totals.rejected += int(count)
            self.totals.rejected_by_reason[reason] += int(count)
            self._dead_cursor = max(self._dead_cursor, int(top))


@dataclass(frozen=True)
class Report:
    elapsed_s: float
    averages: dict[int, float | None]
    rows_in_window: dict[int, int]
    # the seconds the averages cover: [start, end) and whether they are final; None when empty
    window_end: datetime | None
    window_final: bool
    written_per_s: float
    ingested_per_s: float
    freshness_avg_ms: float | None
    freshness_p95_ms: float | None
    deleted: int
    rejected: int
    failures: int
    rows: int
    sessions: list[sessions.SessionStats] = field(default_factory=list)


def show(value: float | None, fmt: str = "{:.1f}") -> str:
    """A number, or "no data" -- never "None"."""
    return "no data" if value is None else fmt.format(value)


def hms(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


def format_report(r: Report) -> list[str]:
    """The report as text lines, in VoltDB's layout with the added lines."""
    lines = [f"{hms(r.elapsed_s)} Report:", "  Average values over time windows:"]
    for sec in WINDOWS:
        avg = r.averages.get(sec)
        rows = ""
        if avg is not None and r.window_end is not None:
            span = f"{r.window_end - timedelta(seconds=sec):%H:%M:%S}-{r.window_end:%H:%M:%S} UTC"
            final = ", final" if r.window_final else ""
            rows = f" ({span}{final}, {r.rows_in_window.get(sec, 0)} rows)"
        lines.append(f"    Average for past {sec:2d}s: {show(avg)}{rows}")
    lines += [
        "  Insert statistics:",
        f"    Throughput {r.ingested_per_s:.0f}/s ingested, {r.written_per_s:.0f}/s written, "
        f"freshness avg/95% {show(r.freshness_avg_ms, '{:.0f}')}/"
        f"{show(r.freshness_p95_ms, '{:.0f}')} ms",
        f"    Rows deleted {r.deleted}, rejected {r.rejected}, failures {r.failures}, "
        f"stored {r.rows}",
    ]
    lines += [f"    {sessions.stats_line(s)}" for s in r.sessions]
    return lines


class Reporter:
    """Builds one ``Report`` per call from the store, the generator and the freshness tracker."""

    def __init__(
        self,
        conn: psycopg.Connection,
        watch: StoreWatch,
        generator: GeneratorStats,
        freshness: FreshnessTracker,
        failures: Failures,
        clock: Clock = utc_now,
        started_mono: float | None = None,
    ) -> None:
        self.conn, self.watch, self.generator = conn, watch, generator
        self.freshness, self.failures, self.clock = freshness, failures, clock
        self.started = time.monotonic() if started_mono is None else started_mono
        self._last = watch.totals.copy()
        self._last_written = (self.started, generator.events)

    def reopen(self, conn: psycopg.Connection, watch_conn: psycopg.Connection) -> None:
        """Go on with new connections (the old ones died with their server)."""
        self.conn = conn
        self.watch.reopen(watch_conn)

    def averages(
        self, now: datetime
    ) -> tuple[dict[int, float | None], dict[int, int], datetime | None, bool]:
        """Per window: the average and row count of the last complete seconds; their end (in
        UTC) and whether they are final."""
        avgs: dict[int, float | None] = {}
        rows: dict[int, int] = {}
        end, final = None, False
        for sec in WINDOWS:
            found = windows.last_complete(self.conn, sec, now)
            if found is None:
                avgs[sec], rows[sec] = None, 0
                continue
            avgs[sec], rows[sec] = found.summary.avg, found.summary.n
            end, final = found.end.astimezone(UTC), found.final
        return avgs, rows, end, final

    def report(self) -> Report:
        now = self.clock()
        avgs, rows, end, final = self.averages(now)
        totals = self.watch.refresh()
        mono = time.monotonic()
        span = max(mono - self._last.at_mono, 1e-6)
        with self.generator.lock:
            written = self.generator.events
        wrote_span = max(mono - self._last_written[0], 1e-6)
        fresh = latency_stats(self.freshness.take_new())
        report = Report(
            elapsed_s=mono - self.started,
            averages=avgs,
            rows_in_window=rows,
            window_end=end,
            window_final=final,
            written_per_s=(written - self._last_written[1]) / wrote_span,
            ingested_per_s=(totals.ingested - self._last.ingested) / span,
            freshness_avg_ms=fresh.avg_ms,
            freshness_p95_ms=fresh.p95_ms,
            deleted=totals.deleted - self._last.deleted,
            rejected=totals.rejected - self._last.rejected,
            failures=self.failures.count,
            rows=totals.rows,
            sessions=sessions.all_stats(self.conn),
        )
        self._last, self._last_written = totals, (mono, written)
        return report
