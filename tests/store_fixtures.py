"""Helpers for the store's own tests: a small 3-partition store, keys known to land in a chosen
partition, and readers of the raw rows in the nibbles' (ts, uuid) order.

Keys look like ``k0042``: same length, lowercase letters and digits, so every collation orders
them as Python does and the (ts, uuid) order can be computed on either side.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta

import psycopg
import pytest

from slidewin.db.events import Event, insert_events, partition_of
from tests.conftest import T0, clean_connection

PARTS = 3

Row = tuple[str, int, datetime]


def at(seconds: float) -> datetime:
    """T0 plus ``seconds`` (fractions allowed): pinned event times."""
    return T0 + timedelta(seconds=seconds)


def keys_in(part: int, count: int, prefix: str = "k", partitions: int = PARTS) -> list[str]:
    """``count`` keys that hash to partition ``part``."""
    found: list[str] = []
    i = 0
    while len(found) < count:
        key = f"{prefix}{i:04d}"
        if partition_of(key, partitions) == part:
            found.append(key)
        i += 1
    return found


def put(conn: psycopg.Connection, rows: Iterable[Row], partitions: int = PARTS) -> int:
    """Insert ``(uuid, val, ts)`` rows, skipping stored (uuid, ts); returns rows inserted."""
    return insert_events(conn, [Event(*r) for r in rows], partitions)


def rows_of(conn: psycopg.Connection, part: int | None = None) -> list[Row]:
    """Raw rows (of one partition, or all) in the nibbles' order: (ts, uuid)."""
    where = "" if part is None else "WHERE part = %s"
    args = () if part is None else (part,)
    return [
        (u, v, t)
        for u, v, t in conn.execute(
            f"SELECT uuid, val, ts FROM slidewin.events {where} ORDER BY ts, uuid", args
        ).fetchall()
    ]


def oldest_first(rows: Iterable[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (r[2], r[0]))


@pytest.fixture(scope="module")
def small_store_dsn(make_store) -> str:
    """One 3-partition store per test module."""
    return make_store(PARTS)


@pytest.fixture
def sconn(small_store_dsn: str) -> Iterator[psycopg.Connection]:
    """Autocommit connection to the emptied 3-partition store; rollups checked afterwards."""
    with clean_connection(small_store_dsn) as c:
        yield c
