"""Answers about the scheduled jobs: the stored jobs (``jobs list``), each one's last run, rate
and the retention lag per partition (``jobs status``), and the runs recorded (``jobs runs``).

The jobs themselves live in APScheduler's store, read through ``jobs.store`` with the DSN."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from slidewin.client.answers.windows import iso
from slidewin.db import clock
from slidewin.db.errors import ConfigError
from slidewin.jobs import store
from slidewin.jobs.status import JobStatus, all_status

MAX_RUNS = 1000


@dataclass(frozen=True)
class JobList:
    jobs: list[store.JobInfo]

    def as_json(self) -> dict[str, Any]:
        return {"jobs": [j.as_json() for j in self.jobs]}


def job_list(dsn: str) -> JobList:
    return JobList(store.list_jobs(dsn))


@dataclass(frozen=True)
class JobsStatus:
    now: datetime
    statuses: list[JobStatus]

    def as_json(self) -> dict[str, Any]:
        return {"now": self.now.isoformat(), "jobs": [s.as_json() for s in self.statuses]}


def jobs_status(conn: psycopg.Connection, dsn: str) -> JobsStatus:
    """Each stored job's status now (the jobs read with ``dsn``, the rest on ``conn``)."""
    found = store.list_jobs(dsn)
    now = clock.utc_now()
    return JobsStatus(now, all_status(conn, found, now))


RUNS_SQL = """
SELECT id, job, kind, started_at, finished_at, rounds, deleted, deleted_by_part, caught_up,
       skipped, detail, error
  FROM slidewin.job_runs
 WHERE (%(job)s::text IS NULL OR job = %(job)s)
   AND (%(before)s::bigint IS NULL OR id < %(before)s)
 ORDER BY id DESC
 LIMIT %(limit)s
"""


@dataclass(frozen=True)
class JobRuns:
    """``jobs runs``: recorded runs, newest first (the store keeps each job's newest 1,000)."""

    runs: list[dict[str, Any]]
    next_before: int | None

    def as_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "next_before": self.next_before}


def job_runs(conn: psycopg.Connection, job: str | None = None, before: int | None = None,
             limit: int = 20) -> JobRuns:
    if not 1 <= limit <= MAX_RUNS:
        raise ConfigError(f"--limit {limit} must be from 1 to {MAX_RUNS}")
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(RUNS_SQL, {"job": job, "before": before,
                                      "limit": limit + 1}).fetchall()
    more = len(rows) > limit
    page = [{**r, "started_at": iso(r["started_at"]), "finished_at": iso(r["finished_at"])}
            for r in rows[:limit]]
    return JobRuns(page, page[-1]["id"] if more else None)
