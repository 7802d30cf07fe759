"""Window queries over the rollups only: bounded by seconds x partitions, never the raw table.

``now`` is required: pass the wall clock (``datetime.now(UTC)``) or ``stream_time(conn)``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

import psycopg

from slidewin.db.connect import procedure_errors
from slidewin.db.limits import check_window_events
from slidewin.db.window_rows import TIMEOUT, Rows, streamed


@dataclass(frozen=True)
class WindowSummary:
    seconds: int
    now: datetime | None
    n: int
    total: Decimal | None
    vmin: int | None
    vmax: int | None
    avg: float | None


def summary(conn: psycopg.Connection, seconds: int, now: datetime | None) -> WindowSummary:
    """count, sum, min, max and avg of the last ``seconds`` ending at ``now``'s second."""
    with procedure_errors():
        row = conn.execute(
            "SELECT n, total, vmin, vmax, avg FROM slidewin.window_summary(%s, %s)",
            (seconds, now),
        ).fetchone()
    assert row is not None
    return WindowSummary(seconds, now, int(row[0]), row[1], row[2], row[3], row[4])


def window_avg(conn: psycopg.Connection, seconds: int, now: datetime | None) -> float | None:
    return summary(conn, seconds, now).avg


def window_max(conn: psycopg.Connection, seconds: int, now: datetime | None) -> int | None:
    return summary(conn, seconds, now).vmax


def stream_time(conn: psycopg.Connection) -> datetime | None:
    """The newest second holding retained events, or None when the store is empty."""
    row = conn.execute("SELECT slidewin.stream_time()").fetchone()
    return row[0] if row else None


@dataclass(frozen=True)
class Window:
    """One time window: ``[start, end)`` for tumbling and hopping windows; for sliding windows
    both ends are inclusive seconds (``end`` is the second the window ends with)."""

    start: datetime
    end: datetime
    n: int
    total: Decimal | None
    vmin: int | Decimal | None  # Decimal for a declared stream's numeric or double measure
    vmax: int | Decimal | None
    avg: float | None
    final: bool  # no event the ingest can still accept falls in it
    partial: bool  # retention has already deleted events at or after its start


@dataclass(frozen=True)
class CountWindow:
    """One count window: ``number`` 1 is the newest ``size`` events; start/end are the oldest and
    newest event times in it."""

    number: int
    start: datetime
    end: datetime
    n: int
    total: Decimal
    vmin: int | Decimal  # Decimal for a declared stream's numeric or double measure
    vmax: int | Decimal
    avg: float


@dataclass(frozen=True)
class Completeness:
    """How complete an answer over a range is (``slidewin.window_status``)."""

    stream_time: datetime | None  # newest second holding events
    complete_up_to: datetime | None  # the watermark: windows ending at or before it are final
    retired_through: datetime | None  # windows starting at or before it are partial
    late: int  # events rejected as late whose event time lies in the range


_WINDOW_COLUMNS = "window_start, window_end, n, total, vmin, vmax, avg, final, partial"


def _windows(conn: psycopg.Connection, call: str, args: tuple[object, ...]) -> list[Window]:
    with procedure_errors():
        rows = conn.execute(f"SELECT {_WINDOW_COLUMNS} FROM slidewin.{call}", args).fetchall()
    return [Window(*row) for row in rows]


def tumbling(
    conn: psycopg.Connection, size: timedelta, start: datetime, end: datetime
) -> list[Window]:
    """Tumbling windows of ``size`` starting in ``[start, end)``, those that hold events."""
    return _windows(conn, "tumbling(%s, %s, %s)", (size, start, end))


def hopping(
    conn: psycopg.Connection, size: timedelta, advance: timedelta, start: datetime, end: datetime
) -> list[Window]:
    """Hopping windows of ``size`` every ``advance`` starting in ``[start, end)``."""
    return _windows(conn, "hopping(%s, %s, %s, %s)", (size, advance, start, end))


def sliding(
    conn: psycopg.Connection, size: timedelta, start: datetime, end: datetime
) -> list[Window]:
    """The window ``[t - size, t]`` (inclusive seconds) for each second t in ``[start, end)``
    holding events."""
    return _windows(conn, "sliding(%s, %s, %s)", (size, start, end))


def windows_at(
    conn: psycopg.Connection, size: timedelta, advance: timedelta, at: datetime
) -> list[Window]:
    """Every window of ``size`` every ``advance`` holding ``at``, oldest first (Faust's lookups;
    empty windows included with n = 0)."""
    return _windows(conn, "windows_at(%s, %s, %s)", (size, advance, at))


def current(
    conn: psycopg.Connection,
    size: timedelta,
    advance: timedelta,
    at: datetime,
    delta: timedelta = timedelta(0),
) -> Window:
    """Faust's ``current()`` (the newest window holding ``at``) or, with ``delta``, its
    ``delta(d)``: the newest window holding ``at - delta``."""
    return windows_at(conn, size, advance, at - delta)[-1]


