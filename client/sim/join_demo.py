"""A join fed and watched live (``slidewin demo``): two streams written by
``client.sim.matched`` in a thread of their own, and the interval join of them read from the
store every report.

What a report shows, from ``slidewin.join_status`` and the join's new results
(``slidewin.join_since``, read in the order written):

- pairs (and per second since the last report), left-only rows (left records that found no
  pair: written once final, when W passes their time + after), records late for the join per
  side (older than W when they arrived: no result, counted), and W itself, as how far it is
  behind now;
- result freshness: for each pair, ``emitted_at`` (the database's clock when the batch's
  transaction wrote it, before its commit) minus the time the client wrote the pair's second
  record -- the later of the two files the pair's records were in appeared then (the writer's
  ``on_written``). Percentiles are ``client.sim.freshness``'s, over pairs, one each; pairs whose
  second record was written before the warmup ended, or before this watch began (a kept join's
  earlier runs), are left out. Client and database share a clock in the demo (one machine); on
  two machines their offset adds to every figure.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from slidewin.client.sim.freshness import LatencyStats, Sample, latency_stats
from slidewin.client.sim.matched import MatchedStreams
from slidewin.client.sim.reporter import show
from slidewin.db import joins
from slidewin.db.clock import Clock, utc_now
from slidewin.db.connect import connect

NEWEST = 5  # pairs shown at the end
KEEP_WRITTEN_S = 600.0  # how long a written record's time is kept for the freshness of its pair
READ_CHUNK = 1000


@dataclass(frozen=True)
class PairLine:
    """One pair as the summary shows it."""

    seq: int
    left_key: Any
    left_ts: str
    right_key: Any
    right_ts: str
    emitted_at: datetime
    freshness_s: float | None

    def text(self, left: str, right: str) -> str:
        emitted = self.emitted_at.strftime("%H:%M:%S.%f")[:-3]
        fresh = "" if self.freshness_s is None else \
            f", {self.freshness_s * 1000:.0f} ms after the {right} was written"
        return (f"{left} {self.left_key} at {_clock(self.left_ts)} -> {right} {self.right_key} "
                f"at {_clock(self.right_ts)}: emitted {emitted}{fresh}")


def _clock(iso: str) -> str:
    """``12:00:01.234`` of an ISO time as the results' JSON holds it."""
    try:
        return datetime.fromisoformat(iso).strftime("%H:%M:%S.%f")[:-3]
    except (TypeError, ValueError):
        return str(iso)


@dataclass(frozen=True)
class JoinSummary:
    join: str
    description: str
    duration_s: float
    left_written: int
    right_written: int
    right_written_late: int
    right_not_due: int
    pairs: int
    left_only: int
    right_only: int
    late_left: int
    late_right: int
    outer: str  # what a left-only row stands for
    watermark: datetime | None
    watermark_behind_s: float | None
    pairs_seen: int
    freshness: LatencyStats
    freshness_unmeasured: int
    newest: list[PairLine] = field(default_factory=list)
    failures: int = 0
    last_failure: str = ""

    @property
    def pairs_per_s(self) -> float:
        return self.pairs_seen / max(self.duration_s, 1e-6)

    def as_json(self) -> dict[str, Any]:
        f = self.freshness

        def seconds(ms: float | None) -> float | None:
            return None if ms is None else round(ms / 1000, 4)

        out = {k: v for k, v in asdict(self).items() if k not in ("freshness", "newest")}
        out.update(
            watermark=None if self.watermark is None else self.watermark.isoformat(),
            pairs_per_s=round(self.pairs_per_s, 2),
            result_freshness_pairs=f.events,
            result_freshness_p50_s=seconds(f.p50_ms),
            result_freshness_p95_s=seconds(f.p95_ms),
            result_freshness_p99_s=seconds(f.p99_ms),
            result_freshness_max_s=seconds(f.max_ms),
            newest=[{**asdict(p), "emitted_at": p.emitted_at.isoformat()} for p in self.newest],
        )
        return out


