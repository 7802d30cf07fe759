"""Keeping nibbled partitions compact: vacuum the ones whose dead tuples passed a threshold.

Every nibble leaves dead tuples (heap and index). The partitions carry autovacuum settings that
fire as soon as autovacuum looks (``slidewin.ensure_partitions``: no scale factor, no cost
delay), but autovacuum only visits a database every ``autovacuum_naptime`` (one minute by
default, a server-wide setting no table can change). At tens of thousands of deletes a second a
minute of garbage is several times the live window, and the nibbles' index scans have to step
over it. So the retention job, which makes the garbage, also vacuums a partition once its dead
tuples exceed ``min_dead + fraction * live`` -- the same rule as autovacuum's, checked after
every run (and every second of a long catch-up) -- on a thread of its own (BackgroundVacuum), so
rounds never wait for a vacuum.

The same pass ANALYZEs a partition that was never analyzed (or whose rows have all turned over
since): without statistics the planner takes ``part = $1`` for 0.5 % of the partition and plans
the nibble's oldest-rows query as a bitmap scan + sort of the *whole* partition instead of a
short walk of the primary key (seen: 80 ms instead of 5 ms per 2,000-row nibble on a fresh
store, for the minute until autovacuum first looks).

VACUUM of one partition costs about that partition (the retained window's share), not the whole
history; SKIP_LOCKED makes it step aside when autovacuum or another scheduler is on it.
"""

from __future__ import annotations

import threading
import time

import psycopg
from psycopg import sql

# Vacuum when dead tuples pass 2,000 + 5 % of the live rows. Each VACUUM reads the partition, so
# its total cost is about (delete rate / fraction) x per-row cost; 5 % keeps the table within a
# few percent of its live size (the benchmark's size target) at a cost the job can afford.
MIN_DEAD = 2_000
DEAD_FRACTION = 0.05

ANALYZE_MIN_ROWS = 1_000

DUE_SQL = """
SELECT c.relname,
       (s.last_analyze IS NULL AND s.last_autoanalyze IS NULL
        OR s.n_mod_since_analyze > s.n_live_tup) AND s.n_mod_since_analyze > %(analyze_min)s
  FROM pg_inherits i
  JOIN pg_class c ON c.oid = i.inhrelid
  JOIN pg_stat_user_tables s ON s.relid = c.oid
 WHERE i.inhparent = 'slidewin.events'::regclass
   AND (s.n_dead_tup > %(min_dead)s + %(fraction)s * s.n_live_tup
        OR (s.last_analyze IS NULL AND s.last_autoanalyze IS NULL
            OR s.n_mod_since_analyze > s.n_live_tup) AND s.n_mod_since_analyze > %(analyze_min)s)
 ORDER BY s.n_dead_tup DESC
"""


def partitions_due(
    conn: psycopg.Connection, *, min_dead: int = MIN_DEAD, fraction: float = DEAD_FRACTION
) -> list[tuple[str, bool]]:
    """``(partition name, analyze too?)`` for each events partition due: dead tuples past the
    threshold, or statistics missing / fully stale."""
    args = {"min_dead": min_dead, "fraction": fraction, "analyze_min": ANALYZE_MIN_ROWS}
    return [(str(r[0]), bool(r[1])) for r in conn.execute(DUE_SQL, args).fetchall()]


def vacuum_partitions(conn: psycopg.Connection, due: list[tuple[str, bool]]) -> list[str]:
    """VACUUM (and ANALYZE where asked) each partition; autocommit connection (VACUUM can't run
    in a transaction block)."""
    done = []
    for name, analyze in due:
        options = sql.SQL("ANALYZE, SKIP_LOCKED" if analyze else "SKIP_LOCKED")
        conn.execute(
            sql.SQL("VACUUM ({}) {}").format(options, sql.Identifier("slidewin", name))
        )
        done.append(name)
    return done


def vacuum_due(
    conn: psycopg.Connection, *, min_dead: int = MIN_DEAD, fraction: float = DEAD_FRACTION
) -> list[str]:
    """Vacuum (and analyze) every partition due; returns their names."""
    return vacuum_partitions(conn, partitions_due(conn, min_dead=min_dead, fraction=fraction))


class BackgroundVacuum:
    """Vacuum due partitions on a thread of its own, so retention rounds never wait for it.

    ``nudge()`` asks for a pass (cheap; passes never overlap, extra nudges while one runs are
    folded into the next); ``drain()`` returns the partitions vacuumed and the milliseconds spent
    since the last drain, for the job's run record.
    """

    def __init__(self, dsn: str, *, min_dead: int = MIN_DEAD,
                 fraction: float = DEAD_FRACTION) -> None:
        self._dsn = dsn
        self._min_dead, self._fraction = min_dead, fraction
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._done: list[str] = []
        self._ms = 0.0
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._loop, name="vacuum", daemon=True)
        self._thread.start()

    def nudge(self) -> None:
        self._wake.set()

    def drain(self) -> tuple[list[str], float]:
        with self._lock:
            done, ms = self._done, self._ms
            self._done, self._ms = [], 0.0
        return done, ms

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        conn: psycopg.Connection | None = None
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                conn = conn if conn is not None and not conn.closed else psycopg.connect(
                    self._dsn, autocommit=True)
                self._pass(conn)
            except psycopg.Error as exc:  # the next nudge retries on a new connection
                self.errors.append(str(exc).strip().splitlines()[0] if str(exc) else "error")
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()

    def _pass(self, conn: psycopg.Connection) -> None:
        began = time.monotonic()
        done = vacuum_due(conn, min_dead=self._min_dead, fraction=self._fraction)
        with self._lock:
            self._done.extend(done)
            self._ms += (time.monotonic() - began) * 1000.0
