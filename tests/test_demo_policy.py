"""The demo leaves the store's retention policy as it found it.

``slidewin demo`` stores its own retention (e.g. a 30 s history) as policy ``default`` -- the
settings row the ingest and the window checks read, and the scheduler's job. It used to stay
after the demo ended, and then every window of the default dashboard view (longer than 30 s) was
refused. db.retention_settings.snapshot_policy / restore_policy put both back, byte for byte, or
remove them when the store had none; the demo calls them however it ends.
"""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from slidewin.db.retention_settings import (
    describe_policy,
    read_settings,
    restore_policy,
    snapshot_policy,
)
from slidewin.jobs import store as job_store
from slidewin.jobs.config import RetentionPolicy
from tests import store_fixtures

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn
DEMO = RetentionPolicy(history=timedelta(seconds=30), chunk=500)


@pytest.fixture
def store(sconn):
    sconn.execute("DELETE FROM slidewin.apscheduler_jobs")
    return sconn


def _job_row(conn: psycopg.Connection) -> tuple | None:
    return conn.execute("SELECT next_run_time, job_state FROM slidewin.apscheduler_jobs "
                        "WHERE id = 'default'").fetchone()


def test_a_store_without_a_policy_has_none_after_the_demo(store, small_store_dsn):
    saved = snapshot_policy(store)
    assert (saved.settings, saved.job) == (None, None)
    job_store.add_retention(small_store_dsn, DEMO)  # what the demo's `jobs add retention` does
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="size 60s plus"):
        store.execute("SELECT slidewin.check_window_spec(60, 60)")  # the 30 s history refuses
    restore_policy(store, saved)
    assert read_settings(store) is None and _job_row(store) is None
    assert job_store.list_jobs(small_store_dsn) == []
    store.execute("SELECT slidewin.check_window_spec(60, 60)")  # the dashboard's minute again
    assert describe_policy(saved) == "retention policy 'default': none"


def test_the_store_s_own_policy_and_job_come_back_byte_for_byte(store, small_store_dsn):
    job_store.add_retention(small_store_dsn, RetentionPolicy(history=timedelta(hours=2),
                                                             max_rows=1000))
    before_row, before_settings = _job_row(store), read_settings(store)
    saved = snapshot_policy(store)
    job_store.add_retention(small_store_dsn, DEMO)
    assert read_settings(store).history_s == 30.0  # type: ignore[union-attr]
    restore_policy(store, saved)
    assert _job_row(store) == before_row and read_settings(store) == before_settings
    (job,) = job_store.list_jobs(small_store_dsn)
    assert (job.name, job.kwargs["history_s"], job.kwargs["max_rows"]) == ("default", 7200.0, 1000)
    assert describe_policy(saved) == ("retention policy 'default' (history 7200s, max rows 1000, "
                                      "its job scheduled)")