def format_join_summary(s: JoinSummary, left: str, right: str) -> list[str]:
    f = s.freshness
    w = "not set yet" if s.watermark is None else s.watermark.strftime("%H:%M:%S.%f")[:-3]
    if s.watermark_behind_s is not None:
        w += f" ({s.watermark_behind_s:.1f} s behind the end)"
    lines = [
        f"Final summary: join {s.join}",
        f"  {s.description}",
        f"  Written {s.left_written} {left}s, {s.right_written} {right}s "
        f"({s.right_written_late} of them late), {s.right_not_due} {right}s not due when the "
        "run ended",
        f"  Pairs {s.pairs} ({s.pairs_per_s:.0f}/s), left-only {s.left_only} ({s.outer}, "
        f"final), late {s.late_left}/{s.late_right} ({left}s/{right}s)",
        f"  W {w}",
        f"  Result freshness over {f.events} pairs (emitted_at - the pair's second record "
        f"written, ms): p50 {show(f.p50_ms, '{:.0f}')}, p95 {show(f.p95_ms, '{:.0f}')}, "
        f"p99 {show(f.p99_ms, '{:.0f}')}, max {show(f.max_ms, '{:.0f}')}; unmeasured "
        f"{s.freshness_unmeasured}",
    ]
    if s.newest:
        lines.append("  Newest pairs:")
        lines += [f"    {p.text(left, right)}" for p in s.newest]
    if s.last_failure:
        lines.append(f"  Last failure: {s.last_failure}")
    return lines


class JoinWatch:
    """Reads an interval join's status and new results; told by the writer when each record was
    written (``written``, from its thread)."""

    def __init__(self, dsn: str, join: joins.Join, clock: Clock = utc_now,
                 left_noun: str = "left record", right_noun: str = "right record",
                 outer: str = "") -> None:
        """``left_noun``/``right_noun`` name a record of each side in the lines (``order``),
        ``outer`` what a left-only row stands for (``unshipped orders``)."""
        self.dsn, self.join, self.clock = dsn, join, clock
        self.left_noun, self.right_noun = left_noun, right_noun
        self.outer = outer or f"{left_noun}s with no {right_noun}"
        self.lock = threading.Lock()
        self._written: dict[tuple[str, Any], datetime] = {}
        self.samples: list[Sample] = []
        self.unmeasured = 0
        self.pairs_seen = 0
        self.newest: deque[PairLine] = deque(maxlen=NEWEST)
        self.measure_from = clock()
        self.failures = 0
        self.last_failure = ""
        self._conn: psycopg.Connection | None = None
        self._seq: int | None = None
        self._cursor = 0
        self._last = (time.monotonic(), 0)

    # ---- the writer's side ------------------------------------------------------------------
    def written(self, stream: str, keys: list[Any], at: datetime) -> None:
        """The records with these keys appeared in a file at ``at``."""
        side = "l" if stream == self.join.left else "r"
        horizon = at - timedelta(seconds=KEEP_WRITTEN_S)
        with self.lock:
            for key in keys:
                self._written[(side, key)] = at
            while self._written:  # oldest first: written in time order
                first = next(iter(self._written))
                if self._written[first] >= horizon:
                    break
                del self._written[first]

    # ---- the store's side -------------------------------------------------------------------
    def begin(self, warmup_s: float = 0.0) -> None:
        """Count from now: results already there (a kept join's) are skipped, and pairs whose
        second record is written within ``warmup_s`` are not measured."""
        self.measure_from = self.clock() + timedelta(seconds=warmup_s)
        try:
            conn = self._connection()
            row = conn.execute(sql.SQL("SELECT coalesce(max(seq), 0) FROM {}").format(
                sql.Identifier("slidewin_joins", self.join.name))).fetchone()
            self._seq = int(row[0]) if row else 0
        except psycopg.Error as exc:
            self._failed(exc)
        self._last = (time.monotonic(), 0)

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = connect(self.dsn, autocommit=True)
        return self._conn

    def _failed(self, exc: BaseException) -> None:
        self.failures += 1
        self.last_failure = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"[:300]
        self.close()

    def poll(self) -> joins.JoinStatus:
        """Read the results written since the last look, then the join's status."""
        conn = self._connection()
        if self._seq is None:
            self._seq = 0
        while True:
            answers = joins.since(conn, self.join.name, self._seq, READ_CHUNK)
            for answer in answers:
                self._take(answer)
            if answers:
                self._seq = answers[-1].seq or self._seq
            if len(answers) < READ_CHUNK:
                break
        return joins.status(conn, self.join.name)

    def _take(self, answer: joins.Answer) -> None:
        if answer.l is None or answer.r is None or answer.emitted_at is None:
            return  # an outer row: counted by the status
        lkey, rkey = answer.l.get(self.join.select_left[1]), answer.r.get(
            self.join.select_right[1])
        with self.lock:
            seen = [self._written.get(("l", lkey)), self._written.get(("r", rkey))]
            self.pairs_seen += 1
            fresh: float | None = None
            if None in seen:
                self.unmeasured += 1
            else:
                second = max(t for t in seen if t is not None)
                if second >= self.measure_from:
                    fresh = (answer.emitted_at - second).total_seconds()
                    self.samples.append(Sample(second, fresh, 1))
                else:
                    self.unmeasured += 1
            self.newest.append(PairLine(
                answer.seq or 0, lkey, str(answer.l.get(self.join.select_left[0])), rkey,
                str(answer.r.get(self.join.select_right[0])), answer.emitted_at, fresh))

    def lines(self) -> list[str]:
        """The join's part of a report (a failure costs one report; the next opens anew)."""
        try:
            st = self.poll()
        except psycopg.Error as exc:
            self._failed(exc)
            return [f"  Join {self.join.name}: no report this time ({type(exc).__name__})"]
        mono = time.monotonic()
        with self.lock:
            new = self.samples[self._cursor:]
            self._cursor = len(self.samples)
            seen = self.pairs_seen
        span = max(mono - self._last[0], 1e-6)
        rate = (seen - self._last[1]) / span
        self._last = (mono, seen)
        fresh = latency_stats(new)
        return [
            f"  Join {self.join.name}: pairs {st.pairs} ({rate:.0f}/s), left-only "
            f"{st.left_only} ({self.outer}, final), late {st.late_left}/{st.late_right} "
            f"({self.left_noun}s/{self.right_noun}s), {self._w_text(st.watermark)}",
            f"    result freshness p50/p95 {show(fresh.p50_ms, '{:.0f}')}/"
            f"{show(fresh.p95_ms, '{:.0f}')} ms over {fresh.events} pairs since the last report",
        ]

    def _w_text(self, watermark: datetime | None) -> str:
        if watermark is None:
            return "W not set yet"
        return f"W {max(0.0, (self.clock() - watermark).total_seconds()):.1f}s behind"

    def summary(self, matched: MatchedStreams, duration_s: float,
                drain_s: float = 5.0) -> JoinSummary:
        """The run's totals, after up to ``drain_s`` for every written right record to pair or
        count as late (each refers to one left record, written before it)."""
        deadline = time.monotonic() + drain_s
        while True:
            st = self.poll()
            done = st.pairs + st.late_right >= matched.stats.snapshot()["written"]
            if done or time.monotonic() >= deadline:
                break
            time.sleep(0.25)
        counts = matched.stats.snapshot()
        j = self.join
        description = (f"{j.left} {j.join_type} join {j.right} on {j.on} and r.ts between "
                       f"l.ts - {j.before.total_seconds():g}s and l.ts + "
                       f"{j.after.total_seconds():g}s, grace {j.grace.total_seconds():g}s")
        with self.lock:
            stats = latency_stats(self.samples)
            newest = list(self.newest)[::-1]
            return JoinSummary(
                join=j.name, description=description, duration_s=duration_s,
                left_written=counts["left"], right_written=counts["written"],
                right_written_late=counts["late"], right_not_due=counts["pending"],
                pairs=st.pairs, left_only=st.left_only, right_only=st.right_only,
                late_left=st.late_left, late_right=st.late_right, outer=self.outer,
                watermark=st.watermark,
                watermark_behind_s=None if st.watermark is None
                else max(0.0, (self.clock() - st.watermark).total_seconds()),
                pairs_seen=self.pairs_seen, freshness=stats, freshness_unmeasured=self.unmeasured,
                newest=newest, failures=self.failures, last_failure=self.last_failure)

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None


