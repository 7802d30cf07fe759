"""Declared streams: the user's own events, typed columns, measures (``procedures/streams``).

A thin, typed shell over the SQL functions, so the CLI, the ingest and a psql user share one
set of rules (names, types, measures) and one set of error messages. ``events`` is the built-in
stream and is listed here, but its shape is fixed.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from slidewin.db.connect import refusal_text
from slidewin.db.errors import ConfigError, ProcedureError
from slidewin.db.limits import check_duration, check_window_events
from slidewin.db.units import format_duration
from slidewin.db.window_rows import TIMEOUT, Rows, streamed
from slidewin.db.windows import Completeness, CountWindow
from slidewin.db.windows import Window as WindowRow

# the built-in stream's name: its row in slidewin.streams, and every command's default stream
BUILTIN = "events"

NAME_RULE = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
TYPES = ("text", "bigint", "integer", "double precision", "numeric", "boolean", "timestamptz",
         "jsonb")
NUMERIC_TYPES = ("bigint", "integer", "double precision")


_REFUSALS = (
    psycopg.errors.InvalidParameterValue, psycopg.errors.NullValueNotAllowed,
    psycopg.errors.DuplicateObject, psycopg.errors.UndefinedObject,
    psycopg.errors.DuplicateColumn, psycopg.errors.CheckViolation,
)


@contextlib.contextmanager
def procedure_errors() -> Iterator[None]:
    """A refusal of the stream functions (bad name, type or measure; a stream that exists or
    does not) as ProcedureError: one line, the fix in brackets, exit code 2."""
    try:
        yield
    except _REFUSALS as exc:
        raise ProcedureError(refusal_text(exc)) from None


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    required: bool = False

    @property
    def numeric(self) -> bool:
        """May be a measure (bigint, integer, double precision, numeric)."""
        return self.type in NUMERIC_TYPES or self.type.startswith("numeric")


@dataclass(frozen=True)
class Stream:
    name: str
    key: str
    time: str
    columns: tuple[Column, ...]
    measures: tuple[str, ...]
    keep_extra: bool = False
    partitions: int = 4
    history: timedelta | None = None
    grace: timedelta = timedelta(0)
    builtin: bool = False
    is_table: bool = False  # versioned rows by key, every version kept (no history)
    max_rows: int | None = None  # the row limit retention keeps besides the history

    @property
    def table(self) -> sql.Composed:
        """The stream's table: ``slidewin_streams.<name>`` (``slidewin.events`` for events)."""
        if self.builtin:
            return sql.SQL("slidewin.events").format()
        return sql.SQL("{}.{}").format(sql.Identifier("slidewin_streams"),
                                        sql.Identifier(self.name))

    def column(self, name: str) -> Column:
        for col in self.columns:
            if col.name == name:
                return col
        raise KeyError(name)


def _stream(row: dict[str, Any]) -> Stream:
    return Stream(
        name=row["name"], key=row["key_column"], time=row["time_column"],
        columns=tuple(
            Column(c["name"], c["type"], bool(c.get("required"))) for c in row["columns"]
        ),
        measures=tuple(row["measures"]), keep_extra=row["keep_extra"],
        partitions=row["partitions"], history=row["history"], grace=row["grace"],
        builtin=row["builtin"], is_table=row["is_table"], max_rows=row["max_rows"],
    )


_SELECT = "SELECT * FROM slidewin.streams"


def list_streams(conn: psycopg.Connection, *, declared_only: bool = False) -> list[Stream]:
    """Every stream, by name; ``declared_only`` leaves out the built-in ``events``."""
    with conn.cursor(row_factory=dict_row) as cur:
        where = " WHERE NOT builtin" if declared_only else ""
        rows = cur.execute(_SELECT + where + " ORDER BY name").fetchall()
    return [_stream(r) for r in rows]