def count_windows(
    conn: psycopg.Connection, size: int, advance: int | None = None, rows: int | None = None,
    *, key: str | None = None,
) -> list[CountWindow]:
    """Windows of ``size`` events every ``advance`` events over the newest ``rows`` events
    (defaults: tumbling, one window: the last ``size`` events); of ``key``'s events alone when
    given (bounded by its rows with the key index, ``db.key_windows.set_index``)."""
    check_window_events(size, advance, rows)
    with procedure_errors():
        found = conn.execute(
            "SELECT window_no, window_start, window_end, n, total, vmin, vmax, avg "
            "FROM slidewin.count_windows(%s, %s, %s, %s)",
            (size, advance, rows, key),
        ).fetchall()
    return [CountWindow(*row) for row in found]


SERIES_CALLS = {"tumbling": "tumbling(%s, %s, %s)", "hopping": "hopping(%s, %s, %s, %s)",
                "sliding": "sliding(%s, %s, %s)"}


def open_series(
    conn: psycopg.Connection, kind: str, size: timedelta, start: datetime, end: datetime,
    advance: timedelta | None = None, *, timeout: timedelta | None = TIMEOUT,
) -> AbstractContextManager[Rows[Window]]:
    """``tumbling``, ``hopping`` or ``sliding`` windows as ``tumbling`` / ``hopping`` /
    ``sliding`` return them, streamed through a server-side cursor (``db.window_rows``): use
    in a ``with`` block and iterate; memory stays flat however many windows there are."""
    if kind not in SERIES_CALLS:
        raise ValueError(f"window kind {kind!r}: use tumbling, hopping or sliding")
    args = (size, advance, start, end) if kind == "hopping" else (size, start, end)
    return streamed(conn, f"SELECT {_WINDOW_COLUMNS} FROM slidewin.{SERIES_CALLS[kind]}", args,
                    lambda row: Window(*row), timeout=timeout)


def open_count_windows(
    conn: psycopg.Connection, size: int, advance: int | None = None, rows: int | None = None,
    *, key: str | None = None, timeout: timedelta | None = TIMEOUT,
) -> AbstractContextManager[Rows[CountWindow]]:
    """``count_windows``, streamed through a server-side cursor (see ``open_series``)."""
    check_window_events(size, advance, rows)
    return streamed(conn, "SELECT window_no, window_start, window_end, n, total, vmin, vmax, avg "
                    "FROM slidewin.count_windows(%s, %s, %s, %s)", (size, advance, rows, key),
                    lambda row: CountWindow(*row), timeout=timeout)


def status(conn: psycopg.Connection, start: datetime, end: datetime) -> Completeness:
    """Stream time, watermark, retention cut and late events for ``[start, end)``."""
    row = conn.execute(
        "SELECT stream_time, complete_up_to, retired_through, late "
        "FROM slidewin.window_status(%s, %s)",
        (start, end),
    ).fetchone()
    assert row is not None
    return Completeness(row[0], row[1], row[2], int(row[3]))



@dataclass(frozen=True)
class CompleteSeconds:
    """The last ``seconds`` whole seconds that are complete: ``[start, end)``; ``final`` when
    they end at or before the watermark (no accepted event can change them)."""

    summary: WindowSummary
    start: datetime
    end: datetime
    final: bool


LAST_COMPLETE_SQL = (
    "SELECT least(date_trunc('second', slidewin.complete_up_to(), 'UTC'), slidewin.stream_time(),"
    " date_trunc('second', %(now)s::timestamptz, 'UTC')),"
    " date_trunc('second', slidewin.complete_up_to(), 'UTC')"
)


def last_complete(conn: psycopg.Connection, seconds: int, now: datetime) -> CompleteSeconds | None:
    """The ``seconds`` whole seconds before the last one still filling, at most up to ``now``.

    The end is the watermark when the ingest records one (those seconds are final), but never
    past the newest second holding events: that second is still being filled (a report at 12:00:05
    has no complete "current second" -- its events are not ingested yet). None on an empty store.
    """
    row = conn.execute(LAST_COMPLETE_SQL, {"now": now}).fetchone()
    if row is None or row[0] is None:
        return None
    end, watermark = row
    start = end - timedelta(seconds=seconds)
    found = summary(conn, seconds, end - timedelta(microseconds=1))
    return CompleteSeconds(found, start, end, watermark is not None and end <= watermark)


SQL_FOR_PSQL = """\
-- average over the last {seconds} s, relative to the wall clock
SELECT slidewin.window_avg({seconds});
-- ... relative to the newest event time (stream time)
SELECT slidewin.window_avg({seconds}, slidewin.stream_time());
-- max over the last {seconds} s
SELECT slidewin.window_max({seconds});
-- count, sum, min, max, avg at once
SELECT * FROM slidewin.window_summary({seconds});
-- the same average by hand, from the per-second rollups
SELECT sum(total) / nullif(sum(n), 0) AS avg
  FROM slidewin.rollups
 WHERE sec > date_trunc('second', now(), 'UTC') - interval '{seconds} seconds'
   AND sec <= date_trunc('second', now(), 'UTC');
"""


def sql_for_psql(seconds: int) -> str:
    """The SQL a psql user types for the same answers as ``slidewin query``."""
    return SQL_FOR_PSQL.format(seconds=int(seconds))
