"""Helpers for the jobs tests: deterministic event loads on a pinned clock, row counts."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import psycopg
import pytest

from slidewin.db.events import Event, copy_events
from tests.conftest import CLEAN_SQL, T0, clean_connection

JOBS_CLEAN_SQL = CLEAN_SQL + ", slidewin.job_runs, slidewin.apscheduler_jobs"


def at(seconds: float) -> datetime:
    """T0 plus ``seconds``: pinned event times."""
    return T0 + timedelta(seconds=seconds)


def events(start: float, seconds: float, per_second: int, prefix: str = "e") -> list[Event]:
    """``per_second`` events per second from ``at(start)`` for ``seconds``, evenly spaced, keys
    unique per call (``prefix``), values i so sums are checkable."""
    count = int(seconds * per_second)
    step = 1.0 / per_second
    return [Event(f"{prefix}{i:07d}", i, at(start + i * step)) for i in range(count)]


def load(conn: psycopg.Connection, rows: list[Event], partitions: int) -> int:
    return copy_events(conn, rows, partitions)


def total_rows(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT count(*) FROM slidewin.events").fetchone()
    assert row is not None
    return int(row[0])


def rows_by_part(conn: psycopg.Connection) -> dict[int, int]:
    got = conn.execute("SELECT part, count(*) FROM slidewin.events GROUP BY part").fetchall()
    return {int(p): int(n) for p, n in got}


def oldest(conn: psycopg.Connection) -> datetime | None:
    row = conn.execute("SELECT min(ts) FROM slidewin.events").fetchone()
    return row[0] if row else None


@pytest.fixture(scope="module")
def jobs_store_dsn(make_store) -> str:
    """One 4-partition store per test module."""
    return make_store(4)


@pytest.fixture
def jconn(jobs_store_dsn: str) -> Iterator[psycopg.Connection]:
    """Autocommit connection to the emptied 4-partition store; rollups checked afterwards."""
    with clean_connection(jobs_store_dsn, JOBS_CLEAN_SQL) as c:
        yield c