def get_stream(conn: psycopg.Connection, name: str, *, builtin: bool = False) -> Stream:
    """A declared stream (``builtin``: or the built-in ``events``, for what reads any stream,
    a join), or StoreError naming it and how to list the streams."""
    query = "SELECT * FROM slidewin.stream_row(%s)" if builtin else \
        "SELECT * FROM slidewin.stream_get(%s)"
    with procedure_errors(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(query, (name,)).fetchone()
    assert row is not None
    return _stream(row)


def define(
    conn: psycopg.Connection, name: str, *, key: str, time: str, columns: Sequence[Column],
    measures: Sequence[str] = (), keep_extra: bool = False, partitions: int = 4,
    history: timedelta | None = None, grace: timedelta = timedelta(0), is_table: bool = False,
    max_rows: int | None = None,
) -> Stream:
    """Declare a stream and create its tables (``slidewin.stream_define``), in one transaction.
    ``is_table``: a table -- versioned rows by key, every version kept, so no ``history``.
    ``max_rows``: the row limit -- retention keeps the newest ``max_rows`` rows, besides the
    ``history`` (both hold when both are given)."""
    check_retention(history, grace, is_table=is_table, max_rows=max_rows)
    cols = json.dumps([{"name": c.name, "type": c.type, "required": c.required} for c in columns])
    with procedure_errors(), conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            "SELECT * FROM slidewin.stream_define(%s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, "
            "%s)",
            (name, key, time, cols, list(measures), keep_extra, partitions, history, grace,
             is_table, max_rows),
        ).fetchone()
    assert row is not None
    return _stream(row)


def add_column(
    conn: psycopg.Connection, name: str, column: str, type_: str, *, measure: bool = False
) -> Stream:
    """Add a nullable column (optionally a measure) without rewriting the table."""
    with procedure_errors(), conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM slidewin.stream_add_column(%s, %s, %s, %s)",
                          (name, column, type_, measure)).fetchone()
    assert row is not None
    return _stream(row)


def add_measure(conn: psycopg.Connection, name: str, column: str) -> Stream:
    """Make an existing numeric column a measure (its seconds are aggregated again)."""
    with procedure_errors(), conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM slidewin.stream_add_measure(%s, %s)",
                          (name, column)).fetchone()
    assert row is not None
    return _stream(row)


def check_retention(history: timedelta | None, grace: timedelta | None, *,
                    is_table: bool = False, max_rows: int | None = None) -> None:
    """ConfigError unless ``history`` (None: forever) is more than 0 and ``grace`` 0 or more,
    each at most db.limits.MAX_DURATION, and history is at least grace + 1 s (KIP-428:
    retention >= size + grace, and a window is at least 1 s: a shorter history would refuse
    every window of the stream); a table (``is_table``) has no history at all: it keeps every
    version, so that an as-of answer final once stays so, and no row limit either; a row limit
    (``max_rows``, None: none) is 1 or more. The SQL twin: ``slidewin.stream_check_retention``."""
    if max_rows is not None:
        if is_table:
            raise ConfigError(f"--max-rows {max_rows}: a table (--table) keeps every version, "
                              "with no retention; leave out --max-rows")
        if max_rows < 1:
            raise ConfigError(f"--max-rows must be 1 or more, got {max_rows}: a row limit of 0 "
                              "would empty the stream; give the rows to keep (--max-rows 1M) or "
                              "none for no row limit")
    if is_table and history is not None:
        raise ConfigError(
            f"--history {format_duration(history)}: a table (--table) keeps every version, with "
            "no retention; leave out --history (or give --history forever)")
    check_duration("--history", history, zero=False)
    if grace is None:
        raise ConfigError("--grace is missing; give --grace 0s or more")
    check_duration("--grace", grace)
    if history is not None and history < grace + SMALLEST_WINDOW:
        raise ConfigError(
            f"--history {format_duration(history)} is shorter than --grace "
            f"{format_duration(grace)} plus the smallest window (1s): every window of the stream "
            f"would be refused; keep --history at {format_duration(grace + SMALLEST_WINDOW)} or "
            "more, or give a shorter --grace")


SMALLEST_WINDOW = timedelta(seconds=1)  # windows are read from per-second rollups


