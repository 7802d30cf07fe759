"""Joins of two declared streams (``procedures/joins``): definitions are data, results are rows.

A thin, typed shell over the SQL functions, so the CLI, the ingest, the jobs and a psql user share
one set of rules and error messages. Three kinds:

- ``interval``: ``l.on = r.on AND r.time BETWEEN l.time - before AND l.time + after`` (inner,
  left, right, full), maintained by the ingest inside each batch's transaction (the streams'
  ``joins_on_insert`` trigger pairs new rows; ``slidewin.joins_advance`` writes outer rows once
  final), results in ``slidewin_joins.<name>``;
- ``rows``: each left record with the right records among the n newest at or before its time
  (Samza's ``OVER (ROWS n PRECEDING)``), read from the streams when asked;
- ``asof``: each left record with the right stream's newest record for its key at or before its
  time (and no older than its time - ``within``, when given) -- the version of that table valid
  then, not the latest one -- read when asked. When the right stream is a table
  (``streams.define(..., is_table=True)``) the join keeps a watermark W (the left stream's), an
  answer is final once W passed its left record, and a version arriving behind W is late.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from slidewin.db.limits import check_duration
from slidewin.db.streams import procedure_errors

KINDS = ("interval", "rows", "asof")
TYPES = ("inner", "left", "right", "full")
DEFAULT_IDLE = timedelta(minutes=1)


@dataclass(frozen=True)
class Join:
    name: str
    kind: str
    join_type: str
    left: str
    right: str
    left_on: str
    right_on: str
    before: timedelta
    after: timedelta
    grace: timedelta
    idle: timedelta | None
    rows: int | None
    select_left: tuple[str, ...]
    select_right: tuple[str, ...]
    watermark: datetime | None
    within: timedelta | None = None  # an as-of join's bound on a version's age (None: any)
    right_table: bool = False  # an as-of join whose right stream is a table

    @property
    def on(self) -> str:
        """The on-clause as typed: ``id`` or ``id=order_id``."""
        return self.left_on if self.left_on == self.right_on else f"{self.left_on}={self.right_on}"

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "kind": self.kind, "type": self.join_type, "left": self.left,
            "right": self.right, "on": self.on, "before_s": self.before.total_seconds(),
            "after_s": self.after.total_seconds(), "grace_s": self.grace.total_seconds(),
            "idle_s": None if self.idle is None else self.idle.total_seconds(),
            "rows": self.rows, "select_left": list(self.select_left),
            "select_right": list(self.select_right),
            "within_s": None if self.within is None else self.within.total_seconds(),
            "right_table": self.right_table,
        }


@dataclass(frozen=True)
class JoinStatus:
    name: str
    kind: str
    join_type: str
    watermark: datetime | None
    complete_up_to: datetime | None
    late_left: int
    late_right: int
    pairs: int
    left_only: int
    right_only: int
    left_newest: datetime | None
    right_newest: datetime | None

    @property
    def waiting_for(self) -> tuple[str, ...]:
        """The sides (``left``, ``right``) an interval join waits for: a stream that has never
        had data holds W back, so no result is final until both have had a batch."""
        if self.kind != "interval":
            return ()
        return tuple(side for side, newest in (("left", self.left_newest),
                                               ("right", self.right_newest)) if newest is None)


@dataclass(frozen=True)
class Answer:
    """One answer of a join: seq (the order an interval join wrote it; None when read at query
    time), ts (the later record's time; an outer row's own), l and r (the kept columns, None on
    the missing side), final (ts is before complete_up_to: it will not change)."""

    seq: int | None
    ts: datetime
    emitted_at: datetime | None
    l: dict[str, Any] | None  # noqa: E741 -- the left record, as in the SQL
    r: dict[str, Any] | None
    final: bool


def _join(row: dict[str, Any]) -> Join:
    return Join(
        name=row["name"], kind=row["kind"], join_type=row["join_type"], left=row["left_stream"],
        right=row["right_stream"], left_on=row["left_on"], right_on=row["right_on"],
        before=row["before"], after=row["after"], grace=row["grace"], idle=row["idle"],
        rows=row["n_rows"], select_left=tuple(row["select_left"]),
        select_right=tuple(row["select_right"]), watermark=row["watermark"],
        within=row["within"], right_table=row["right_table"],
    )


def parse_on(on: str) -> tuple[str, str]:
    """``id`` -> (id, id); ``id=order_id`` -> (id, order_id)."""
    left, _, right = on.partition("=")
    return left.strip(), (right.strip() or left.strip())


def define(
    conn: psycopg.Connection, name: str, *, left: str, right: str, on: str, kind: str = "interval",
    join_type: str = "inner", before: timedelta = timedelta(0), after: timedelta = timedelta(0),
    grace: timedelta = timedelta(0), idle: timedelta | None = DEFAULT_IDLE,
    rows: int | None = None, select_left: Sequence[str] | None = None,
    select_right: Sequence[str] | None = None, now: datetime | None = None,
    within: timedelta | None = None,
) -> Join:
    """Define a join (``slidewin.join_define``) in one transaction; an interval join pairs what
    the streams hold already. ``now`` is the clock of the idle rule (default: the database's).
    ``within``: an as-of join's bound -- a version older than the left record's time - within is
    not paired (None: any age). Durations are bounded first (0 .. 100 years; idle more than 0),
    as the SQL bounds them."""
    for option, value in (("--before", before), ("--after", after), ("--grace", grace),
                          ("--within", within)):
        check_duration(option, value, fix="use a shorter window")
    check_duration("--idle", idle, zero=False, fix="use a shorter --idle, or never")
    left_on, right_on = parse_on(on)
    with procedure_errors(), conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            "SELECT * FROM slidewin.join_define(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
            "%s, %s, coalesce(%s, now()), %s)",
            (name, left, right, left_on, right_on, kind, join_type, before, after, grace, idle,
             rows, None if select_left is None else list(select_left),
             None if select_right is None else list(select_right), now, within),
        ).fetchone()
    assert row is not None
    return _join(row)


def list_joins(conn: psycopg.Connection) -> list[Join]:
    """Every join, by name."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute("SELECT * FROM slidewin.joins ORDER BY name").fetchall()
    return [_join(r) for r in rows]


def get_join(conn: psycopg.Connection, name: str) -> Join:
    """A join, or ProcedureError naming it and how to list the joins."""
    with procedure_errors(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM slidewin.join_get(%s)", (name,)).fetchone()
    assert row is not None
    return _join(row)


def drop(conn: psycopg.Connection, name: str) -> int:
    """Remove a join and its results (the streams stay); the results it held."""
    with procedure_errors(), conn.transaction():
        row = conn.execute("SELECT slidewin.join_drop(%s)", (name,)).fetchone()
    return int(row[0]) if row else 0


def status(conn: psycopg.Connection, name: str) -> JoinStatus:
    """Where a join stands: W, complete_up_to, late records per side, results written."""
    with procedure_errors(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM slidewin.join_status(%s)", (name,)).fetchone()
    assert row is not None
    return JoinStatus(**row)


def show(
    conn: psycopg.Connection, name: str, start: datetime, end: datetime, limit: int | None = 100,
) -> list[Answer]:
    """The join's answers with ts in [start, end), newest first, at most ``limit``."""
    with procedure_errors(), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute("SELECT * FROM slidewin.join_show(%s, %s, %s, %s)",
                           (name, start, end, limit)).fetchall()
    return [Answer(**r) for r in rows]


def since(conn: psycopg.Connection, name: str, after_seq: int, limit: int = 1000) -> list[Answer]:
    """An interval join's results written after result ``after_seq``, in the order written."""
    with procedure_errors(), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute("SELECT * FROM slidewin.join_since(%s, %s, %s)",
                           (name, after_seq, limit)).fetchall()
    return [Answer(**r) for r in rows]


Identity = tuple[datetime | None, str | None, datetime | None, str | None]


def exact(conn: psycopg.Connection, name: str, start: datetime, end: datetime) -> list[Identity]:
    """The one-query exact answer over the records with times in [start, end) (late ones left
    out), as both sides' (time, key); what the maintained results must equal once W has passed
    every record."""
    with procedure_errors():
        rows = conn.execute("SELECT * FROM slidewin.join_exact(%s, %s, %s)",
                            (name, start, end)).fetchall()
    return [tuple(r) for r in rows]


def results(conn: psycopg.Connection, name: str) -> list[Identity]:
    """Every stored result of an interval join as both sides' (time, key) -- for checks."""
    join = get_join(conn, name)
    lt, lk = join.select_left[0], join.select_left[1]
    rt, rk = join.select_right[0], join.select_right[1]
    query = sql.SQL("SELECT {}, {}::text, {}, {}::text FROM {}").format(
        sql.Identifier(f"l_{lt}"), sql.Identifier(f"l_{lk}"), sql.Identifier(f"r_{rt}"),
        sql.Identifier(f"r_{rk}"), sql.Identifier("slidewin_joins", name))
    return [tuple(r) for r in conn.execute(query).fetchall()]


def advance(conn: psycopg.Connection, now: datetime, stream: str | None = None) -> int:
    """Move the W of every interval join and as-of join of a table (those reading ``stream``
    only, when given) and write the outer rows that became final -- the scheduler's tick; the
    joins advanced."""
    with procedure_errors():
        row = conn.execute("SELECT slidewin.joins_advance(%s, %s)", (stream, now)).fetchone()
    return int(row[0]) if row else 0


def nibble(conn: psycopg.Connection, name: str, now: datetime, chunk: int = 10_000) -> int:
    """One bounded retention step of a join's results (both inputs aged out); rows deleted."""
    with procedure_errors():
        row = conn.execute("SELECT slidewin.join_nibble(%s, %s, %s)",
                           (name, now, chunk)).fetchone()
    return int(row[0]) if row else 0
