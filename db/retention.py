"""Typed calls to the nibble procedures (one bounded, deterministic delete each) and to the
per-partition row targets they are given.

Each returns the number of rows deleted; a call that deletes ``chunk`` rows may have left work,
fewer means the partition is within its limits. Bad arguments raise ProcedureError.
"""

from __future__ import annotations

from datetime import datetime

import psycopg

from slidewin.db.connect import procedure_errors


def _call(conn: psycopg.Connection, sql: str, args: tuple[object, ...]) -> int:
    with procedure_errors():
        row = conn.execute(sql, args).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def delete_after_date(conn: psycopg.Connection, part: int, cutoff: datetime, chunk: int) -> int:
    """Delete up to ``chunk`` of the oldest rows of ``part`` older than ``cutoff``."""
    return _call(conn, "SELECT slidewin.delete_after_date(%s, %s, %s)", (part, cutoff, chunk))


def delete_oldest_to_target(
    conn: psycopg.Connection, part: int, target_rows: int, chunk: int
) -> int:
    """Delete up to ``chunk`` of the oldest rows of ``part`` while it holds > ``target_rows``."""
    return _call(
        conn, "SELECT slidewin.delete_oldest_to_target(%s, %s, %s)", (part, target_rows, chunk)
    )


def delete_to_limits(
    conn: psycopg.Connection, part: int, cutoff: datetime, target_rows: int, chunk: int
) -> int:
    """Both limits at once: older than ``cutoff`` or beyond the newest ``target_rows``."""
    return _call(
        conn,
        "SELECT slidewin.delete_to_limits(%s, %s, %s, %s)",
        (part, cutoff, target_rows, chunk),
    )


def nibble(
    conn: psycopg.Connection,
    part: int,
    cutoff: datetime | None,
    target_rows: int | None,
    chunk: int,
) -> int:
    """Whichever limits are given (at least one): the core under the three above."""
    return _call(
        conn, "SELECT slidewin.nibble(%s, %s, %s, %s)", (part, cutoff, target_rows, chunk)
    )


def row_targets(
    conn: psycopg.Connection, max_rows: int, split: str = "global"
) -> dict[int, int]:
    """Per-partition row targets for a store-wide ``max_rows``, from the exact rollups
    (slidewin.retention_targets): ``global`` keeps the newest rows of the whole store, ``even``
    gives each partition its share (VoltDB)."""
    with procedure_errors():
        rows = conn.execute(
            "SELECT part, target_rows FROM slidewin.retention_targets(%s, %s)", (max_rows, split)
        ).fetchall()
    return {int(part): int(target) for part, target in rows}


def partition_keys(conn: psycopg.Connection) -> list[int]:
    """Every partition number now (VoltDB @GetPartitionKeys)."""
    return [int(r[0]) for r in conn.execute("SELECT slidewin.partition_keys()").fetchall()]
