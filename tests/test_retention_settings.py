"""slidewin.retention_settings through its one owner, db.retention_settings."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from slidewin.db.retention_settings import (
    DEFAULT_NAME,
    RetentionSettings,
    delete_settings,
    read_settings,
    upsert_settings,
)
from slidewin.jobs.config import RetentionPolicy


def test_upsert_read_replace_delete(conn):
    assert read_settings(conn) is None
    upsert_settings(conn, RetentionSettings(DEFAULT_NAME, 30.0, None, 100, 50))
    got = read_settings(conn, DEFAULT_NAME)
    assert got == RetentionSettings("default", 30.0, None, 100, 50)
    assert (got.history, got.yield_) == (timedelta(seconds=30), timedelta(milliseconds=50))
    upsert_settings(conn, RetentionSettings(DEFAULT_NAME, None, 1000, 250, 0))
    got = read_settings(conn)
    assert got == RetentionSettings("default", None, 1000, 250, 0) and got.history is None
    delete_settings(conn, DEFAULT_NAME)
    delete_settings(conn, DEFAULT_NAME)  # none left: nothing happens
    assert read_settings(conn) is None


def test_the_table_refuses_a_row_without_a_limit(conn):
    with pytest.raises(psycopg.errors.CheckViolation):
        upsert_settings(conn, RetentionSettings("nolimit", None, None, 100, 100))


def test_a_policy_round_trips_through_its_row(conn):
    policy = RetentionPolicy(history=timedelta(seconds=90), max_rows=5000, chunk=300,
                             yield_=timedelta(milliseconds=20))
    upsert_settings(conn, policy.settings("p"))
    got = read_settings(conn, "p")
    assert got == RetentionSettings("p", 90.0, 5000, 300, 20)
    assert RetentionPolicy.from_settings(got) == policy
