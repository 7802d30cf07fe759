"""Writing raw events: the partition function, a bulk COPY path and the staging-table insert.

``partition_of`` is the same formula as SQL ``slidewin.partition_of`` and the Spark expression in
``ingest``: the first 32 bits of md5(uuid), unsigned, modulo the partition count.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple

import psycopg
from psycopg import sql

STAGING = "slidewin_staging"  # the TEMP table of ``insert_staged`` (one per session)


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
    rows = ((partition_of(ev.uuid, partitions), ev.uuid, ev.val, ev.ts) for ev in events)
    if conn.autocommit:
        with conn.transaction():
            return insert_staged(conn, rows)
    return insert_staged(conn, rows)


StagedRows = bytes | Iterable[tuple[int, str, int, datetime]]


def insert_staged(conn: psycopg.Connection, rows: StagedRows) -> int:
    """Insert ``(part, uuid, val, ts)`` rows through a TEMP staging table, skipping any (part,
    ts, uuid) already stored or sent twice (one of them is kept). Returns rows inserted.

    The one way to insert events that may be stored already: COPY has no ON CONFLICT, so the
    rows are COPYed into the staging table and moved with ``INSERT ... ON CONFLICT DO NOTHING``
    (the rollup triggers see exactly the rows inserted). ``rows`` is tuples, or a binary COPY
    payload (``ingest.pgbinary``). Runs in the caller's transaction, which must be open: the
    staging table is ON COMMIT DELETE ROWS.
    """
    staging = sql.Identifier(STAGING)
    cur = conn.cursor()
    cur.execute(
        sql.SQL(
            "CREATE TEMP TABLE IF NOT EXISTS {} "
            "(part smallint, uuid text, val bigint, ts timestamptz) ON COMMIT DELETE ROWS"
        ).format(staging)
    )
    options = sql.SQL(" (FORMAT binary)" if isinstance(rows, bytes) else "")
    copy_sql = sql.SQL("COPY {} (part, uuid, val, ts) FROM STDIN{}").format(staging, options)
    with cur.copy(copy_sql) as copy:
        if isinstance(rows, bytes):
            copy.write(rows)
        else:
            for row in rows:
                copy.write_row(row)
    cur.execute(
        sql.SQL(
            "INSERT INTO slidewin.events (part, uuid, val, ts) "
            "SELECT part, uuid, val, ts FROM {} ON CONFLICT DO NOTHING"
        ).format(staging)
    )
    inserted = cur.rowcount
    cur.execute(sql.SQL("TRUNCATE {}").format(staging))
    return inserted
