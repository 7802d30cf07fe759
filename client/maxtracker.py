"""The max tracker (VoltDB's MaxTracker): poll the window maximum, say when it changes.

Every ``interval_s`` (10 ms, as VoltDB) it reads the maximum over the retained window from the
rollups (per-second maxima kept exact under deletes, so no index on ``val`` is needed) and prints
the first value it sees, then each change. At 100 polls a second the query is the plain
``max(vmax)`` over the window's rollup rows -- the same window as ``slidewin.window_summary``,
without its sum, count and average -- to keep the tracker's cost on the ingest small. The
maximum can go down as the window slides past the old maximum -- that is a change too. An
empty window prints nothing until the first value arrives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta

import psycopg

from client.generator import Clock, utc_now

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
    """Tracks the window max; ``poll`` returns the line to print, or None when unchanged."""

    def __init__(
        self,
        conn: psycopg.Connection,
        window_s: int,
        clock: Clock = utc_now,
        emit: Callable[[str], None] | None = None,
    ) -> None:
        self.conn, self.window_s, self.clock = conn, window_s, clock
        self.cursor = conn.cursor()
        self.emit = emit
        self.current: int | None = None
        self.changes = 0
        self.polls = 0

    def poll(self) -> str | None:
        value = window_max(self.cursor, self.window_s, self.clock())
        self.polls += 1
        if value is None or value == self.current:
            return None
        line = initial_line(value) if self.current is None else change_line(self.current, value)
        self.current = value
        self.changes += 1
        if self.emit is not None:
            self.emit(line)
        return line

    def run(
        self,
        stop: threading.Event,
        interval_s: float = 0.01,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        """Poll until ``stop`` is set (errors are counted by ``on_error``, never fatal)."""
        while not stop.wait(interval_s):
            try:
                self.poll()
            except psycopg.Error as exc:
                if on_error is None:
                    raise
                on_error(exc)
