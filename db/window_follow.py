"""Following a window series as commits change it: Samza's update policies, Kafka's emit
strategies.

``update`` emits a window each time its result changes (a late event within grace included);
``final`` emits each window once, when it becomes final (``window_end <= complete_up_to``).
Driven by the rollups' change signal (``db.changes``): the series is read again only after a
commit changed the rollups, never on a timer. Memory stays bounded: windows that are final are
forgotten once emitted, and the range read starts at the oldest window that can still change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import psycopg

from slidewin.db.changes import STREAMS_CHANNEL, RollupChanges
from slidewin.db.windows import Window, status

UPDATE = "update"
FINAL = "final"
EMIT_POLICIES = (UPDATE, FINAL)

# (conn, start, end) -> the windows starting in [start, end)
Series = Callable[[psycopg.Connection, datetime, datetime], list[Window]]
# conn -> the end of the range (moves with the wall clock or the stream), None before any data
Reference = Callable[[psycopg.Connection], datetime | None]


@dataclass(frozen=True)
class Emission:
    emit: str
    window: Window


@dataclass
class Follower:
    """One followed series: ``series`` from ``start`` up to the moving ``reference``.

    ``settled`` is how far back a window ending at the watermark can start (the size; one second
    for sliding windows, whose ``end`` is their last second): windows starting before
    ``complete_up_to - settled`` are final and are not read again.
    """

    series: Series
    reference: Reference
    start: datetime
    settled: timedelta
    emit: str = UPDATE
    # where a window sits in the range ``series`` takes: its start (tumbling, hopping) or, for
    # sliding windows, its end second
    place: Callable[[Window], datetime] = lambda w: w.start
    # the watermark of the followed stream (None: the built-in stream's, slidewin.window_status)
    watermark: Callable[[psycopg.Connection], datetime | None] | None = None
    _shown: dict[datetime, tuple[object, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.emit not in EMIT_POLICIES:
            raise ValueError(f"emit must be one of {EMIT_POLICIES}, got {self.emit!r}")

    def poll(self, conn: psycopg.Connection) -> list[Emission]:
        """Read the windows that can still change; return what the policy emits now.

        The watermark is read before the windows: a batch that commits between the two reads
        can only make more windows final, so every window the follower forgets was read final
        (read after, a moved watermark would skip a window never shown as final)."""
        end = self.reference(conn)
        if end is None or end <= self.start:
            return []
        done = self._done(conn, end)
        found = self.series(conn, self.start, end)
        out = [Emission(self.emit, w) for w in found if self._emits(w)]
        self._forget(done)
        return out

    def _emits(self, w: Window) -> bool:
        if self.emit == FINAL:
            if not w.final or self.place(w) in self._shown:
                return False
            self._shown[self.place(w)] = ()
            return True
        key = (w.n, w.total, w.vmin, w.vmax)
        if self._shown.get(self.place(w)) == key:
            return False
        self._shown[self.place(w)] = key
        return True

    def _done(self, conn: psycopg.Connection, end: datetime) -> datetime | None:
        return (status(conn, self.start, end).complete_up_to if self.watermark is None
                else self.watermark(conn))

    def _forget(self, done: datetime | None) -> None:
        if done is None:
            return
        horizon = done - self.settled
        if horizon > self.start:
            self.start = horizon
            self._shown = {s: k for s, k in self._shown.items() if s >= horizon}


def follow(
    conn: psycopg.Connection,
    follower: Follower,
    stop: Callable[[], bool],
    wait_s: float = 0.5,
    stream: str | None = None,
) -> Iterator[Emission]:
    """Emissions until ``stop()``: the current state first, then after each rollup change
    (of the declared ``stream``'s rollups when given, else the built-in stream's).
    ``wait_s`` only bounds how long a stop request waits; nothing is read on a timeout."""
    changes = (RollupChanges(conn) if stream is None
               else RollupChanges(conn, STREAMS_CHANNEL, stream))
    yield from follower.poll(conn)
    while not stop():
        if changes.wait(wait_s):
            yield from follower.poll(conn)
