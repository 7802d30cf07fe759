"""Freshness: how long from an event's creation until the rollups count it.

What is measured. The generator writes events in batches (one file each); the events of a batch
were created evenly over (start, end]. For every batch we know, per second, how many events the
generator had written for that second up to and including this batch (a cumulative target). The
tracker polls ``sum(n)`` of the rollups for the seconds still pending -- a handful of seconds x
partitions rows -- and declares a batch *visible* at the first poll where every second it touches
holds at least its target. That batch's events then get the latency ``observed - midpoint``
(the mean over its evenly spread events), weighted by the batch's event count; percentiles are
over events. The poller looks every 10 ms but queries only after the rollups signalled an insert
(``db.changes``), so resolution is about 10 ms plus half a batch interval, at one query per
ingest commit.

What it is not. Rows deleted by retention before they are seen, or dead-lettered (late,
expired), keep a batch from ever reaching its target: after ``give_up_s`` the batch counts as
*unmeasured*, reported separately, never as a latency. Another writer adding events to the same
seconds would make batches look visible early; the simulator assumes it is the only writer.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import psycopg

from slidewin.client.sim.generator import Batch
from slidewin.db.changes import INSERT, RollupChanges
from slidewin.db.clock import Clock, utc_now

VISIBLE_SQL = """
SELECT extract(epoch FROM sec)::bigint, sum(n)::bigint
  FROM slidewin.rollups
 WHERE sec >= to_timestamp(%s) AND sec <= to_timestamp(%s)
 GROUP BY 1
"""


@dataclass(frozen=True)
class Sample:
    created: datetime  # the batch's midpoint creation time
    latency_s: float
    events: int


@dataclass
class _Pending:
    created: datetime
    events: int
    targets: dict[int, int]
    written_at: datetime


@dataclass(frozen=True)
class LatencyStats:
    events: int
    avg_ms: float | None
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    max_ms: float | None


def weighted_percentile(samples: list[Sample], q: float) -> float | None:
    """The latency below which a fraction ``q`` of the events fall (None without samples)."""
    ordered = sorted(samples, key=lambda s: s.latency_s)
    total = sum(s.events for s in ordered)
    if total == 0:
        return None
    running = 0
    for s in ordered:
        running += s.events
        if running >= q * total:
            return s.latency_s
    return ordered[-1].latency_s


def latency_stats(samples: list[Sample]) -> LatencyStats:
    total = sum(s.events for s in samples)
    if total == 0:
        return LatencyStats(0, None, None, None, None, None)

    def ms(q: float) -> float | None:
        value = weighted_percentile(samples, q)
        return None if value is None else value * 1000

    avg = sum(s.latency_s * s.events for s in samples) / total * 1000
    return LatencyStats(total, avg, ms(0.5), ms(0.95), ms(0.99), ms(1.0))


@dataclass
class FreshnessTracker:
    """Fed by the generator (``add_batch``), polled by a thread (``poll``)."""

    clock: Clock = utc_now
    give_up_s: float = 30.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    samples: list[Sample] = field(default_factory=list)
    unmeasured_events: int = 0
    queries: int = 0
    _pending: deque[_Pending] = field(default_factory=deque)
    _written: dict[int, int] = field(default_factory=dict)
    _cursor: int = 0

    def add_batch(self, batch: Batch) -> None:
        with self.lock:
            targets = {}
            for sec, count in batch.seconds.items():
                self._written[sec] = self._written.get(sec, 0) + count
                targets[sec] = self._written[sec]
            middle = batch.start + (batch.end - batch.start) / 2
            self._pending.append(_Pending(middle, batch.count, targets, batch.end))

    def pending_range(self) -> tuple[int, int] | None:
        with self.lock:
            if not self._pending:
                return None
            secs = [s for p in self._pending for s in p.targets]
            return min(secs), max(secs)

    def poll(self, conn: psycopg.Connection, inserted: bool = True) -> int:
        """One look at the rollups; returns how many batches became visible. With
        ``inserted=False`` (no insert committed since the last look) no query is sent: only
        batches past ``give_up_s`` are settled."""
        span = self.pending_range()
        if span is None:
            return 0
        observed = self.clock()
        rows = []
        if inserted:
            rows = conn.execute(VISIBLE_SQL, span).fetchall()
            self.queries += 1
        return self.observe({int(sec): int(n) for sec, n in rows}, observed)

    def poller(self, conn: psycopg.Connection) -> Callable[[], int]:
        """A step for a 10 ms loop on ``conn`` (autocommit, this thread's own): it LISTENs for
        the rollups' insert signal and queries only after one."""
        changes = RollupChanges(conn)
        return lambda: self.poll(conn, inserted=INSERT in changes.take())

    def observe(self, visible: dict[int, int], observed: datetime) -> int:
        """Settle pending batches against per-second visible counts seen at ``observed``."""
        done = 0
        with self.lock:
            keep: deque[_Pending] = deque()
            for p in self._pending:
                if all(visible.get(s, 0) >= t for s, t in p.targets.items()):
                    latency = (observed - p.created).total_seconds()
                    self.samples.append(Sample(p.created, latency, p.events))
                    done += 1
                elif observed - p.written_at > timedelta(seconds=self.give_up_s):
                    self.unmeasured_events += p.events
                else:
                    keep.append(p)
            self._pending = keep
            self._prune_written()
        return done

    def _prune_written(self) -> None:
        """Forget cumulative counts of seconds no pending or future batch can touch: the
        generator moves forward, so a future batch starts at or after the newest second."""
        floor = max(self._written, default=0)
        if self._pending:
            floor = min(floor, *(s for p in self._pending for s in p.targets))
        for sec in [s for s in self._written if s < floor]:
            del self._written[sec]

    def take_new(self) -> list[Sample]:
        """Samples since the previous call (for the periodic report)."""
        with self.lock:
            new = self.samples[self._cursor:]
            self._cursor = len(self.samples)
        return new

    def overall(self, since: datetime | None = None) -> LatencyStats:
        """Percentiles over every sample of events created at or after ``since``."""
        with self.lock:
            chosen = [s for s in self.samples if since is None or s.created >= since]
        return latency_stats(chosen)

    @property
    def pending_events(self) -> int:
        with self.lock:
            return sum(p.events for p in self._pending)

