"""``slidewin joins``: windowed joins of two streams -- add, list, show (and
``--follow``), drop (a thin shell over ``db.joins`` and ``db.join_follow``)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any

import click
import psycopg
from psycopg.types.json import set_json_loads

from slidewin.client.cli.context import AppContext, emit_json, number, pass_app
from slidewin.client.cli.interrupts import stopped_by
from slidewin.client.cli.options import COUNT, DURATION, TIME, DurationType, json_option
from slidewin.client.cli.root import SlidewinGroup
from slidewin.db import join_follow, joins, streams
from slidewin.db.errors import ConfigError, ProcedureError
from slidewin.db.joins import Answer, Join, JoinStatus
from slidewin.db.signals import Stop, stop_on_signals
from slidewin.db.units import format_duration, parse_duration

DEFAULT_LAST = timedelta(hours=1)  # as the windows' --last
WINDOW_OPTIONS = ("--within", "--before/--after", "--rows", "--as-of")


class SpanType(DurationType):
    """``--within``, ``--before``, ``--after``, ``--grace``: a duration of 0 or more; a negative
    one is refused as such (not as "not a duration")."""

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None):
        if isinstance(value, str) and value.strip().startswith("-"):
            label = max(param.opts, key=len) if param is not None and param.opts else "duration"
            self.fail(f"{label} {value!r} must be 0 or more (e.g. 0s, 10s or 2m)", param, ctx)
        return super().convert(value, param, ctx)


class IdleType(click.ParamType):
    """``--idle``: a duration above 0, or ``never`` (an input always holds W back)."""

    name = "duration|never"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None):
        if value is None or isinstance(value, timedelta):
            return value
        if str(value).strip().lower() == "never":
            return "never"
        try:
            found = parse_duration(str(value), name="--idle")
        except ConfigError as exc:
            self.fail(f"{exc} (or never)", param, ctx)
        if found <= timedelta(0):
            self.fail(f"--idle {value!r} must be more than 0 (e.g. 1m, or never)", param, ctx)
        return found


SPAN = SpanType()
IDLE = IdleType()


@click.group("joins", cls=SlidewinGroup)
def joins_group() -> None:
    """Windowed joins of two streams (events, declared ones, or one stream with itself): each
    record of one stream with the records of the other that share its key and lie within a
    time window of it (interval joins, kept by every insert), or that are among the newest N
    before it (rows), or the version valid at its time (as-of).

    An interval join's results are rows in slidewin_joins.<name>, written in the batch's own
    transaction: a pair at once, never taken back; an outer row (--type left/right/full) once no
    pair can come any more. SQL: slidewin.join_define, join_show, join_status, join_drop.

    \b
    Examples:
      slidewin joins add orders_shipments --left orders --right shipments --on id=order_id \\
          --within 2m --grace 10s
      slidewin joins add recent --left shipments --right orders --on order_id=id --rows 3
      slidewin joins list
      slidewin joins show orders_shipments --last 10m
      slidewin joins show orders_shipments --follow --emit final
      slidewin joins drop orders_shipments --yes
    """


@joins_group.command("add")
@click.argument("name")
@click.option("--left", required=True, help="The left stream (events or a declared stream).")
@click.option("--right", required=True,
              help="The right stream (events or a declared stream; the left one: a self-join).")
@click.option("--on", "on", required=True,
              help="The key: COLUMN (the same name in both) or LEFT_COLUMN=RIGHT_COLUMN.")
@click.option("--within", type=SPAN, default=None,
              help="Interval join: right records at most this far before or after the left one "
                   "(--before and --after both this). With --as-of: a version older than the "
                   "left record's time minus this is not paired (default: any age).")
@click.option("--before", type=SPAN, default=None,
              help="Interval join: how far before the left record a right one may be "
                   "(default 0s when --after is given).")
@click.option("--after", type=SPAN, default=None,
              help="Interval join: how far after the left record a right one may be "
                   "(default 0s when --before is given).")
@click.option("--rows", "rows_", type=click.IntRange(1, 100_000), default=None,
              help="Rows join: the right records among the N newest at or before each left "
                   "record (Samza's OVER (ROWS N PRECEDING)).")
@click.option("--as-of", "as_of", is_flag=True,
              help="As-of join: each left record with the right record for its key valid at "
                   "its time (the newest at or before it). A right stream declared --table "
                   "makes each answer final once the left stream's watermark passed its record.")
@click.option("--grace", type=SPAN, default="0s", show_default=True,
              help="How far W stays behind the streams' time: records this late still pair.")
@click.option("--idle", type=IDLE, default="1m", show_default=True,
              help="An input with no batch for this long (wall clock) stops holding W back; "
                   "never: it always does. A stream with no data yet always holds it back.")
@click.option("--type", "join_type", type=click.Choice(joins.TYPES), default="inner",
              show_default=True,
              help="inner: pairs only; left/right/full: also each record of that side with no "
                   "pair, once final (rows and as-of joins: inner or left).")
@click.option("--select", "select", default=None,
              help="The columns kept, comma-separated: COL, left.COL, right.COL or STREAM.COL "
                   "(default all; each side's time, key and --on column always).")
@json_option("One JSON object on stdout: the join as defined.")
@pass_app
def add_cmd(app: AppContext, name: str, left: str, right: str, on: str,
            within: timedelta | None, before: timedelta | None, after: timedelta | None,
            rows_: int | None, as_of: bool, grace: timedelta, idle: timedelta | str,
            join_type: str, select: str | None, as_json: bool) -> None:
    """Define join NAME of two streams (events or declared; the same one twice: a self-join). An
    interval join pairs the records the streams hold already, then every insert's; rows and as-of
    joins are read when asked.

    \b
    Examples:
      slidewin joins add orders_shipments --left orders --right shipments --on id=order_id \\
          --within 2m
      slidewin joins add paid --left orders --right payments --on id --before 0s --after 10m \\
          --type left --grace 10s --select amount,payments.method
      slidewin joins add recent --left shipments --right orders --on order_id=id --rows 3
      slidewin joins add priced --left orders --right prices --on product --as-of
      slidewin joins add fresh --left orders --right readings --on site --as-of --within 10m
      slidewin joins add near --left readings --right readings --on station --within 5s
      slidewin joins add tagged --left events --right tags --on uuid=key --within 1m
    SQL: SELECT * FROM slidewin.join_define('orders_shipments', 'orders', 'shipments', 'id',
           'order_id', 'interval', 'inner', '2 min', '2 min');
    """
    kind, before, after, max_age = _window(within, before, after, rows_, as_of)
    with app.connect(autocommit=False) as conn:
        sel_left, sel_right = _select(conn, select, left, right)
        try:
            join = joins.define(
                conn, name, left=left, right=right, on=on, kind=kind, join_type=join_type,
                before=before, after=after, grace=grace,
                idle=None if idle == "never" else idle,  # type: ignore[arg-type]
                rows=rows_, select_left=sel_left, select_right=sel_right, within=max_age)
        except ProcedureError as exc:
            raise _named(exc) from None
        state = joins.status(conn, name)
    if as_json:
        emit_json({**join.as_json(), "table": _table(join), "pairs": state.pairs,
                   "left_only": state.left_only, "right_only": state.right_only})
        return
    click.echo(f"join {join.name} defined: {describe(join)}")
    if join.kind == "interval":
        cols = ", ".join([f"l_{c}" for c in join.select_left]
                         + [f"r_{c}" for c in join.select_right])
        click.echo(f"  results in {_table(join)} (seq, ts, emitted_at, {cols}), kept by every "
                   f"insert; {_results_text(state)} from the rows stored already")
        if state.waiting_for:
            click.echo(f"  {waiting_text(join, state)}: W moves, and results become final, "
                       "once both streams have had a batch")
    else:
        click.echo(f"  answers read from the streams when asked (nothing is stored): each "
                   f"{join.left} record with {_what_right(join)}")
        if join.right_table:
            click.echo(f"  {join.right} is a table: an answer is final once the watermark of "
                       f"{join.left} (less grace {format_duration(join.grace)}) passed its "
                       f"record; a {join.right} version arriving behind it is late, left out")
    click.echo(f"  read it: slidewin joins show {join.name} --last 10m")
    click.echo(f"  SQL: SELECT * FROM slidewin.join_show('{join.name}', now() - interval "
               "'10 min', now(), 20);")


@joins_group.command("list")
@json_option("One JSON object on stdout.")
@pass_app
def list_cmd(app: AppContext, as_json: bool) -> None:
    """Every join: kind, type, streams, key, window, grace, watermark W, late records and
    results written.

    \b
    Examples:
      slidewin joins list
      slidewin joins list --json
    """
    with app.connect() as conn:
        found = [(j, joins.status(conn, j.name)) for j in joins.list_joins(conn)]
    if as_json:
        emit_json({"joins": [{**j.as_json(), **_status_json(s)} for j, s in found]})
        return
    if not found:
        click.echo("no joins; define one: slidewin joins add NAME --left A --right B --on KEY "
                   "--within 1m")
        return
    rows = [("join", "kind", "type", "left", "right", "on", "window", "grace", "W",
             "late l/r", "results")]
    rows += [(j.name, j.kind, j.join_type, j.left, j.right, j.on, window_text(j),
              format_duration(j.grace),
              "waiting for " + "+".join(s.waiting_for) if s.waiting_for else _t(s.watermark),
              f"{s.late_left}/{s.late_right}",
              _results_text(s) if j.kind == "interval" else "read when asked")
             for j, s in found]
    for line in _aligned(rows):
        click.echo(line)


@joins_group.command("show")
@click.argument("name")
@click.option("--last", type=DURATION, default=None,
              help="Answers with ts in the last D, ending at the join's stream time (the newer "
                   "of its streams' newest records; now when they have none). Default 1h.")
@click.option("--from", "from_", type=TIME, default=None,
              help="The range's start (ISO-8601; UTC when no zone). Needs --to.")
@click.option("--to", type=TIME, default=None, help="The range's end (exclusive).")
@click.option("--limit", type=COUNT, default="20", show_default=True,
              help="At most this many answers, the newest (with --follow: printed first).")
@click.option("--follow", is_flag=True,
              help="Keep running; print each result as it is written (interval joins; Ctrl-C "
                   "stops).")
@click.option("--emit", type=click.Choice(join_follow.EMIT_POLICIES),
              default=join_follow.UPDATE, show_default=True,
              help="With --follow: each result once as it is written (update), or once it is "
                   "final, ts < complete_up_to (final).")
@json_option("One JSON object on stdout (with --follow: one JSON line per result).")
@pass_app
def show_cmd(app: AppContext, name: str, last: timedelta | None, from_: datetime | None,
             to: datetime | None, limit: int, follow: bool, emit: str, as_json: bool) -> None:
    """Where join NAME stands -- complete_up_to and W, late records per side, results written --
    and its newest answers: ts (the later record's time), the left record's columns, the right
    record's, and whether it is final (ts < complete_up_to: it will not change).

    \b
    Examples:
      slidewin joins show orders_shipments
      slidewin joins show orders_shipments --last 10m --limit 50
      slidewin joins show orders_shipments --from 2026-03-02T10:00Z --to 2026-03-02T11:00Z --json
      slidewin joins show orders_shipments --follow --emit final
    SQL: SELECT * FROM slidewin.join_show('orders_shipments', now() - interval '10 min', now(), 20);
    """
    if last is not None and (from_ is not None or to is not None):
        raise ConfigError("--last and --from/--to both given (use one of them)")
    if follow and to is not None:
        raise ConfigError("--to does not go with --follow, which runs until stopped (give --from "
                          "or --last for where it starts)")
    if not follow and (from_ is None) != (to is None):
        raise ConfigError("--from and --to go together (give both, or --last instead)")
    with app.connect() as conn:
        _exact_json(conn)
        join = joins.get_join(conn, name)
        state = joins.status(conn, name)
        stamps = _stamp_columns(conn, join)
        if from_ is not None and to is not None:
            start, end = from_, to
        else:
            end = _stream_end(state)
            start = from_ if from_ is not None else end - (last or DEFAULT_LAST)
        if follow:
            if join.kind != "interval":
                raise ConfigError(
                    f"--follow: join {join.name} is a {join.kind} join, read from the streams "
                    "when asked: it writes no results to follow (show it over a range instead, "
                    "or define an interval join with --within)")
            _follow(conn, join, stamps, emit, start, limit, as_json)
            return
        found = joins.show(conn, name, start, end, limit + 1)
    more = len(found) > limit
    found = sorted(found[:limit], key=_newest_first)
    if as_json:
        emit_json({"join": join.name, "kind": join.kind, "type": join.join_type,
                   "from": start.isoformat(), "to": end.isoformat(),
                   "complete_up_to": _iso(state.complete_up_to),
                   "watermark": _iso(state.watermark),
                   "late": {"left": state.late_left, "right": state.late_right},
                   "results": {"pairs": state.pairs, "left_only": state.left_only,
                               "right_only": state.right_only},
                   "waiting_for": list(state.waiting_for),
                   "rows": [answer_json(a, stamps) for a in found], "more": more})
        return
    click.echo(f"join {join.name}: {describe(join)}")
    click.echo(f"complete up to {_t(state.complete_up_to)} (W {_t(state.watermark)}); late "
               f"records: left {state.late_left}, right {state.late_right}; "
               + (f"results: {_results_text(state)}" if join.kind == "interval"
                  else "answers read when asked"))
    if state.waiting_for:
        click.echo(f"{waiting_text(join, state)}: W does not move until both streams have had a "
                   "batch, so no result is final yet")
    click.echo(f"answers with ts in [{_t(start)}, {_t(end)}) UTC, newest first: {len(found)}"
               + (f" (more: narrow the range or raise --limit {limit})" if more else ""))
    if found:
        for line in _aligned([_header(join), *(_cells(a, join, stamps) for a in found)]):
            click.echo(line)


@joins_group.command("drop")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Really drop it: its results cannot be brought back.")
@json_option("One JSON object on stdout.")
@pass_app
def drop_cmd(app: AppContext, name: str, yes: bool, as_json: bool) -> None:
    """Remove join NAME and its results; its streams and their rows stay.

    \b
    Example:
      slidewin joins drop orders_shipments --yes
    SQL: SELECT slidewin.join_drop('orders_shipments');
    """
    if not yes:
        raise ConfigError(f"joins drop {name} deletes the join and every result it holds (add "
                          "--yes to go on; its streams stay)")
    with app.connect(autocommit=False) as conn:
        held = joins.drop(conn, name)
    if as_json:
        emit_json({"dropped": name, "results": held})
    else:
        click.echo(f"join {name} dropped with its {held} results; its streams stay")


# -- what the commands share -------------------------------------------------------------------

def _window(within: timedelta | None, before: timedelta | None, after: timedelta | None,
            rows_: int | None, as_of: bool) -> tuple[str, timedelta, timedelta, timedelta | None]:
    """The kind, the interval and an as-of join's age bound from the window options: exactly
    one window is given (--as-of may take --within: how old a version may be)."""
    given = [o for o, on in zip(WINDOW_OPTIONS, (
        within is not None and not as_of, before is not None or after is not None,
        rows_ is not None, as_of), strict=True) if on]
    if len(given) > 1:
        raise ConfigError(f"{' and '.join(given)} both given: a join has one window (give "
                          "--within D, --before D --after D, --rows N or --as-of)")
    if not given:
        raise ConfigError("no window given (add --within D, e.g. --within 2m; or --before D "
                          "--after D, --rows N or --as-of)")
    zero = timedelta(0)
    if as_of:
        return "asof", zero, zero, within
    if within is not None:
        return "interval", within, within, None
    if rows_ is not None:
        return "rows", zero, zero, None
    return "interval", before or zero, after or zero, None


def _select(conn: psycopg.Connection, select: str | None, left: str,
            right: str) -> tuple[list[str] | None, list[str] | None]:
    """``--select`` as the columns kept on each side; None: every column (no --select)."""
    if select is None:
        return None, None
    names = [s.strip() for s in select.split(",") if s.strip()]
    if not names:
        raise ConfigError("--select is empty (give columns, e.g. --select amount,right.method)")
    cols = {side: {c.name for c in streams.get_stream(conn, stream, builtin=True).columns}
            for side, stream in (("left", left), ("right", right))}
    out: dict[str, list[str]] = {"left": [], "right": []}
    for text in names:
        prefix, dot, column = text.rpartition(".")
        if dot:
            # STREAM.COL of a self-join names both sides
            sides = ([s for s, stream in (("left", left), ("right", right)) if stream == prefix]
                     or ([prefix] if prefix in ("left", "right") else []))
            if not sides:
                raise ConfigError(f"--select {text}: {prefix} is neither stream (qualify with "
                                  f"left., right., {left}. or {right}.)")
            for side in sides:
                out[side].append(column)
            continue
        sides = [s for s in ("left", "right") if text in cols[s]]
        if not sides:
            raise ConfigError(
                f"--select {text}: neither {left} nor {right} has a column {text} ({left}: "
                f"{', '.join(sorted(cols['left']))}; {right}: {', '.join(sorted(cols['right']))})")
        for side in sides:
            out[side].append(text)
    return out["left"], out["right"]


_PARAM = re.compile(r"^(on|select): |^(before|after|grace|idle|rows|within) must")


def _named(exc: ProcedureError) -> ProcedureError:
    """The SQL names its parameters (``before must ...``); the user typed options (--before)."""
    text = _PARAM.sub(lambda m: f"--{m.group(0)}", str(exc))
    return ProcedureError(text.replace("an asof join", "an as-of join"))


def describe(join: Join) -> str:
    """The join as SQL would say it: its streams, type, key and window."""
    lt = join.select_left[0]
    rt = join.select_right[0]
    head = f"{join.left} {join.join_type.upper()} JOIN {join.right}"
    key = f"{join.left}.{join.left_on} = {join.right}.{join.right_on}"
    if join.kind == "interval":
        idle = "never" if join.idle is None else format_duration(join.idle)
        return (f"{head} ON {key} AND {join.right}.{rt} BETWEEN {join.left}.{lt} - "
                f"{format_duration(join.before)} AND {join.left}.{lt} + "
                f"{format_duration(join.after)} (grace {format_duration(join.grace)}, idle "
                f"{idle})")
    if join.kind == "rows":
        return f"{head} OVER (ROWS {join.rows} PRECEDING) ON {key}"
    bound = ("" if join.within is None else
             f" AND {join.right}.{rt} >= {join.left}.{lt} - {format_duration(join.within)}")
    table = f" ({join.right} a table: grace {format_duration(join.grace)})" \
        if join.right_table else ""
    return f"{head} AS OF {join.left}.{lt} ON {key}{bound}{table}"


def _what_right(join: Join) -> str:
    if join.kind == "rows":
        return (f"the {join.right} records among the {join.rows} newest at or before its time "
                f"whose {join.right_on} = its {join.left_on}")
    age = "" if join.within is None else \
        f", and at most {format_duration(join.within)} older than it"
    return (f"the {join.right} record valid at its time (the newest at or before it whose "
            f"{join.right_on} = its {join.left_on}{age})")


def window_text(join: Join) -> str:
    if join.kind == "interval":
        return f"[-{format_duration(join.before)}, +{format_duration(join.after)}]"
    if join.kind == "rows":
        return f"rows {join.rows}"
    age = "" if join.within is None else f" within {format_duration(join.within)}"
    return f"as of{age}" + (" (table)" if join.right_table else "")


def _table(join: Join) -> str | None:
    return f"slidewin_joins.{join.name}" if join.kind == "interval" else None


def _results_text(s: JoinStatus) -> str:
    return f"{s.pairs} pairs, {s.left_only} left only, {s.right_only} right only"


def waiting_text(join: Join, s: JoinStatus) -> str:
    """``waiting for first data on right (shipments)``: the streams that have never had data,
    which hold the join's W back."""
    names = {"left": join.left, "right": join.right}
    return "waiting for first data on " + " and ".join(
        f"{side} ({names[side]})" for side in s.waiting_for)


def _status_json(s: JoinStatus) -> dict[str, Any]:
    return {"watermark": _iso(s.watermark), "complete_up_to": _iso(s.complete_up_to),
            "late": {"left": s.late_left, "right": s.late_right},
            "results": {"pairs": s.pairs, "left_only": s.left_only,
                        "right_only": s.right_only},
            "waiting_for": list(s.waiting_for),
            "left_newest": _iso(s.left_newest), "right_newest": _iso(s.right_newest)}


def _stream_end(state: JoinStatus) -> datetime:
    """Where --last ends: just after the newer of the two streams' newest records (so that they
    are in range), or now when neither has one."""
    newest = [t for t in (state.left_newest, state.right_newest) if t is not None]
    return max(newest) + timedelta(microseconds=1) if newest else datetime.now(UTC)


def _exact_json(conn: psycopg.Connection) -> None:
    """Read the answers' numbers as exact decimals (a numeric(40,38) stays whole)."""
    set_json_loads(partial(json.loads, parse_float=Decimal), conn)


def _stamp_columns(conn: psycopg.Connection, join: Join) -> dict[str, set[str]]:
    """Per side, the kept columns that are times (shown in UTC, whatever the session's zone)."""
    out = {}
    for side, stream in (("l", join.left), ("r", join.right)):
        found = streams.get_stream(conn, stream, builtin=True)
        out[side] = {c.name for c in found.columns if c.type == "timestamptz"}
    return out


def _newest_first(a: Answer) -> tuple[Any, ...]:
    """join_show's order (ts, then seq, newest first), with ties between answers read at query
    time broken by their records, so the same answers always print in the same order."""
    return (-a.ts.timestamp(), -(a.seq or 0), json.dumps(a.l, sort_keys=True, default=str),
            json.dumps(a.r, sort_keys=True, default=str))


def _value(value: Any, stamp: bool) -> Any:
    if value is None:
        return None
    if stamp and isinstance(value, str):
        try:
            return datetime.fromisoformat(value).astimezone(UTC)
        except ValueError:
            return value
    return value


def answer_json(a: Answer, stamps: dict[str, set[str]]) -> dict[str, Any]:
    def side(values: dict[str, Any] | None, which: str) -> dict[str, Any] | None:
        if values is None:
            return None
        out = {}
        for k, v in values.items():
            v = _value(v, k in stamps[which])
            out[k] = (v.isoformat() if isinstance(v, datetime)
                      else number(v) if isinstance(v, Decimal) else v)
        return out

    return {"seq": a.seq, "ts": a.ts.astimezone(UTC).isoformat(),
            "emitted_at": _iso(a.emitted_at), "l": side(a.l, "l"), "r": side(a.r, "r"),
            "final": a.final}


def _header(join: Join) -> tuple[str, ...]:
    return ("ts", *(f"l.{c}" for c in join.select_left),
            *(f"r.{c}" for c in join.select_right), "final")


def _cells(a: Answer, join: Join, stamps: dict[str, set[str]]) -> tuple[str, ...]:
    def side(values: dict[str, Any] | None, cols: tuple[str, ...], which: str) -> list[str]:
        return [_cell(_value(None if values is None else values.get(c), c in stamps[which]))
                for c in cols]

    return (_t(a.ts), *side(a.l, join.select_left, "l"), *side(a.r, join.select_right, "r"),
            "final" if a.final else "open")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return _t(value)
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def _aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]


