"""Window queries over the rollups only: bounded by seconds x partitions, never the raw table.

``now`` is required: pass the wall clock (``datetime.now(UTC)``) or ``stream_time(conn)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

import psycopg

from db.connect import procedure_errors


@dataclass(frozen=True)
class WindowSummary:
    seconds: int
    now: datetime | None
    n: int
    total: Decimal | None
    vmin: int | None
    vmax: int | None
    avg: float | None


def summary(conn: psycopg.Connection, seconds: int, now: datetime | None) -> WindowSummary:
    """count, sum, min, max and avg of the last ``seconds`` ending at ``now``'s second."""
    with procedure_errors():
        row = conn.execute(
            "SELECT n, total, vmin, vmax, avg FROM slidewin.window_summary(%s, %s)",
            (seconds, now),
        ).fetchone()
    assert row is not None
    return WindowSummary(seconds, now, int(row[0]), row[1], row[2], row[3], row[4])


def window_avg(conn: psycopg.Connection, seconds: int, now: datetime | None) -> float | None:
    return summary(conn, seconds, now).avg


def window_max(conn: psycopg.Connection, seconds: int, now: datetime | None) -> int | None:
    return summary(conn, seconds, now).vmax


def stream_time(conn: psycopg.Connection) -> datetime | None:
    """The newest second holding retained events, or None when the store is empty."""
    row = conn.execute("SELECT slidewin.stream_time()").fetchone()
    return row[0] if row else None


SQL_FOR_PSQL = """\
-- average over the last {seconds} s, relative to the wall clock
SELECT slidewin.window_avg({seconds});
-- ... relative to the newest event time (stream time)
SELECT slidewin.window_avg({seconds}, slidewin.stream_time());
-- max over the last {seconds} s
SELECT slidewin.window_max({seconds});
-- count, sum, min, max, avg at once
SELECT * FROM slidewin.window_summary({seconds});
-- the same average by hand, from the per-second rollups
SELECT sum(total) / nullif(sum(n), 0) AS avg
  FROM slidewin.rollups
 WHERE sec > date_trunc('second', now(), 'UTC') - interval '{seconds} seconds'
   AND sec <= date_trunc('second', now(), 'UTC');
"""


def sql_for_psql(seconds: int) -> str:
    """The SQL a psql user types for the same answers as ``slidewin query``."""
    return SQL_FOR_PSQL.format(seconds=int(seconds))