def set_retention(
    conn: psycopg.Connection, name: str, *, history: timedelta | None, grace: timedelta | None,
    forever: bool = False, max_rows: int | None = None, no_row_limit: bool = False,
) -> Stream:
    """Change a declared stream's history (None: keep; ``forever``: keep every event), grace
    (None: keep) and row limit (None: keep; ``no_row_limit``: none), in one statement, checked
    together (``check_retention``; the streams' trigger checks again for a psql UPDATE)."""
    now = get_stream(conn, name)
    new_history = None if forever else (history if history is not None else now.history)
    new_rows = None if no_row_limit else (max_rows if max_rows is not None else now.max_rows)
    check_retention(new_history, grace if grace is not None else now.grace,
                    is_table=now.is_table, max_rows=new_rows)
    with procedure_errors(), conn.transaction():
        conn.execute(
            "UPDATE slidewin.streams SET history = CASE WHEN %(forever)s THEN NULL "
            "ELSE coalesce(%(history)s, history) END, grace = coalesce(%(grace)s, grace), "
            "max_rows = %(max_rows)s WHERE name = %(name)s",
            {"forever": forever, "history": history, "grace": grace, "max_rows": new_rows,
             "name": name})
    return get_stream(conn, name)


def drop(conn: psycopg.Connection, name: str) -> int:
    """Remove a declared stream, its rows, rollups, state and dead letters; the rows it held.
    ProcedureError naming them while a join or a session window definition reads it: each was
    defined apart from the stream, so each is taken away on its own first."""
    with procedure_errors(), conn.transaction():
        row = conn.execute("SELECT slidewin.stream_drop(%s)", (name,)).fetchone()
    return int(row[0]) if row else 0


def nibble(conn: psycopg.Connection, name: str, now: datetime, chunk: int = 10_000) -> int:
    """One bounded retention step of a declared stream -- at most ``chunk`` of its oldest rows
    past its history or its row limit; the rows deleted (0: nothing is due)."""
    with procedure_errors():
        row = conn.execute(
            "SELECT slidewin.stream_nibble(%s, %s, %s)", (name, now, chunk)
        ).fetchone()
    return int(row[0]) if row else 0


def row_count(conn: psycopg.Connection, stream: Stream) -> int:
    """Rows the stream holds, from its rollups (one row per second, not per event)."""
    table = sql.Identifier("slidewin_rollups", stream.name)
    row = conn.execute(sql.SQL("SELECT coalesce(sum(n), 0) FROM {}").format(table)).fetchone()
    return int(row[0]) if row else 0


RECENT_ROWS = 500  # the newest rows recent_keys reads, whatever the table holds

# the built-in table's identity is (part, ts, uuid): its newest rows, read part by part along
# that index, are a few index pages; "ORDER BY ts DESC" over the whole table sorts every row
_BUILTIN_NEWEST = sql.SQL(
    "SELECT e.uuid AS k, e.ts AS t FROM generate_series(0, (SELECT partitions - 1 FROM "
    "slidewin.config)) p, LATERAL (SELECT uuid, ts FROM slidewin.events WHERE part = p "
    "ORDER BY ts DESC LIMIT {n}) e")


def recent_keys(conn: psycopg.Connection, name: str, limit: int = 20) -> list[str]:
    """Up to ``limit`` distinct keys among the stream's newest rows, the newest first (as text):
    keys a person looking at the stream may pick from, read along its time index."""
    stream = get_stream(conn, name, builtin=True)
    n = sql.Literal(RECENT_ROWS)
    if stream.builtin:
        newest = _BUILTIN_NEWEST.format(n=n)
    else:
        newest = sql.SQL("SELECT {k}::text AS k, {t} AS t FROM {table} ORDER BY {t} DESC "
                         "LIMIT {n}").format(k=sql.Identifier(stream.key),
                                             t=sql.Identifier(stream.time),
                                             table=stream.table, n=n)
    query = sql.SQL("SELECT k FROM (SELECT k, t FROM ({newest}) a ORDER BY t DESC LIMIT {n}) r "
                    "GROUP BY k ORDER BY max(t) DESC, k LIMIT %s").format(newest=newest, n=n)
    return [row[0] for row in conn.execute(query, (limit,))]


@dataclass(frozen=True)
class Window:
    window_start: datetime
    window_end: datetime
    n: int
    cnt: int
    total: Decimal | None
    vmin: Decimal | None
    vmax: Decimal | None
    avg: float | None
    final: bool
    partial: bool