def _t(t: datetime | None) -> str:
    """A time in UTC as the tables show it: seconds, and the fraction when there is one."""
    if t is None:
        return "-"
    return t.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")


def _iso(t: datetime | None) -> str | None:
    return t.astimezone(UTC).isoformat() if t is not None else None


def _follow(conn: psycopg.Connection, join: Join, stamps: dict[str, set[str]], emit: str,
            start: datetime, tail: int, as_json: bool) -> None:
    follower = join_follow.JoinFollower(join.name, emit, start=start, tail=tail)
    header = _header(join)
    times = {"ts", *(f"l.{c}" for c in stamps["l"]), *(f"r.{c}" for c in stamps["r"])}
    # the data's widths are not known yet: a time's, or the heading's and at least 8
    widths = [19 if h in times else max(len(h), 8) for h in header]
    if not as_json:
        click.echo(f"following join {join.name} from {_t(start)} UTC, emit {emit} (Ctrl-C "
                   "stops)")
        click.echo("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
    stop = Stop()
    with stop_on_signals(stop):
        for a in join_follow.follow(conn, follower, stop.is_set):
            if as_json:
                emit_json({"emit": emit, "join": join.name, **answer_json(a, stamps)})
            else:
                cells = _cells(a, join, stamps)
                click.echo("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))
                           .rstrip())
    stopped_by(stop)
