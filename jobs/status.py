"""What ``slidewin jobs status`` shows: each job's last run and deletes/s, and for retention jobs
the lag per partition -- how far the store is behind its policy right now.

Lag (promise 3): ``age_over_s`` = age of the partition's oldest row minus the history (> 0 means
rows older than the policy allows are still there); ``rows_over`` = rows minus the partition's
row target. Both come from the exact rollups and one primary-key probe per partition, never a
scan of the raw table.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from slidewin.db.retention import row_targets
from slidewin.db.status import partition_status
from slidewin.jobs.config import RetentionPolicy
from slidewin.jobs.store import JobInfo

RATE_WINDOW = timedelta(seconds=60)

LAST_RUN_SQL = """
SELECT started_at, finished_at, rounds, deleted, deleted_by_part, caught_up, skipped, detail,
       error
  FROM slidewin.job_runs WHERE job = %s ORDER BY id DESC LIMIT 1
"""

RATE_SQL = """
SELECT coalesce(sum(deleted), 0) AS deleted, min(started_at) AS since, count(*) AS runs
  FROM slidewin.job_runs WHERE job = %s AND finished_at > %s
"""


@dataclass(frozen=True)
class PartitionLag:
    part: int
    rows: int
    oldest: datetime | None
    target_rows: int | None
    age_over_s: float | None
    rows_over: int | None

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["oldest"] = self.oldest.isoformat() if self.oldest else None
        return out


@dataclass(frozen=True)
class JobStatus:
    job: JobInfo
    last_run: dict[str, Any] | None
    deletes_per_s: float | None
    runs_last_minute: int
    lag: list[PartitionLag] | None

    def as_json(self) -> dict[str, Any]:
        last = None
        if self.last_run is not None:
            last = {k: (v.isoformat() if isinstance(v, datetime) else v)
                    for k, v in self.last_run.items()}
        return {
            **self.job.as_json(),
            "last_run": last,
            "deletes_per_s": self.deletes_per_s,
            "runs_last_minute": self.runs_last_minute,
            "lag": [p.as_json() for p in self.lag] if self.lag is not None else None,
        }


def no_jit(conn: psycopg.Connection) -> None:
    """Turn JIT off for this session: the catalog/rollup queries here are tiny, but the planner
    estimates slidewin.partition_keys() at millions of rows and JIT-compiles them (~0.5 s)."""
    conn.execute("SET jit = off")


def job_status(conn: psycopg.Connection, job: JobInfo, now: datetime) -> JobStatus:
    """Status of one stored job at ``now``."""
    cur = conn.cursor(row_factory=dict_row)
    last = cur.execute(LAST_RUN_SQL, (job.name,)).fetchone()
    rate = cur.execute(RATE_SQL, (job.name, now - RATE_WINDOW)).fetchone() or {}
    deletes_per_s = _rate(rate, now) if job.kind == "retention" else None
    lag = retention_lag(conn, _policy(job), now) if job.kind == "retention" else None
    return JobStatus(job, last, deletes_per_s, int(rate.get("runs") or 0), lag)


def retention_lag(
    conn: psycopg.Connection, policy: RetentionPolicy, now: datetime
) -> list[PartitionLag]:
    """Per partition: rows, oldest row, and how far each is beyond the policy at ``now``."""
    targets = row_targets(conn, policy.row_limit, policy.split) if policy.row_limit else {}
    history = policy.history_limit
    out = []
    for p in partition_status(conn):
        target = targets.get(p.part) if policy.row_limit else None
        age_over = None
        if history is not None and p.oldest is not None:
            age_over = round((now - p.oldest - history).total_seconds(), 3)
        rows_over = p.rows - target if target is not None else None
        out.append(PartitionLag(p.part, p.rows, p.oldest, target, age_over, rows_over))
    return out


def all_status(conn: psycopg.Connection, jobs: list[JobInfo], now: datetime) -> list[JobStatus]:
    no_jit(conn)
    return [job_status(conn, job, now) for job in jobs]


def _policy(job: JobInfo) -> RetentionPolicy:
    return RetentionPolicy.from_kwargs(job.kwargs)


def _rate(row: dict[str, Any], now: datetime) -> float:
    since = row.get("since")
    if not since:
        return 0.0
    span = max((now - since).total_seconds(), 1.0)
    return round(float(row["deleted"]) / span, 1)