def windows(
    conn: psycopg.Connection, stream: str, kind: str, *, size: timedelta,
    start: datetime, end: datetime, advance: timedelta | None = None, measure: str | None = None,
    key: str | None = None,
) -> list[Window]:
    """tumbling, hopping or sliding windows over one measure of a declared stream (of one key's
    events alone with ``key``)."""
    query, args = _series_call(stream, kind, size, start, end, advance, measure, key)
    with procedure_errors(), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(f"SELECT * FROM slidewin.{query}", args).fetchall()
    return [Window(**r) for r in rows]


def _series_call(
    stream: str, kind: str, size: timedelta, start: datetime, end: datetime,
    advance: timedelta | None, measure: str | None, key: str | None,
) -> tuple[str, tuple[object, ...]]:
    if kind == "tumbling":
        return ("stream_tumbling(%s, %s, %s, %s, %s, %s)",
                (stream, measure, size, start, end, key))
    if kind == "hopping":
        return ("stream_hopping(%s, %s, %s, %s, %s, %s, %s)",
                (stream, measure, size, advance, start, end, key))
    if kind == "sliding":
        return ("stream_sliding(%s, %s, %s, %s, %s, %s)",
                (stream, measure, size, start, end, key))
    raise ValueError(f"window kind {kind!r}: use tumbling, hopping or sliding")


_WINDOW_FIELDS = ("window_start, window_end, n, cnt, total, vmin, vmax, avg, final, partial")


def open_windows(
    conn: psycopg.Connection, stream: str, kind: str, *, size: timedelta, start: datetime,
    end: datetime, advance: timedelta | None = None, measure: str | None = None,
    key: str | None = None, timeout: timedelta | None = TIMEOUT,
) -> AbstractContextManager[Rows[Window]]:
    """``windows``, streamed through a server-side cursor (``db.window_rows``): use in a
    ``with`` block and iterate; memory stays flat however many windows there are."""
    query, args = _series_call(stream, kind, size, start, end, advance, measure, key)
    return streamed(conn, f"SELECT {_WINDOW_FIELDS} FROM slidewin.{query}", args,
                    lambda row: Window(*row), timeout=timeout, refusals=_REFUSALS)


def summary(
    conn: psycopg.Connection, stream: str, start: datetime, end: datetime,
    measure: str | None = None, key: str | None = None,
) -> dict[str, Any]:
    """n, cnt, total, vmin, vmax, avg of one measure over [start, end) (of one key with
    ``key``)."""
    with procedure_errors(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM slidewin.stream_summary(%s, %s, %s, %s, %s)",
                          (stream, measure, start, end, key)).fetchone()
    assert row is not None
    return dict(row)


def status(conn: psycopg.Connection, name: str, start: datetime, end: datetime) -> Completeness:
    """Stream time, watermark, retention cut and late events in ``[start, end)`` of a declared
    stream, each as ``db.windows.status`` gives them for the built-in one: stream time is the
    newest second holding retained events (its rollups' last second), and the late events are
    those the ingest rejected -- one late only for a session window is stored, in the windows."""
    stream = get_stream(conn, name)
    query = sql.SQL(
        "SELECT (SELECT max(sec) FROM {}), "
        "(SELECT watermark FROM slidewin.stream_state WHERE stream = %(s)s), "
        "(SELECT retired_through FROM slidewin.streams WHERE name = %(s)s), "
        "(SELECT count(*) FROM slidewin.dead_letters WHERE reason = 'late' AND stream = %(s)s "
        " AND event_ts >= %(a)s AND event_ts < %(b)s AND source NOT LIKE 'session:%%')"
    ).format(sql.Identifier("slidewin_rollups", stream.name))
    row = conn.execute(query, {"s": stream.name, "a": start, "b": end}).fetchone()
    assert row is not None
    return Completeness(row[0], row[1], row[2], int(row[3]))


def as_window(w: Window) -> WindowRow:
    """A declared stream's window in the built-in stream's shape (n: the measure's values)."""
    return WindowRow(w.window_start, w.window_end, w.cnt, w.total, w.vmin, w.vmax, w.avg,
                     w.final, w.partial)


