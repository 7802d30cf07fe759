"""The final summary VoltDB never printed.

Totals (written, ingested, deleted, rejected, failures), overall throughput over the measured
period (the run minus the warmup), freshness percentiles over events created after the warmup,
rows retained and the oldest row's age per partition (``db.status``: row counts from the rollups,
the oldest row from one primary-key probe per partition), rejected events by reason, and each
session window definition's open sessions, merges, late events and longest session.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from slidewin.client.sim.freshness import LatencyStats
from slidewin.client.sim.reporter import Totals, show
from slidewin.db import sessions
from slidewin.db.status import PartitionStatus, partition_status


@dataclass(frozen=True)
class PartitionLine:
    part: int
    rows: int
    oldest_age_s: float | None


@dataclass(frozen=True)
class SessionLine:
    """A session window definition at the end of the run (JSON-ready)."""

    name: str
    open: int
    merges: int
    late: int
    longest_s: float | None
    longest_key: str | None

    @classmethod
    def of(cls, s: sessions.SessionStats) -> SessionLine:
        longest = None if s.longest is None else round(s.longest.total_seconds(), 3)
        return cls(s.name, s.open, s.merges, s.late, longest, s.longest_key)


@dataclass(frozen=True)
class Summary:
    duration_s: float
    measured_s: float
    written: int
    written_measured: int
    ingested: int
    ingested_measured: int
    deleted: int
    rejected: int
    duplicates: int
    failures: int
    last_failure: str
    rejected_by_reason: dict[str, int]
    freshness: LatencyStats
    unmeasured_events: int
    pending_events: int
    partitions: list[PartitionLine]
    sessions: list[SessionLine] = field(default_factory=list)

    @property
    def written_per_s(self) -> float:
        return self.written_measured / self.measured_s if self.measured_s > 0 else 0.0

    @property
    def ingested_per_s(self) -> float:
        return self.ingested_measured / self.measured_s if self.measured_s > 0 else 0.0

    @property
    def retained(self) -> int:
        return sum(p.rows for p in self.partitions)

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["written_per_s"] = round(self.written_per_s, 1)
        out["ingested_per_s"] = round(self.ingested_per_s, 1)
        out["retained"] = self.retained
        return out


def partition_lines(conn: psycopg.Connection, now: datetime) -> list[PartitionLine]:
    def age(p: PartitionStatus) -> float | None:
        return None if p.oldest is None else round((now - p.oldest).total_seconds(), 3)

    return [PartitionLine(p.part, p.rows, age(p)) for p in partition_status(conn)]


def build_summary(
    *,
    conn: psycopg.Connection,
    now: datetime,
    duration_s: float,
    measured_s: float,
    written: tuple[int, int],
    totals: Totals,
    at_warmup: Totals,
    failures: tuple[int, str],
    freshness: LatencyStats,
    unmeasured: int,
    pending: int,
) -> Summary:
    """``written`` is (all, after the warmup); ``at_warmup`` the totals when the warmup ended."""
    return Summary(
        duration_s=round(duration_s, 3),
        measured_s=round(measured_s, 3),
        written=written[0],
        written_measured=written[1],
        ingested=totals.ingested,
        ingested_measured=totals.ingested - at_warmup.ingested,
        deleted=totals.deleted,
        rejected=totals.rejected,
        duplicates=totals.duplicates,
        failures=failures[0],
        last_failure=failures[1],
        rejected_by_reason=dict(sorted(totals.rejected_by_reason.items())),
        freshness=freshness,
        unmeasured_events=unmeasured,
        pending_events=pending,
        partitions=partition_lines(conn, now),
        sessions=[SessionLine.of(st) for st in sessions.all_stats(conn)],
    )


def format_summary(s: Summary) -> list[str]:
    f = s.freshness
    lines = [
        "-" * 80,
        " Final summary",
        "-" * 80,
        f"  Ran {s.duration_s:.1f} s; statistics over {s.measured_s:.1f} s after the warmup",
        f"  Events written {s.written}, ingested {s.ingested}, deleted {s.deleted}, "
        f"rejected {s.rejected}, duplicates {s.duplicates}, failures {s.failures}",
        f"  Throughput {s.ingested_per_s:.0f}/s ingested, {s.written_per_s:.0f}/s written",
        f"  Freshness over {f.events} events (ms): avg {show(f.avg_ms, '{:.0f}')}, "
        f"p50 {show(f.p50_ms, '{:.0f}')}, p95 {show(f.p95_ms, '{:.0f}')}, "
        f"p99 {show(f.p99_ms, '{:.0f}')}, max {show(f.max_ms, '{:.0f}')}; "
        f"unmeasured {s.unmeasured_events}, still pending {s.pending_events}",
        f"  Rows retained {s.retained}:",
    ]
    for p in s.partitions:
        age = "no rows" if p.oldest_age_s is None else f"oldest {p.oldest_age_s:.1f} s old"
        lines.append(f"    partition {p.part:3d}: {p.rows:9d} rows, {age}")
    if s.rejected_by_reason:
        lines.append("  Rejected events by reason:")
        lines += [f"    {reason}: {n}" for reason, n in s.rejected_by_reason.items()]
    else:
        lines.append("  Rejected events by reason: none")
    lines += [f"  {sessions.describe(x.name, x.open, x.merges, x.late, x.longest_s, x.longest_key)}"
              for x in s.sessions]
    if s.last_failure:
        lines.append(f"  Last failure: {s.last_failure}")
    return lines
