"""Change signals from the rollups: LISTEN instead of polling the table.

``slidewin.rollups_add`` notifies channel ``slidewin_rollups`` with payload ``insert`` and
``rollups_subtract`` (and TRUNCATE) with ``delete`` when a second empties or loses an extreme.
PostgreSQL delivers them at commit, one per transaction and payload. A watcher that asks
"has anything changed?" every 10 ms then reads its socket -- no server round trip, no work for
the server -- and queries only after a change: the client's max tracker went from 100 queries a
second to about one per commit.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

CHANNEL = "slidewin_rollups"
STREAMS_CHANNEL = "slidewin_streams"
JOINS_CHANNEL = "slidewin_joins"  # payload: the join's name (results written, W moved)
INSERT = "insert"
DELETE = "delete"


class RollupChanges:
    """LISTENs on ``conn`` (autocommit: a LISTEN in an open transaction waits for its commit).

    ``take()`` returns the payloads that arrived since the previous call, without waiting.
    Notifications that come in while the connection runs a query are kept by psycopg and
    returned by the next ``take()``, so none is lost between a look and a query.
    """

    def __init__(self, conn: psycopg.Connection, channel: str = CHANNEL,
                 payload: str | None = None) -> None:
        """``channel``/``payload``: a declared stream's inserts notify channel
        ``slidewin_streams`` with the stream's name (``STREAMS_CHANNEL``), a join's results and
        watermark channel ``slidewin_joins`` with the join's name (``JOINS_CHANNEL``); other
        payloads are ignored."""
        if not conn.autocommit:
            raise ValueError("RollupChanges needs an autocommit connection")
        self.conn, self.channel, self.payload = conn, channel, payload
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))

    def _ours(self, n: psycopg.Notify) -> bool:
        return n.channel == self.channel and self.payload in (None, n.payload)

    def take(self) -> set[str]:
        return {n.payload for n in self.conn.notifies(timeout=0) if self._ours(n)}

    def wait(self, timeout: float) -> set[str]:
        """Block until a change arrives or ``timeout`` seconds pass; the payloads (empty on
        timeout). Followers sleep here instead of polling."""
        first = {n.payload for n in self.conn.notifies(timeout=timeout, stop_after=1)
                 if self._ours(n)}
        return first | self.take() if first else first
