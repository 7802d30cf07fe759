"""Time windows of ONE key: tumbling, hopping, sliding and Faust's lookups, read from that
key's raw events (``slidewin.key_window``, ``slidewin.key_windows_at``) -- the windows of
``db.windows`` restricted to a key, with the same columns, alignment and flags.

The access path is opt-in, stream by stream (``set_index``): an index on the stream's table
(key, time) INCLUDE (its measures) -- ``slidewin.events (uuid, ts)`` for the built-in stream --
bounds a key's windows by that key's rows in the range; without it they read every row in the
range. The windows of a declared stream's key (``db.streams`` with ``key=``) take the same index
when it is there. It costs every insert one more index (``slidewin bench sessions`` reports how
much).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime, timedelta

import psycopg

from slidewin.db.connect import procedure_errors
from slidewin.db.streams import BUILTIN
from slidewin.db.streams import procedure_errors as stream_errors
from slidewin.db.window_rows import TIMEOUT, Rows, streamed
from slidewin.db.windows import Window

_COLUMNS = "window_start, window_end, n, total, vmin, vmax, avg, final, partial"


def set_index(conn: psycopg.Connection, on: bool | None, stream: str = BUILTIN) -> bool:
    """Turn ``stream``'s key index on or off (None: only look); whether it is on now. Building
    it reads the stream's table once and blocks its writes meanwhile; only the table's owner
    may. A stream that does not exist is a ProcedureError naming it."""
    with stream_errors():
        row = conn.execute("SELECT slidewin.key_index(%s, %s)", (on, stream)).fetchone()
    return bool(row and row[0])


def enable_index(conn: psycopg.Connection, stream: str = BUILTIN) -> bool:
    return set_index(conn, True, stream)


def index_status(conn: psycopg.Connection, stream: str | None = None) -> dict[str, bool]:
    """Whether each stream (or ``stream`` alone) has its key index, by name. Reads the catalog
    only (``slidewin.key_index_status``), so a read-only role may ask."""
    with stream_errors():
        rows = conn.execute("SELECT stream, key_index FROM slidewin.key_index_status(%s)",
                            (stream,)).fetchall()
    return {name: bool(on) for name, on in rows}


def _windows(conn: psycopg.Connection, call: str, args: tuple[object, ...]) -> list[Window]:
    with procedure_errors():
        rows = conn.execute(f"SELECT {_COLUMNS} FROM slidewin.{call}", args).fetchall()
    return [Window(*row) for row in rows]


def tumbling(
    conn: psycopg.Connection, key: str, size: timedelta, start: datetime, end: datetime
) -> list[Window]:
    """``key``'s tumbling windows of ``size`` starting in ``[start, end)`` that hold its events."""
    return _windows(conn, "key_window(%s, 'tumbling', %s, NULL, %s, %s)", (key, size, start, end))


def hopping(
    conn: psycopg.Connection, key: str, size: timedelta, advance: timedelta, start: datetime,
    end: datetime,
) -> list[Window]:
    """``key``'s hopping windows of ``size`` every ``advance`` starting in ``[start, end)``."""
    return _windows(conn, "key_window(%s, 'hopping', %s, %s, %s, %s)",
                    (key, size, advance, start, end))


def sliding(
    conn: psycopg.Connection, key: str, size: timedelta, start: datetime, end: datetime
) -> list[Window]:
    """``[t - size, t]`` for each second t in ``[start, end)`` holding ``key``'s events."""
    return _windows(conn, "key_window(%s, 'sliding', %s, NULL, %s, %s)", (key, size, start, end))


def open_series(
    conn: psycopg.Connection, key: str, kind: str, size: timedelta, start: datetime,
    end: datetime, advance: timedelta | None = None, *, timeout: timedelta | None = TIMEOUT,
) -> AbstractContextManager[Rows[Window]]:
    """``key``'s ``tumbling``, ``hopping`` or ``sliding`` windows streamed through a server-side
    cursor (``db.window_rows``): use in a ``with`` block and iterate."""
    if kind not in ("tumbling", "hopping", "sliding"):
        raise ValueError(f"window kind {kind!r}: use tumbling, hopping or sliding")
    return streamed(conn, f"SELECT {_COLUMNS} FROM slidewin.key_window(%s, %s, %s, %s, %s, %s)",
                    (key, kind, size, advance if kind == "hopping" else None, start, end),
                    lambda row: Window(*row), timeout=timeout)


def windows_at(
    conn: psycopg.Connection, key: str, size: timedelta, advance: timedelta, at: datetime
) -> list[Window]:
    """Every window of ``size`` every ``advance`` holding ``at``, oldest first, with ``key``'s
    aggregates (Faust's lookups; n = 0 for windows without its events)."""
    return _windows(conn, "key_windows_at(%s, %s, %s, %s)", (key, size, advance, at))


def current(
    conn: psycopg.Connection, key: str, size: timedelta, advance: timedelta, at: datetime,
    delta: timedelta = timedelta(0),
) -> Window:
    """Faust's ``current()`` for ``key`` -- or, with ``delta``, ``delta(d)``."""
    return windows_at(conn, key, size, advance, at - delta)[-1]