def newest_second(conn: psycopg.Connection, name: str) -> datetime | None:
    """The newest second holding events of a declared stream (its rollups' last key), however
    the rows were written."""
    stream = get_stream(conn, name)
    table = sql.Identifier("slidewin_rollups", stream.name)
    row = conn.execute(sql.SQL("SELECT max(sec) FROM {}").format(table)).fetchone()
    return row[0] if row else None


def stream_status(conn: psycopg.Connection, name: str | None = None) -> list[dict[str, Any]]:
    """Per declared stream (or the one named): rows, seconds and time range held (from its
    rollups: one row per second), watermark, retention cut, dead letters and bytes on disk."""
    found = [get_stream(conn, name)] if name else list_streams(conn, declared_only=True)
    out = []
    for s in found:
        rollups = sql.Identifier("slidewin_rollups", s.name)
        row = conn.execute(sql.SQL(
            "SELECT coalesce(sum(n), 0), count(*), min(sec), max(sec) FROM {}").format(rollups)
        ).fetchone()
        assert row is not None
        extra = conn.execute(
            "SELECT (SELECT watermark FROM slidewin.stream_state WHERE stream = %(s)s), "
            "(SELECT retired_through FROM slidewin.streams WHERE name = %(s)s), "
            "(SELECT count(*) FROM slidewin.dead_letters WHERE stream = %(s)s), "
            "(SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits "
            " WHERE inhparent = format('slidewin_streams.%%I', %(s)s::text)::regclass)",
            {"s": s.name},
        ).fetchone()
        assert extra is not None
        out.append({
            "stream": s.name, "rows": int(row[0]), "seconds": int(row[1]),
            "oldest": _iso(row[2]), "newest": _iso(row[3]), "watermark": _iso(extra[0]),
            "retired_through": _iso(extra[1]), "dead_letters": int(extra[2]),
            "bytes": int(extra[3]),
            "history_s": None if s.history is None else s.history.total_seconds(),
            "max_rows": s.max_rows,
        })
    return out


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t is not None else None


def count_windows(
    conn: psycopg.Connection, stream: str, size: int, advance: int | None = None,
    rows: int | None = None, *, measure: str | None = None, key: str | None = None,
) -> list[CountWindow]:
    """Count windows over the newest events of a declared stream (``db.windows.count_windows``
    for the built-in one); n is the measure's values."""
    check_window_events(size, advance, rows)
    with procedure_errors():
        found = conn.execute(
            "SELECT window_no, window_start, window_end, cnt, total, vmin, vmax, avg "
            "FROM slidewin.stream_count_windows(%s, %s, %s, %s, %s, %s)",
            (stream, measure, size, advance, rows, key),
        ).fetchall()
    return [CountWindow(*row) for row in found]


def open_count_windows(
    conn: psycopg.Connection, stream: str, size: int, advance: int | None = None,
    rows: int | None = None, *, measure: str | None = None, key: str | None = None,
    timeout: timedelta | None = TIMEOUT,
) -> AbstractContextManager[Rows[CountWindow]]:
    """``count_windows``, streamed through a server-side cursor (see ``open_windows``)."""
    check_window_events(size, advance, rows)
    return streamed(conn, "SELECT window_no, window_start, window_end, cnt, total, vmin, vmax, "
                    "avg FROM slidewin.stream_count_windows(%s, %s, %s, %s, %s, %s)",
                    (stream, measure, size, advance, rows, key), lambda row: CountWindow(*row),
                    timeout=timeout, refusals=_REFUSALS)


def windows_at(
    conn: psycopg.Connection, stream: str, size: timedelta, advance: timedelta, at: datetime,
    *, measure: str | None = None, key: str | None = None,
) -> list[WindowRow]:
    """Every window of ``size`` every ``advance`` holding ``at`` (Faust's lookups), oldest
    first, empty ones included with n = 0 (``slidewin.stream_windows_at``); the built-in
    ``events`` too."""
    with procedure_errors(), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute("SELECT * FROM slidewin.stream_windows_at(%s, %s, %s, %s, %s, %s)",
                           (stream, measure, size, advance, at, key)).fetchall()
    return [as_window(Window(**r)) for r in rows]
