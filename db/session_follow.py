"""Following session windows as commits change them: Kafka's emit strategies for sessions.

``update`` emits every session a commit wrote -- and, when a merge made sessions disappear,
their tombstones first, as Kafka does -- by version: each statement that changes a
definition's sessions stamps them with the next version, and versions become visible in order
(the definition's row is locked until commit), so remembering the last version printed misses
nothing. ``final`` emits each session once, when it closes (``end < stream time - gap -
grace``), in (end, key) order, remembering the last one printed -- its first poll prints every
session already final from ``start`` on, then each new one once (a session final once is never
changed: ``slidewin.sessions_apply``). Memory is two numbers; each poll reads at most ``limit``
rows through an index, and polls run after the change signal of the definition's stream
(``db.changes``: the rollups' for events, the stream's own for a declared one), never on a timer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

import psycopg

from slidewin.db import sessions
from slidewin.db.changes import STREAMS_CHANNEL, RollupChanges
from slidewin.db.streams import BUILTIN

UPDATE = "update"
FINAL = "final"
EMIT_POLICIES = (UPDATE, FINAL)


@dataclass(frozen=True)
class Emission:
    emit: str
    session: sessions.Session
    tombstone: bool = False
    merged_start: datetime | None = None


@dataclass
class SessionFollower:
    """One followed definition (``name`` None: the only one), optionally one key, from the
    sessions ending at or after ``start`` (None: all)."""

    name: str | None
    key: str | None = None
    emit: str = UPDATE
    limit: int = sessions.MAX_LIMIT
    start: datetime | None = None
    _version: int = 0
    _after: tuple[datetime, str] | None = None

    def __post_init__(self) -> None:
        if self.emit not in EMIT_POLICIES:
            raise ValueError(f"emit must be one of {EMIT_POLICIES}, got {self.emit!r}")
        if self.start is not None:  # keys are never empty: (start, '') comes before them all
            self._after = (self.start, "")

    def poll(self, conn: psycopg.Connection) -> list[Emission]:
        """What the policy emits since the previous poll (all of it: pages until done)."""
        out: list[Emission] = []
        while True:
            page = self._page(conn)
            out += page
            if len(page) < self.limit:
                return out

    def _page(self, conn: psycopg.Connection) -> list[Emission]:
        if self.emit == FINAL:
            found = sessions.closed(conn, self.name, self._after, self.key, self.limit)
            if found:
                self._after = (found[-1].end, found[-1].key)
            return [Emission(FINAL, s) for s in found]
        changes = sessions.changes(conn, self.name, self._version, self.key, self.limit)
        if not changes:
            return []
        top = max(c.version for c in changes)
        if len(changes) >= self.limit and any(c.version < top for c in changes):
            # a full page may end inside a version: print whole versions only, the rest next
            changes = [c for c in changes if c.version < top]
        self._version = max(c.version for c in changes)
        return [Emission(UPDATE, c.session, c.tombstone, c.merged_start) for c in changes
                if self.start is None or c.session.end >= self.start]


def follow(
    conn: psycopg.Connection,
    follower: SessionFollower,
    stop: Callable[[], bool],
    wait_s: float = 0.5,
) -> Iterator[Emission]:
    """Emissions until ``stop()``: the current state first, then after each commit that
    changed the rollups of the definition's stream (every insert does). ``wait_s`` bounds how
    long a stop request waits."""
    stream = sessions.definition(conn, follower.name).definition.stream
    changes = RollupChanges(conn) if stream == BUILTIN \
        else RollupChanges(conn, STREAMS_CHANNEL, stream)
    yield from follower.poll(conn)
    while not stop():
        if changes.wait(wait_s):
            yield from follower.poll(conn)
