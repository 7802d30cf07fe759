"""The job store: adding, listing, pausing and removing scheduled jobs in PostgreSQL.

Jobs live in APScheduler 3.x's SQLAlchemy job store (table slidewin.apscheduler_jobs), so they
survive restarts and every scheduler on the database sees them. A stored job is a reference to a
module-level function in ``jobs.scheduler`` plus plain keyword arguments -- no connection, no DSN
(a scheduler runs its jobs against the database that stores them), so jobs pickle and carry no
secrets. Changes are made through a scheduler started *paused* (APScheduler's way to edit a
store without running anything); a running ``slidewin jobs run`` picks them up within a second.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import sqlalchemy
from apscheduler.job import Job
from apscheduler.jobstores.base import JobLookupError
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import STATE_RUNNING
from apscheduler.triggers.interval import IntervalTrigger

from slidewin.db.retention_settings import delete_settings, upsert_settings
from slidewin.db.schema import require_schema
from slidewin.jobs.apscheduler_internals import GuardedPasses, Pass
from slidewin.jobs.config import RetentionPolicy
from slidewin.jobs.errors import JobError, JobNotFound
from slidewin.jobs.refs import JOB_FUNCS, load_state, migrate_job_refs

TABLE = "apscheduler_jobs"
SCHEMA = "slidewin"
KINDS = ("retention", "refresh", "stats")
FUNCS = {kind: f"slidewin.jobs.scheduler:{kind}_job" for kind in KINDS}
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MIN_INTERVAL = timedelta(milliseconds=1)  # IntervalTrigger turns a zero interval into 1 s
JOB_DEFAULTS = {"coalesce": True, "max_instances": 1, "misfire_grace_time": 30}


@dataclass(frozen=True)
class JobInfo:
    """A stored job as ``jobs list`` shows it."""

    name: str
    kind: str
    every_s: float
    next_run: datetime | None
    kwargs: dict[str, Any]

    @property
    def paused(self) -> bool:
        return self.next_run is None

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "every_s": self.every_s,
            "paused": self.paused,
            "next_run": self.next_run.isoformat() if self.next_run else None,
            "kwargs": self.kwargs,
        }


def make_engine(dsn: str) -> sqlalchemy.Engine:
    """A SQLAlchemy engine over psycopg 3 that connects with ``dsn`` as given (so the embedded
    server's socket DSN works: SQLAlchemy never re-parses it)."""
    return sqlalchemy.create_engine(
        "postgresql+psycopg://", creator=lambda: psycopg.connect(dsn), pool_pre_ping=True
    )


StoreError = Callable[[Exception], None]
STORE_RETRY_S = 1.0  # after a failed pass over the store, look again this soon


class JobStore(SQLAlchemyJobStore):
    """APScheduler's SQLAlchemy store, telling ``on_error`` when reading the due jobs fails.

    APScheduler catches that error, logs it and retries later; the hook lets ``jobs run`` see
    a database that went away (and wait for it) even when no job is running to notice."""

    def __init__(self, *args: Any, on_error: StoreError | None = None, **kwargs: Any) -> None:
        self.on_error = on_error
        super().__init__(*args, **kwargs)

    job_funcs: frozenset[str] = JOB_FUNCS  # the functions a stored job may name

    def _reconstitute_job(self, job_state: bytes) -> Job:
        """APScheduler's, with the state read by ``refs.load_state`` (no class a slidewin job
        does not hold, no function but ``job_funcs``: the jobs role may write this table). A
        state it refuses is treated by APScheduler as any job it cannot restore: logged and
        removed."""
        state = load_state(job_state, self.job_funcs)
        state["jobstore"] = self
        job = Job.__new__(Job)
        job.__setstate__(state)
        job._scheduler = self._scheduler
        job._jobstore_alias = self._alias
        return job

    def get_due_jobs(self, now: datetime) -> list[Any]:
        try:
            return super().get_due_jobs(now)
        except Exception as exc:
            if self.on_error is not None:
                self.on_error(exc)
            raise


def make_jobstore(engine: sqlalchemy.Engine, on_error: StoreError | None = None) -> JobStore:
    return JobStore(engine=engine, tablename=TABLE, tableschema=SCHEMA, on_error=on_error)


def check_schema(dsn: str) -> None:
    """SchemaMissing (with the fix) unless this database has the slidewin schema; and stored
    jobs that name a module by a former name renamed (APScheduler would delete them)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        require_schema(conn)
        migrate_job_refs(conn)


class Scheduler(GuardedPasses):
    """APScheduler's BackgroundScheduler, processing jobs only while running.

    APScheduler's main loop can process jobs once more after ``shutdown()`` set the state to
    stopped (submitting to executors already shut down: an error and a traceback). Here a
    scheduler that is not running never processes; ``editing=True`` makes one that never does
    (started paused, it only edits the store).

    A pass over the store that fails after reading the due jobs (updating a job's next run
    when the database went away) would end APScheduler's main loop for good; here it goes to
    ``on_store_error`` and the next pass comes within ``STORE_RETRY_S``. (The hook into
    APScheduler's passes is ``jobs.apscheduler_internals``.)
    """

    def __init__(
        self, *args: Any, editing: bool = False, on_store_error: StoreError | None = None,
        **kwargs: Any,
    ) -> None:
        self.editing, self.on_store_error = editing, on_store_error
        super().__init__(*args, **kwargs)

    def guarded_pass(self, process: Pass) -> float | None:
        if self.editing or self.state != STATE_RUNNING:
            return None
        try:
            return process()
        except Exception as exc:
            if self.on_store_error is None:
                raise
            self.on_store_error(exc)
            return STORE_RETRY_S


@contextmanager
def job_store(dsn: str) -> Iterator[BackgroundScheduler]:
    """A scheduler over the stored jobs, started paused: edit jobs, run nothing."""
    check_schema(dsn)
    engine = make_engine(dsn)
    scheduler = Scheduler(
        jobstores={"default": make_jobstore(engine)}, job_defaults=JOB_DEFAULTS, timezone=UTC,
        editing=True,
    )
    scheduler.start(paused=True)
    try:
        yield scheduler
    finally:
        scheduler.shutdown(wait=False)
        engine.dispose()


def check_name(name: str) -> str:
    if not NAME.match(name or ""):
        raise JobError(
            f"job name {name!r} is not valid; use 1-64 letters, digits, '_', '.' or '-' "
            "(e.g. default, refresh)"
        )
    return name


def add_retention(dsn: str, policy: RetentionPolicy, name: str = "default") -> JobInfo:
    """Store (or replace) retention job ``name`` and upsert its policy in retention_settings."""
    check_name(name)
    every = max(policy.yield_, MIN_INTERVAL)
    info = _add(dsn, "retention", name, every, {"name": name, **policy.as_kwargs()})
    with psycopg.connect(dsn, autocommit=True) as conn:
        upsert_settings(conn, policy.settings(name))  # the ingest reads ``default``'s history
    return info


def add_periodic(dsn: str, kind: str, every: timedelta, name: str | None = None) -> JobInfo:
    """Store (or replace) a ``refresh`` or ``stats`` job running every ``every``."""
    if kind not in ("refresh", "stats"):
        raise JobError(f"job kind {kind!r} is not periodic; use refresh or stats")
    if every < timedelta(milliseconds=100):
        raise JobError(f"--every {every} is too short for a {kind} job; use e.g. 5s or 10s")
    name = check_name(name or kind)
    return _add(dsn, kind, name, every, {"name": name})


def _add(dsn: str, kind: str, name: str, every: timedelta, kwargs: dict[str, Any]) -> JobInfo:
    with job_store(dsn) as scheduler:
        job = scheduler.add_job(
            FUNCS[kind],
            IntervalTrigger(seconds=every.total_seconds(), timezone=UTC),
            id=name,
            name=name,
            kwargs=kwargs,
            replace_existing=True,
            next_run_time=datetime.now(UTC),
        )
    return _info(job)


def list_jobs(dsn: str) -> list[JobInfo]:
    with job_store(dsn) as scheduler:
        return sorted((_info(j) for j in scheduler.get_jobs()), key=lambda j: j.name)


def remove_job(dsn: str, name: str) -> None:
    """Remove job ``name`` (and its retention_settings row, if it is a retention job)."""
    with job_store(dsn) as scheduler:
        try:
            scheduler.remove_job(name)
        except JobLookupError:
            raise _not_found(name) from None
    with psycopg.connect(dsn, autocommit=True) as conn:
        delete_settings(conn, name)


def pause_job(dsn: str, name: str) -> JobInfo:
    with job_store(dsn) as scheduler:
        try:
            return _info(scheduler.pause_job(name))
        except JobLookupError:
            raise _not_found(name) from None


def resume_job(dsn: str, name: str) -> JobInfo:
    with job_store(dsn) as scheduler:
        try:
            job = scheduler.resume_job(name)
        except JobLookupError:
            raise _not_found(name) from None
        return _info(job if job is not None else scheduler.get_job(name))


def _info(job: Any) -> JobInfo:
    kind = next((k for k, ref in FUNCS.items() if ref == job.func_ref), job.func_ref)
    every = job.trigger.interval.total_seconds() if hasattr(job.trigger, "interval") else 0.0
    return JobInfo(job.id, kind, every, getattr(job, "next_run_time", None), dict(job.kwargs))


def _not_found(name: str) -> JobNotFound:
    return JobNotFound(f"no job named {name!r}; see: slidewin jobs list")
