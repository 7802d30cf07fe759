"""The max tracker (VoltDB's MaxTracker): poll the window maximum, say when it changes.

Every ``interval_s`` (10 ms, as VoltDB) it reads the maximum over the retained window from the
rollups (``db.windows.summary``: per-second maxima kept exact under deletes, so no index on
``val`` is needed) and prints the first value it sees, then each change. The maximum can go down
as the window slides past the old maximum -- that is a change too. An empty window prints
nothing until the first value arrives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg

from client.generator import Clock, utc_now
from db import windows


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
        self.emit = emit
        self.current: int | None = None
        self.changes = 0
        self.polls = 0

    def poll(self) -> str | None:
        value = windows.window_max(self.conn, self.window_s, self.clock())
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