class JoinFeed:
    """Writes the two streams (``MatchedStreams``) in a thread of its own, telling the watch
    when each record was written."""

    def __init__(self, matched: MatchedStreams, watch: JoinWatch) -> None:
        self.matched, self.watch = matched, watch
        matched.on_written = watch.written
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started = time.monotonic()
        self.ended: float | None = None

    def start(self, stop: threading.Event, duration_s: float, warmup_s: float) -> None:
        """Write until ``stop`` or ``self.stop()``, at most ``duration_s``."""
        until = time.monotonic() + duration_s

        def run() -> None:
            try:
                self.matched.run(self._stop, until=until)
            finally:
                self.ended = time.monotonic()

        def forward() -> None:  # the demo's stop (Ctrl-C, SIGTERM) stops this writer too
            while not self._stop.wait(0.1):
                if stop.is_set():
                    self._stop.set()

        threading.Thread(target=forward, name="slidewin-join-stop", daemon=True).start()
        self.watch.begin(warmup_s)
        self.started = time.monotonic()
        self._thread = threading.Thread(target=run, name="slidewin-join-feed", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def summary(self, drain_s: float = 5.0) -> JoinSummary:
        self.stop()
        ended = self.ended or time.monotonic()
        return self.watch.summary(self.matched, ended - self.started, drain_s)
