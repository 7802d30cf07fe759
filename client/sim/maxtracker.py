"""The max tracker (VoltDB's MaxTracker): poll the window maximum, say when it changes.

Every ``interval_s`` (10 ms, as VoltDB) it looks whether the maximum over the retained window
can have changed, and if so reads it from the rollups (per-second maxima kept exact under
deletes, so no index on ``val`` is needed) and prints the first value it sees, then each change.
The max can change only when a transaction changes the rollups -- they signal it
(``db.changes``), which the tracker reads from its socket without a query -- or when the window
slides into a new second, past the old maximum. So it queries at most once per commit or second
instead of 100 times a second, and a change is still seen within one poll interval. The query
is the plain ``max(vmax)`` over the window's rollup rows -- the same window as
``slidewin.window_summary``, without its sum, count and average. An empty window prints nothing
until the first value arrives.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import psycopg

from slidewin.db.changes import RollupChanges
from slidewin.db.clock import Clock, utc_now

WINDOW_MAX_SQL = "SELECT max(vmax) FROM slidewin.rollups WHERE sec > %s AND sec <= %s"


def window_max(
    conn: psycopg.Connection | psycopg.Cursor, seconds: int, now: datetime
) -> int | None:
    """Max over the ``seconds`` whole seconds ending with ``now``'s (as window_summary).

    Given a cursor it reuses it, with a server-side prepared statement: at 100 polls a second
    that halves the client's CPU per poll."""
    end = now.replace(microsecond=0)
    cur = conn if isinstance(conn, psycopg.Cursor) else conn.cursor()
    cur.execute(WINDOW_MAX_SQL, (end - timedelta(seconds=seconds), end), prepare=True)
    row = cur.fetchone()
    return None if row is None or row[0] is None else int(row[0])


def initial_line(value: int) -> str:
    return f"The initial maximum value for the dataset has been set to {value}."


def change_line(before: int, after: int) -> str:
    return f"The maximum value for the dataset has changed from {before} to {after}."


class MaxTracker:
    """Tracks the window max; ``poll`` returns the line to print, or None when unchanged.

    ``listen=False`` queries at every poll (for a connection that cannot LISTEN, such as one
    through a transaction-pooling proxy)."""

    def __init__(
        self,
        conn: psycopg.Connection,
        window_s: int,
        clock: Clock = utc_now,
        emit: Callable[[str], None] | None = None,
        listen: bool = True,
    ) -> None:
        self.conn, self.window_s, self.clock = conn, window_s, clock
        self.cursor = conn.cursor()
        self.emit = emit
        self.signals = RollupChanges(conn) if listen else None
        self.current: int | None = None
        self.changes = 0
        self.polls = 0
        self.queries = 0
        self._queried_second: datetime | None = None
        self._stale = True

    def reopen(self, conn: psycopg.Connection) -> None:
        """Go on with a new connection (the old one died with its server); the maximum seen so
        far is kept, so the first value read afterwards prints only if it changed."""
        self.conn, self.cursor = conn, conn.cursor()
        if self.signals is not None:
            self.signals = RollupChanges(conn)
        self._stale = True

    def _must_query(self, now: datetime) -> bool:
        """A change was signalled since the last successful query (a failed one is retried at
        the next poll), or the window has moved since then."""
        if self.signals is None or self.signals.take():
            self._stale = True
        return self._stale or now.replace(microsecond=0) != self._queried_second

    def poll(self) -> str | None:
        now = self.clock()
        self.polls += 1
        if not self._must_query(now):
            return None
        value = window_max(self.cursor, self.window_s, now)
        self.queries += 1
        self._queried_second, self._stale = now.replace(microsecond=0), False
        if value is None or value == self.current:
            return None
        line = initial_line(value) if self.current is None else change_line(self.current, value)
        self.current = value
        self.changes += 1
        if self.emit is not None:
            self.emit(line)
        return line
