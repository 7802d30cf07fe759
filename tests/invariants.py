"""Promise 1, checkable: every rollup row -- per second and per coarse grain (10 s, 1 min, 1 h)
-- equals the aggregates of the raw rows still there."""

from __future__ import annotations

import psycopg

DRIFT_SQL = """
WITH truth AS (
    SELECT g AS grain, slidewin.grain_floor(ts, g) AS sec, part, count(*) AS n,
           sum(val) AS total, min(val) AS vmin, max(val) AS vmax
      FROM slidewin.events CROSS JOIN unnest(ARRAY[1] || slidewin.rollup_grains()) AS g
     GROUP BY 1, 2, 3
), kept AS (
    SELECT 1 AS grain, sec, part, n, total, vmin, vmax FROM slidewin.rollups
    UNION ALL
    SELECT grain, bucket, part, n, total, vmin, vmax FROM slidewin.rollups_coarse
)
SELECT 'missing or wrong in rollups' AS problem, * FROM (TABLE truth EXCEPT TABLE kept) a
UNION ALL
SELECT 'extra or wrong in rollups', * FROM (TABLE kept EXCEPT TABLE truth) b
ORDER BY grain, sec, part
LIMIT 20
"""


def rollup_drift(conn: psycopg.Connection) -> list[tuple[object, ...]]:
    """Rows where rollups and raw aggregates disagree (empty when exact). Scans the raw table:
    a test oracle, never a production query."""
    return conn.execute(DRIFT_SQL).fetchall()


def assert_rollups_exact(conn: psycopg.Connection) -> None:
    drift = rollup_drift(conn)
    assert drift == [], f"rollups drifted from raw rows: {drift}"
