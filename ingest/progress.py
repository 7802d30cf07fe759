"""One progress line per batch (stderr), and running totals for the end-of-run summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from slidewin.ingest.sink import BatchResult


def batch_line(stream: str, result: BatchResult, now: datetime) -> str:
    """``[text] batch 3: in 1000, accepted 990, dup 4, rejected 6 (late 4, malformed 2) ...``;
    ``extra fields in N`` when N records carried fields beyond uuid, val, ts (not stored)."""
    if result.skipped:
        return f"[{stream}] batch {result.batch_id}: already committed, skipped (replay)"
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(result.by_reason.items()))
    rate = result.rows_in / result.seconds if result.seconds > 0 else 0.0
    lag = f"{(now - result.newest_ts).total_seconds():.1f}s" if result.newest_ts else "-"
    stream_time = result.newest_ts.isoformat() if result.newest_ts else "-"
    nibbled = f", nibbled {result.nibbled}" if result.nibbled else ""
    extra = f", extra fields in {result.extra_fields} (not stored)" if result.extra_fields else ""
    # rows whose rollups the triggers computed (duplicates, fallbacks): Spark sums the rest
    by_triggers = result.accepted - result.spark_rollups
    triggers = f", rollups of {by_triggers} by trigger" if by_triggers > 0 else ""
    sessions = _sessions(result)
    return (
        f"[{stream}] batch {result.batch_id}: in {result.rows_in}, accepted {result.accepted}, "
        f"dup {result.duplicates}, rejected {result.rejected}"
        + (f" ({reasons})" if reasons else "")
        + f"{extra}{nibbled}{triggers}{sessions}, {rate:,.0f} rows/s "
        f"(spark {result.compute_s:.2f}s, "
        f"db {result.seconds - result.compute_s:.2f}s), lag {lag}, stream time {stream_time}"
    )


SESSIONS_HEAVY = 0.5  # of a batch's database time: more, and the batch line says so


def _sessions(result: BatchResult) -> str:
    """The time session windows took, and a warning when they took most of the batch."""
    if result.session_s < 0.005:
        return ""
    db_s = max(result.seconds - result.compute_s, result.session_s)
    heavy = result.session_s > SESSIONS_HEAVY * db_s
    why = (" -- most of the batch: see `slidewin windows list` (keys that never recur make a "
           "session per event)" if heavy else "")
    return f", sessions {result.session_s:.2f}s{why}"


@dataclass
class Totals:
    """Counts over every batch of a run (``slidewin ingest --json`` prints them)."""

    batches: int = 0
    skipped: int = 0
    rows_in: int = 0
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    nibbled: int = 0
    extra_fields: int = 0  # records with fields beyond uuid, val, ts (those are not stored)
    by_reason: dict[str, int] = field(default_factory=dict)

    def add(self, result: BatchResult) -> None:
        self.batches += 1
        self.skipped += int(result.skipped)
        self.rows_in += result.rows_in
        self.accepted += result.accepted
        self.duplicates += result.duplicates
        self.rejected += result.rejected
        self.nibbled += result.nibbled
        self.extra_fields += result.extra_fields
        for reason, count in result.by_reason.items():
            self.by_reason[reason] = self.by_reason.get(reason, 0) + count

    def as_json(self) -> dict[str, object]:
        return {**self.__dict__, "by_reason": dict(sorted(self.by_reason.items()))}
