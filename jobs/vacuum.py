"""Keeping nibbled partitions compact: vacuum the ones whose dead tuples passed a threshold.

Every nibble leaves dead tuples (heap and index). The partitions carry autovacuum settings that
fire as soon as autovacuum looks (``slidewin.ensure_partitions``: no scale factor, no cost
delay), but autovacuum only visits a database every ``autovacuum_naptime`` (one minute by
default, a server-wide setting no table can change). At tens of thousands of deletes a second a
minute of garbage is several times the live window, and the nibbles' index scans have to step
over it. So the retention job, which makes the garbage, also vacuums a partition once its dead
tuples exceed ``min_dead + fraction * live`` -- the same rule as autovacuum's, checked every run.

VACUUM of one partition costs about that partition (the retained window's share), not the whole
history; SKIP_LOCKED makes it step aside when autovacuum or another scheduler is on it.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

MIN_DEAD = 2_000
DEAD_FRACTION = 0.05

DUE_SQL = """
SELECT c.relname, s.n_dead_tup, s.n_live_tup
  FROM pg_inherits i
  JOIN pg_class c ON c.oid = i.inhrelid
  JOIN pg_stat_user_tables s ON s.relid = c.oid
 WHERE i.inhparent = 'slidewin.events'::regclass
   AND s.n_dead_tup > %s + %s * s.n_live_tup
 ORDER BY s.n_dead_tup DESC
"""


def partitions_due(
    conn: psycopg.Connection, *, min_dead: int = MIN_DEAD, fraction: float = DEAD_FRACTION
) -> list[str]:
    """Names of the events partitions (in slidewin) whose dead tuples passed the threshold."""
    return [str(r[0]) for r in conn.execute(DUE_SQL, (min_dead, fraction)).fetchall()]


def vacuum_partitions(conn: psycopg.Connection, names: list[str]) -> list[str]:
    """VACUUM each named partition (autocommit connection: VACUUM can't run in a transaction)."""
    done = []
    for name in names:
        conn.execute(
            sql.SQL("VACUUM (SKIP_LOCKED) {}").format(sql.Identifier("slidewin", name))
        )
        done.append(name)
    return done


def vacuum_due(
    conn: psycopg.Connection, *, min_dead: int = MIN_DEAD, fraction: float = DEAD_FRACTION
) -> list[str]:
    """Vacuum every partition due; returns their names."""
    return vacuum_partitions(conn, partitions_due(conn, min_dead=min_dead, fraction=fraction))
