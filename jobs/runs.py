"""Recording job executions in slidewin.job_runs (bounded: the newest KEEP per job are kept)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

KEEP = 1000


@dataclass(frozen=True)
class JobRun:
    """One execution of one job, as stored."""

    job: str
    kind: str
    started_at: datetime
    finished_at: datetime
    rounds: int = 0
    deleted_by_part: dict[int, int] = field(default_factory=dict)
    caught_up: bool | None = None
    skipped: bool = False
    detail: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def record_run(conn: psycopg.Connection, run: JobRun, *, keep: int = KEEP) -> int:
    """Insert ``run`` and prune that job's records beyond the newest ``keep``."""
    row = conn.execute(
        "SELECT slidewin.record_job_run(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            run.job,
            run.kind,
            run.started_at,
            run.finished_at,
            run.rounds,
            Jsonb({str(k): v for k, v in run.deleted_by_part.items()}),
            run.caught_up,
            run.skipped,
            Jsonb(run.detail),
            run.error,
            keep,
        ),
    ).fetchone()
    return int(row[0]) if row else 0
