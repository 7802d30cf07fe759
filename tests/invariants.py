"""Promise 1, checkable: every rollup row equals the aggregates of the raw rows still there."""

from __future__ import annotations

import psycopg

DRIFT_SQL = """
WITH truth AS (
    SELECT date_trunc('second', ts, 'UTC') AS sec, part, count(*) AS n, sum(val) AS total,
           min(val) AS vmin, max(val) AS vmax
      FROM slidewin.events GROUP BY 1, 2
), kept AS (
    SELECT sec, part, n, total, vmin, vmax FROM slidewin.rollups
)
SELECT 'missing or wrong in rollups' AS problem, * FROM (TABLE truth EXCEPT TABLE kept) a
UNION ALL
SELECT 'extra or wrong in rollups', * FROM (TABLE kept EXCEPT TABLE truth) b
ORDER BY sec, part
LIMIT 20
"""


def rollup_drift(conn: psycopg.Connection) -> list[tuple[object, ...]]:
    """Rows where rollups and raw aggregates disagree (empty when exact). Scans the raw table:
    a test oracle, never a production query."""
    return conn.execute(DRIFT_SQL).fetchall()


def assert_rollups_exact(conn: psycopg.Connection) -> None:
    drift = rollup_drift(conn)
    assert drift == [], f"rollups drifted from raw rows: {drift}"
