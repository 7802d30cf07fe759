"""Writing raw events: the partition function and a bulk COPY path.

``partition_of`` is the same formula as SQL ``slidewin.partition_of`` and the Spark expression in
``ingest``: the first 32 bits of md5(uuid), unsigned, modulo the partition count.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple

import psycopg


class Event(NamedTuple):
    uuid: str
    val: int
    ts: datetime


def partition_of(uuid: str, partitions: int) -> int:
    return int(hashlib.md5(uuid.encode("utf-8")).hexdigest()[:8], 16) % partitions  # noqa: S324


def partition_count(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT partitions FROM slidewin.config").fetchone()
    assert row is not None, "slidewin.config is empty: run slidewin db init"
    return int(row[0])


def copy_events(conn: psycopg.Connection, events: Iterable[Event], partitions: int) -> int:
    """COPY events into slidewin.events (the rollup trigger aggregates them). Returns rows sent.

    COPY has no ON CONFLICT: a duplicate (uuid, ts) aborts it. Callers that may resend rows use
    ``insert_events`` instead.
    """
    sent = 0
    with conn.cursor().copy("COPY slidewin.events (part, uuid, val, ts) FROM STDIN") as copy:
        for ev in events:
            copy.write_row((partition_of(ev.uuid, partitions), ev.uuid, ev.val, ev.ts))
            sent += 1
    return sent


def insert_events(conn: psycopg.Connection, events: Iterable[Event], partitions: int) -> int:
    """Insert events, skipping any (uuid, ts) already stored. Returns rows really inserted.

    On an autocommit connection it runs in a transaction of its own: the staging table is ON
    COMMIT DELETE ROWS, so the COPY's own commit would otherwise empty it before the INSERT.
    Otherwise it joins the caller's transaction (which the caller commits or rolls back).
    """
    if conn.autocommit:
        with conn.transaction():
            return _insert_events(conn, events, partitions)
    return _insert_events(conn, events, partitions)


def _insert_events(conn: psycopg.Connection, events: Iterable[Event], partitions: int) -> int:
    cur = conn.cursor()
    cur.execute(
        "CREATE TEMP TABLE IF NOT EXISTS slidewin_staging "
        "(part smallint, uuid text, val bigint, ts timestamptz) ON COMMIT DELETE ROWS"
    )
    with cur.copy("COPY slidewin_staging (part, uuid, val, ts) FROM STDIN") as copy:
        for ev in events:
            copy.write_row((partition_of(ev.uuid, partitions), ev.uuid, ev.val, ev.ts))
    cur.execute(
        "INSERT INTO slidewin.events (part, uuid, val, ts) "
        "SELECT DISTINCT ON (part, ts, uuid) part, uuid, val, ts FROM slidewin_staging "
        "ORDER BY part, ts, uuid ON CONFLICT DO NOTHING"
    )
    inserted = cur.rowcount
    cur.execute("TRUNCATE slidewin_staging")
    return inserted
