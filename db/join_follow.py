"""Following an interval join's results as commits write them (``slidewin joins show --follow``).

The results of an interval join are rows written in order (``seq``): pairs at once by the
streams' insert trigger, outer rows by ``slidewin.join_advance`` once final. Both signal channel
``slidewin_joins`` with the join's name at commit, so a follower LISTENs there (``db.changes``)
and reads only after a signal, never on a timer: the results written after the last ``seq`` it
read (``slidewin.join_since``), so it misses none and prints none twice.

``update`` prints each result once, as it is written. ``final`` holds a result back until it is
final (``ts < complete_up_to``: it will not change), then prints it once; the results that
become final together print in the order they were written. A follower starts with a snapshot:
the newest ``tail`` results with ``ts`` at or after ``start`` and the last ``seq`` written, read
in one repeatable-read transaction, so nothing written afterwards is missed or shown twice.
Memory: the last ``seq``, and under ``final`` the results not final yet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import psycopg
from psycopg import sql

from slidewin.db import joins
from slidewin.db.changes import JOINS_CHANNEL, RollupChanges
from slidewin.db.joins import Answer

UPDATE = "update"
FINAL = "final"
EMIT_POLICIES = (UPDATE, FINAL)
PAGE = 1000
EARLIEST = datetime.min.replace(tzinfo=UTC)
LATEST = datetime.max.replace(tzinfo=UTC)


@dataclass
class JoinFollower:
    """One followed interval join: its results with ``ts`` at or after ``start`` (None: all),
    the newest ``tail`` stored ones first."""

    name: str
    emit: str = UPDATE
    start: datetime | None = None
    tail: int = 0
    page: int = PAGE
    _after: int | None = None  # the last seq read; None before the first poll
    _pending: list[Answer] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.emit not in EMIT_POLICIES:
            raise ValueError(f"emit must be one of {EMIT_POLICIES}, got {self.emit!r}")

    def poll(self, conn: psycopg.Connection) -> list[Answer]:
        """What the policy prints now: the results written since the previous poll (under
        ``final``: the results that became final since), in the order written."""
        fresh = self._first(conn) if self._after is None else self._since(conn)
        if self.emit == UPDATE:
            return fresh
        self._pending += fresh
        cut = joins.status(conn, self.name).complete_up_to
        ready = [replace(a, final=True) for a in self._pending if cut is not None and a.ts < cut]
        self._pending = [a for a in self._pending if cut is None or a.ts >= cut]
        return sorted(ready, key=_seq)

    @property
    def held(self) -> int:
        """Results read but not printed yet (``final``: not final yet)."""
        return len(self._pending)

    def _first(self, conn: psycopg.Connection) -> list[Answer]:
        """The snapshot to start from: the newest ``tail`` results in range and the last seq."""
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            joins.get_join(conn, self.name)  # a missing join fails here, naming the fix
            row = conn.execute(sql.SQL("SELECT coalesce(max(seq), 0) FROM {}").format(
                sql.Identifier("slidewin_joins", self.name))).fetchone()
            last = int(row[0]) if row else 0
            shown = (joins.show(conn, self.name, self.start or EARLIEST, LATEST, self.tail)
                     if self.tail > 0 else [])
        self._after = last
        return sorted(shown, key=_seq)

    def _since(self, conn: psycopg.Connection) -> list[Answer]:
        out: list[Answer] = []
        while True:
            page = joins.since(conn, self.name, self._after or 0, self.page)
            if page:
                self._after = page[-1].seq
            out += [a for a in page if self.start is None or a.ts >= self.start]
            if len(page) < self.page:
                return out


def _seq(a: Answer) -> int:
    return a.seq or 0


def follow(
    conn: psycopg.Connection,
    follower: JoinFollower,
    stop: Callable[[], bool],
    wait_s: float = 0.5,
) -> Iterator[Answer]:
    """Results until ``stop()``: the snapshot first, then after each signal of the join (on
    ``conn``, autocommit). ``wait_s`` only bounds how long a stop request waits; nothing is read
    on a timeout."""
    changes = RollupChanges(conn, JOINS_CHANNEL, follower.name)
    yield from follower.poll(conn)
    while not stop():
        if changes.wait(wait_s):
            yield from follower.poll(conn)
