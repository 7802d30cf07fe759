"""``slidewin jobs run`` outlives its database: PostgreSQL (the test's own, never the shared one)
is stopped and started under a running scheduler, whose rounds go on afterwards; it says so in
one line when lost and one when back (not once per thread); and when the database does not
come back within ``--reconnect-timeout`` it stops with a clean error."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import timedelta

import psycopg
import pytest

from slidewin.jobs import store
from slidewin.jobs.config import RetentionPolicy
from tests.invariants import assert_rollups_exact
from tests.restartable_pg import RestartablePostgres
from tests.test_jobs_scheduler import HOUR, PARTS, count, put, slidewin, stamped
from tests.waiting import wait_until

# slow: every test stops or restarts a PostgreSQL of its own
pytestmark = pytest.mark.slow


@pytest.fixture
def dsn(own_server: RestartablePostgres) -> str:
    dsn = own_server.store(PARTS)
    store.add_retention(dsn, RetentionPolicy(history=timedelta(seconds=30), chunk=50))
    return dsn


def jobs_run(dsn: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        slidewin(dsn, "jobs", "run", *extra), stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def wait_until_count(dsn: str, expected: int, proc: subprocess.Popen, timeout_s: float) -> None:
    def counted() -> bool:
        assert proc.poll() is None, f"the scheduler exited {proc.poll()}"
        return count(dsn) == expected

    wait_until(counted, timeout_s, interval_s=0.2, what=f"{expected} rows")


def test_scheduler_survives_a_restart_and_keeps_deleting(own_server, dsn):
    put(dsn, stamped(-HOUR, 400, "old") + stamped(HOUR, 100, "new"))
    proc = jobs_run(dsn, "--reconnect-timeout", "1m")
    try:
        wait_until_count(dsn, 100, proc, timeout_s=30)
        own_server.restart(down_s=3)
        put(dsn, stamped(-HOUR, 300, "after"))  # only a round after the restart deletes these
        wait_until_count(dsn, 100, proc, timeout_s=60)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "scheduler stopped" in err
    assert err.count("database lost (") == 1, err  # once, whichever thread noticed first
    assert err.count("database back after ") == 1, err
    assert count(dsn, "SELECT sum(deleted) FROM slidewin.job_runs WHERE job = 'default'") == 700
    with psycopg.connect(dsn) as conn:
        assert_rollups_exact(conn)


def test_scheduler_gives_up_after_the_reconnect_timeout(own_server, dsn):
    proc = jobs_run(dsn, "--reconnect-timeout", "2s")
    try:
        assert proc.stderr is not None
        assert "scheduler running 1 job(s)" in proc.stderr.readline()
        wait_until(lambda: count(dsn, "SELECT count(*) FROM slidewin.job_runs"), 30,
                   what="the scheduler's first round recorded")  # it works on the store now
        own_server.stop()
        started = time.monotonic()
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "database lost (" in err
    assert "error: lost the database" in err and "--reconnect-timeout" in err, err
    assert "Traceback" not in err
    assert took < 30


# -- APScheduler's main loop: a pass over the store that fails must not end it ----------------

TICKS: list[float] = []


def tick() -> None:
    """The stored job of the test below (a module-level function: jobs are pickled refs)."""
    TICKS.append(time.monotonic())


class FlakyStore(store.JobStore):
    """The real job store, whose first update of a job's next run meets a dropped connection
    (as when PostgreSQL restarts between reading the due jobs and updating them)."""

    failures = 1
    job_funcs = store.JOB_FUNCS | {f"{__name__}:tick"}  # a test's job besides slidewin's

    def update_job(self, job: object) -> None:
        if self.failures:
            self.failures -= 1
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        super().update_job(job)


def test_a_failed_pass_over_the_store_does_not_end_the_scheduler(make_store):
    from datetime import UTC

    from apscheduler.triggers.interval import IntervalTrigger

    dsn = make_store(2)
    errors: list[Exception] = []
    engine = store.make_engine(dsn)
    jobstore = FlakyStore(engine=engine, tablename=store.TABLE, tableschema=store.SCHEMA)
    scheduler = store.Scheduler(jobstores={"default": jobstore}, job_defaults=store.JOB_DEFAULTS,
                                timezone=UTC, on_store_error=errors.append)
    TICKS.clear()
    scheduler.start()
    try:
        scheduler.add_job(tick, IntervalTrigger(seconds=0.2, timezone=UTC), id="tick")
        wait_until(lambda: len(TICKS) >= 4, 15, what="four ticks")
    finally:
        scheduler.shutdown(wait=True)
        engine.dispose()
    assert [type(e) for e in errors] == [psycopg.OperationalError]
    assert len(TICKS) >= 4  # without the guard APScheduler's loop ended at the first error
