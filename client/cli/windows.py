"""``slidewin windows``: tumbling, hopping, sliding and count windows, Faust's lookups, and
``--follow`` (a thin shell over ``db.windows`` and ``db.window_follow``)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import click
import psycopg

from slidewin.client.answers import windows as answer_windows
from slidewin.client.answers.windows import (
    BUILTIN,
    declared,
    named,
    num,
    reference_time,
    resolve_range,
    status_json,
    window_json,
)
from slidewin.client.cli import windows_sessions
from slidewin.client.cli.context import AppContext, emit_json, emit_json_items, number, pass_app
from slidewin.client.cli.interrupts import stopped_by
from slidewin.client.cli.options import COUNT, DURATION, RELATIVE_TO, TIME, json_option
from slidewin.client.cli.root import SlidewinGroup
from slidewin.db import streams, window_follow, windows
from slidewin.db.errors import ConfigError, ProcedureError, WindowTimeout
from slidewin.db.signals import Stop, stop_on_signals
from slidewin.db.window_rows import Rows

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
T = TypeVar("T")
U = TypeVar("U")
# (conn, start, end) -> the windows starting in [start, end), streamed (db.window_rows)
Opener = Callable[[psycopg.Connection, datetime, datetime],
                  AbstractContextManager[Rows[windows.Window]]]


def key_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--key", default=None,
        help="The windows of this key alone, from its own events (fast with `slidewin windows "
             "key-index enable [--stream NAME]`).")(f)


def _keyed(params: dict[str, Any], key: str | None) -> dict[str, Any]:
    return {**params, "key": key} if key is not None else params


def stream_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--measure", default=None,
                     help="The measure a declared stream's windows aggregate (needed when it "
                          "has more than one).")(f)
    return click.option("--stream", default=BUILTIN, show_default=True,
                        help="The stream: events (built in) or one declared with `slidewin "
                             "streams add`.")(f)


def _stream_series(stream: str, measure: str | None, key: str | None, kind: str,
                   size: timedelta, advance: timedelta | None = None) -> window_follow.Series:
    def series(c: psycopg.Connection, s: datetime, e: datetime) -> list[windows.Window]:
        found = streams.windows(c, stream, kind, size=size, advance=advance, start=s, end=e,
                                measure=measure, key=key)
        return [streams.as_window(w) for w in found]

    return series


@contextlib.contextmanager
def _mapped(opened: AbstractContextManager[Rows[T]], f: Callable[[T], U]) -> Iterator[Rows[U]]:
    with opened as rows:
        yield rows.map(f)


def _stream_opener(stream: str, measure: str | None, key: str | None, kind: str,
                   size: timedelta, advance: timedelta | None = None) -> Opener:
    def opener(c: psycopg.Connection, s: datetime,
               e: datetime) -> AbstractContextManager[Rows[windows.Window]]:
        return _mapped(streams.open_windows(c, stream, kind, size=size, advance=advance, start=s,
                                            end=e, measure=measure, key=key), streams.as_window)

    return opener


def range_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed([
        click.option("--last", type=DURATION, default=None,
                     help="The range: this long, ending at --relative-to (default 1h)."),
        click.option("--from", "from_", type=TIME, default=None,
                     help="The range's start (ISO-8601; UTC when no zone). Needs --to."),
        click.option("--to", type=TIME, default=None, help="The range's end (exclusive)."),
        click.option("--relative-to", type=RELATIVE_TO, default="now", show_default=True,
                     help="Where --last ends: now (wall clock), stream (newest event time) or "
                          "an ISO-8601 time (Faust's relative_to_now/_stream/_field)."),
        click.option("--follow", is_flag=True,
                     help="Keep running; print windows as commits change them (Ctrl-C stops)."),
        click.option("--emit", type=click.Choice(window_follow.EMIT_POLICIES),
                     default=window_follow.UPDATE, show_default=True,
                     help="With --follow: every change of a window (update) or each window "
                          "once, when it becomes final (final)."),
        click.option("--limit", type=COUNT, default=None,
                     help="At most this many windows: with --last, the newest (the range "
                          "begins at the limit-th window start before its end); with "
                          "--from/--to, the first (it ends after the limit-th start). Sliding: "
                          "seconds. The fix for a request over the work limit."),
        json_option("One JSON object on stdout (with --follow: one JSON line per emission)."),
    ]):
        f = option(f)
    return f


@click.group("windows", cls=SlidewinGroup)
def windows_group() -> None:
    """Windows over the exact rollups: tumbling, hopping, sliding, count windows, lookups;
    and session windows per key, registered as definitions (add, list, sessions, remove).

    Every time window says whether it is final (the ingest can no longer change it: its end is
    at or before the watermark, the newest event time minus the ingest's grace) and partial
    (retention has deleted events from it). SQL: slidewin.tumbling(...), hopping, sliding,
    count_windows, windows_at, window_status.

    \b
    Examples:
      slidewin windows tumbling --size 10s --last 1h
      slidewin windows hopping --size 1m --advance 10s --relative-to stream --json
      slidewin windows sliding --size 30s --last 5m
      slidewin windows rows --size 10000
      slidewin windows current --size 1h --advance 10m --all
      slidewin windows tumbling --size 10s --last 1m --follow --emit final
      slidewin windows add session visits --gap 30s --grace 5s
      slidewin windows sessions visits --key key-000042
    """


def _limited(start: datetime, end: datetime, step: timedelta, limit: int | None,
             newest: bool = False) -> tuple[datetime, datetime]:
    """[start, end) cut to ``limit`` starts of windows ``step`` apart, aligned to the epoch
    (sliding windows: the seconds): the first ones (the range ends after the limit-th start),
    or with ``newest`` the last ones (it begins at the limit-th start before its end) -- what
    --last asks for: the newest windows, which with --relative-to stream hold the newest
    events. Cutting from the start there gave the oldest windows of the range, often empty."""
    if limit is None:
        return start, end
    if limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    if newest:
        last = EPOCH + math.floor((end - timedelta(microseconds=1) - EPOCH) / step) * step
        return max(start, last - (limit - 1) * step), end
    steps = math.ceil((start - EPOCH) / step)
    return start, min(end, EPOCH + (steps + limit) * step)


def _hms(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _cell(value: object) -> str:
    """A table cell: an empty window has no sum, min, max or average -- "-", never "None"."""
    return "-" if value is None else str(value)


def window_line(w: windows.Window) -> str:
    avg = f"{w.avg:.3f}" if w.avg is not None else "-"
    marks = ("final" if w.final else "open") + (" partial" if w.partial else "")
    return (f"{_hms(w.start)}  {_hms(w.end)}  {w.n:>9}  {_cell(number(w.total)):>14}  "
            f"{_cell(num(w.vmin)):>8}  {_cell(num(w.vmax)):>8}  {avg:>12}  {marks}")


HEADER = (f"{'window_start':19}  {'window_end':19}  {'n':>9}  {'sum':>14}  {'min':>8}  "
          f"{'max':>8}  {'avg':>12}")


def _show(
    app: AppContext,
    kind: str,
    params: dict[str, Any],
    series: window_follow.Series,
    opener: Opener,
    step: timedelta,
    settled: timedelta,
    place: Callable[[windows.Window], datetime],
    opts: dict[str, Any],
    stream: str = streams.BUILTIN,
) -> None:
    """The windows of [start, end), or --follow. The windows stream through a server-side
    cursor straight to stdout (text or JSON): memory stays flat with their number. The
    completeness figures are read in the same snapshot as the windows."""
    with app.connect() as conn:
        try:
            start, end = resolve_range(conn, opts["last"], opts["from_"], opts["to"],
                                       opts["relative_to"], stream=stream)
            if opts["follow"]:
                if opts["limit"] is not None:
                    raise ConfigError("--limit and --follow go apart: --follow prints every "
                                      "window as it changes; use one of them")
                _follow(app, conn, kind, params, series, settled, place, start, opts, stream)
                return
            start, end = _limited(start, end, step, opts["limit"], newest=opts["from_"] is None)
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                with opener(conn, start, end) as found:
                    _print(app, kind, params, opts, stream, conn, start, end, found)
        except ProcedureError as exc:
            raise named(exc) from None
        except WindowTimeout as exc:
            raise WindowTimeout(str(named(ProcedureError(str(exc))))) from None


def _print(app: AppContext, kind: str, params: dict[str, Any], opts: dict[str, Any],
           stream: str, conn: psycopg.Connection, start: datetime, end: datetime,
           found: Rows[windows.Window]) -> None:
    if stream == BUILTIN:
        state = windows.status(conn, start, end)
    else:
        state = streams.status(conn, stream, start, end)
        params = {"stream": stream, **params}
    limit = {} if opts["limit"] is None else {"limit": opts["limit"]}
    if opts["as_json"]:
        emit_json_items({"kind": kind, **params, "from": start.isoformat(),
                         "to": end.isoformat(), "relative_to": opts["relative_to"], **limit,
                         **status_json(state)}, "windows", (window_json(w) for w in found))
        return
    count = found.count()
    click.echo(f"{kind} {_describe(params)}, windows in [{_hms(start)}, {_hms(end)}) UTC; "
               f"complete up to {_hms(state.complete_up_to) if state.complete_up_to else '-'}; "
               f"{state.late} late events in range; {count} windows{_cut(opts)}")
    if count:
        click.echo(HEADER)
    for w in found:
        click.echo(window_line(w))


def _cut(opts: dict[str, Any]) -> str:
    """What --limit kept, said where the windows are counted."""
    if opts["limit"] is None:
        return ""
    which = "first" if opts["from_"] is not None else "newest"
    return f" (--limit {opts['limit']}: the range cut to its {which} {opts['limit']} window starts)"


def _describe(params: dict[str, Any]) -> str:
    return ", ".join(f"{k.removesuffix('_s')} {v:g}s" if k.endswith("_s") else f"{k} {v}"
                     for k, v in params.items())


def _follow(
    app: AppContext,
    conn: psycopg.Connection,
    kind: str,
    params: dict[str, Any],
    series: window_follow.Series,
    settled: timedelta,
    place: Callable[[windows.Window], datetime],
    start: datetime,
    opts: dict[str, Any],
    stream: str = streams.BUILTIN,
) -> None:
    relative_to = opts["relative_to"]
    if opts["from_"] is not None:  # a fixed range: follow it up to --to
        fixed = opts["to"]

        def reference(c: psycopg.Connection) -> datetime | None:
            return fixed
    else:

        def reference(c: psycopg.Connection) -> datetime | None:
            try:
                return reference_time(c, relative_to, stream)
            except ConfigError:
                return None  # stream time before the first event: wait for one

    watermark = None
    if stream != BUILTIN:
        def watermark(c: psycopg.Connection) -> datetime | None:
            return streams.status(c, stream, start, start).complete_up_to

    follower = window_follow.Follower(series, reference, start, settled, opts["emit"], place,
                                      watermark)
    if not opts["as_json"]:
        click.echo(f"following {kind} {_describe(params)} from {_hms(start)} UTC, emit "
                   f"{opts['emit']} (Ctrl-C stops)")
        click.echo(HEADER)
    stop = Stop()
    with stop_on_signals(stop):
        followed = None if stream == BUILTIN else stream
        for e in window_follow.follow(conn, follower, stop.is_set, stream=followed):
            if opts["as_json"]:
                emit_json({"emit": e.emit, "kind": kind, **params, **window_json(e.window)})
            else:
                click.echo(window_line(e.window))
    stopped_by(stop)


@windows_group.command("tumbling")
@click.option("--size", type=DURATION, required=True, help="Window length, whole seconds (10s).")
@key_option
@stream_options
@range_options
@pass_app
def tumbling_cmd(app: AppContext, size: timedelta, key: str | None, stream: str,
                 measure: str | None, **opts: Any) -> None:
    """Tumbling windows [start, start + size), aligned to the epoch.

    \b
    Examples:
      slidewin windows tumbling --size 10s --last 1h
      slidewin windows tumbling --size 1m --from 2026-01-01T12:00 --to 2026-01-01T13:00 --json
      slidewin windows tumbling --size 10s --last 1h --key key-000042
      slidewin windows tumbling --size 1m --last 1h --stream sensors --measure temp
    """
    declared(stream, measure)  # the built-in stream's one measure
    _show(app, "tumbling", _keyed({"size_s": size.total_seconds()}, key),
          _stream_series(stream, measure, key, "tumbling", size),
          _stream_opener(stream, measure, key, "tumbling", size), size, size,
          lambda w: w.start, opts, stream)


@windows_group.command("hopping")
@click.option("--size", type=DURATION, required=True, help="Window length, whole seconds (1m).")
@click.option("--advance", type=DURATION, required=True,
              help="How far each window starts after the previous one (10s); at most --size.")
@key_option
@stream_options
@range_options
@pass_app
def hopping_cmd(app: AppContext, size: timedelta, advance: timedelta, key: str | None,
                stream: str, measure: str | None, **opts: Any) -> None:
    """Hopping windows [start, start + size), one every --advance, aligned to the epoch.

    \b
    Examples:
      slidewin windows hopping --size 1m --advance 10s --last 1h
      slidewin windows hopping --size 1m --advance 10s --follow --emit final
      slidewin windows hopping --size 1m --advance 10s --last 1h --key key-000042
      slidewin windows hopping --size 1m --advance 10s --stream sensors --measure temp
    """
    params = {"size_s": size.total_seconds(), "advance_s": advance.total_seconds()}
    declared(stream, measure)  # the built-in stream's one measure
    _show(app, "hopping", _keyed(params, key),
          _stream_series(stream, measure, key, "hopping", size, advance),
          _stream_opener(stream, measure, key, "hopping", size, advance), advance, size,
          lambda w: w.start, opts, stream)


@windows_group.command("sliding")
@click.option("--size", type=DURATION, required=True, help="Window length, whole seconds (30s).")
@key_option
@stream_options
@range_options
@pass_app
def sliding_cmd(app: AppContext, size: timedelta, key: str | None, stream: str,
                measure: str | None, **opts: Any) -> None:
    """Sliding windows: for each second t holding events, seconds t - size through t (both ends
    inclusive, Kafka's KIP-450 at a one-second grain). The range selects t.

    \b
    Examples:
      slidewin windows sliding --size 30s --last 10m
      slidewin windows sliding --size 30s --last 10m --key key-000042
      slidewin windows sliding --size 30s --last 10m --stream sensors --measure temp
    """
    second = timedelta(seconds=1)
    declared(stream, measure)  # the built-in stream's one measure
    _show(app, "sliding", _keyed({"size_s": size.total_seconds()}, key),
          _stream_series(stream, measure, key, "sliding", size),
          _stream_opener(stream, measure, key, "sliding", size), second, second,
          lambda w: w.end, opts, stream)


@windows_group.command("rows")
@click.option("--size", type=COUNT, required=True, help="Events per window (10k).")
@click.option("--advance", type=COUNT, default=None,
              help="Events between window starts (default: --size, tumbling).")
@click.option("--rows", "rows_", type=COUNT, default=None,
              help="How many of the newest events the windows cover (default: --size).")
@click.option("--limit", type=COUNT, default=None,
              help="At most this many windows, the newest: --rows is cut to what they cover. "
                   "The fix for a request over the work limit.")
@key_option
@stream_options
@json_option("One JSON object on stdout.")
@pass_app
def rows_cmd(app: AppContext, size: int, advance: int | None, rows_: int | None,
             limit: int | None, key: str | None, stream: str, measure: str | None,
             as_json: bool) -> None:
    """Count windows over the newest events in (ts, uuid) order; window 1 is the newest.

    With --key, over that key's newest events alone, read through the stream's key index
    (windows key-index enable [--stream NAME]): only its rows are read. Without it, a declared
    stream's key partition is read newest first until --rows of the key's are found; `events`
    refuses the key, naming that fix (it would read every partition: the whole table).

    \b
    Examples:
      slidewin windows rows --size 10000                 # the last 10,000 events
      slidewin windows rows --size 1k --rows 10k         # ten windows of 1,000
      slidewin windows rows --size 1k --advance 500 --rows 5k --json
      slidewin windows rows --size 1k --advance 1 --rows 1M --limit 10k
      slidewin windows rows --size 100 --key key-000042  # one key's last 100
    """
    is_declared = declared(stream, measure)
    if limit is not None:
        if limit < 1:
            raise ConfigError(f"--limit must be at least 1, got {limit}")
        rows_ = min(rows_ or size, size + (limit - 1) * (advance or size))
    with app.connect() as conn:
        try:
            with (streams.open_count_windows(conn, stream, size, advance, rows_,
                                             measure=measure, key=key)
                  if is_declared else windows.open_count_windows(conn, size, advance, rows_,
                                                              key=key)) as found:
                _print_rows(found, size, advance, rows_, limit, is_declared, stream, key,
                            as_json)
        except ProcedureError as exc:
            raise named(exc) from None
        except WindowTimeout as exc:
            raise WindowTimeout(str(named(ProcedureError(str(exc))))) from None


def _print_rows(found: Rows[windows.CountWindow], size: int, advance: int | None,
                rows_: int | None, limit: int | None, declared: bool, stream: str,
                key: str | None, as_json: bool) -> None:
    if as_json:
        emit_json_items({"kind": "rows", "size": size, "advance": advance or size,
                         "rows": rows_ or size, **({"stream": stream} if declared else {}),
                         **({} if key is None else {"key": key}),
                         **({} if limit is None else {"limit": limit})}, "windows", (
                             {"number": w.number, "start": w.start.isoformat(),
                              "end": w.end.isoformat(), "n": w.n, "sum": number(w.total),
                              "min": num(w.vmin), "max": num(w.vmax), "avg": w.avg}
                             for w in found))
        return
    click.echo(f"count windows of {size} events every {advance or size} over the newest "
               f"{rows_ or size}{'' if key is None else f' of key {key}'}: {found.count()} "
               "windows")
    for w in found:
        click.echo(f"#{w.number:<4} {_hms(w.start)}  {_hms(w.end)}  {w.n:>9}  "
                   f"{_cell(number(w.total)):>14}  {_cell(num(w.vmin)):>8}  "
                   f"{_cell(num(w.vmax)):>8}  "
                   f"{'-' if w.avg is None else format(w.avg, '.3f'):>12}")


@windows_group.command("current")
@click.option("--size", type=DURATION, required=True, help="Window length, whole seconds.")
@click.option("--advance", type=DURATION, default=None,
              help="Hopping windows' advance (default: --size, tumbling).")
@click.option("--delta", type=DURATION, default=None,
              help="Faust's delta(d): the window holding the reference time minus this.")
@click.option("--all", "all_", is_flag=True,
              help="Every window holding the time (hopping windows overlap), oldest first.")
@click.option("--relative-to", type=RELATIVE_TO, default="now", show_default=True,
              help="The reference time: now, stream (newest event time) or an ISO-8601 time.")
@key_option
@stream_options
@json_option("One JSON object on stdout.")
@pass_app
def current_cmd(app: AppContext, size: timedelta, advance: timedelta | None,
                delta: timedelta | None, all_: bool, relative_to: str, key: str | None,
                stream: str, measure: str | None, as_json: bool) -> None:
    """Faust's lookups: the window holding a time (current), delta(d) before it, or all.

    \b
    Examples:
      slidewin windows current --size 10s --relative-to stream
      slidewin windows current --size 1h --advance 10m --all
      slidewin windows current --size 10s --delta 1m --json
      slidewin windows current --size 10s --key key-000042 --relative-to stream
    """
    with app.connect() as conn:
        found = answer_windows.current_windows(conn, size, advance, delta, all_, relative_to,
                                               key=key, stream=stream, measure=measure)
    if as_json:
        emit_json(found.as_json())
        return
    for line in _current_lines(size, found.step, found.at, relative_to, delta, key,
                               found.picked):
        click.echo(line)


def _current_lines(size: timedelta, step: timedelta, at: datetime, relative_to: str,
                   delta: timedelta | None, key: str | None,
                   picked: list[windows.Window]) -> list[str]:
    """``windows current`` as text: what was asked, the windows, and "no data" said in words
    when they hold no events (an empty window has no sum, min, max or average)."""
    before = f" ({relative_to} minus {delta.total_seconds():g}s)" if delta else ""
    whose = f" for key {key}" if key is not None else ""
    lines = [f"windows of {size.total_seconds():g}s every {step.total_seconds():g}s holding "
             f"{at.astimezone(UTC).isoformat()}{before}{whose}"]
    if not picked:
        return [*lines, "no window holds that time"]
    lines += [HEADER, *(window_line(w) for w in picked)]
    if all(w.n == 0 for w in picked):
        which = "these windows" if len(picked) > 1 else "this window"
        lines.append(f"no data: no events{whose} in {which}")
    return lines


@windows_group.command("key-index")
@click.argument("action", type=click.Choice(["enable", "disable", "status"]), default="status")
@click.option("--stream", default=None, metavar="NAME",
              help="The stream: events (built in; the default) or one declared with `slidewin "
                   "streams add`. status without it: every stream.")
@json_option("One JSON object on stdout.")
@pass_app
def key_index_cmd(app: AppContext, action: str, stream: str | None, as_json: bool) -> None:
    """The per-key access path for `--key` windows: an index on the stream's table (key, time)
    with its measures -- events (uuid, ts) by default, a declared stream's with --stream. With
    it a key's windows read only that key's rows; without, every row in the range. It costs
    the ingest one more index (see `slidewin bench sessions`), so it is off until enabled.
    Enabling builds it over the stored rows once and blocks writes meanwhile; only the
    owner of the store's tables (the owner role of `slidewin db roles`) may enable or disable
    it. Dropping the stream drops its index.

    \b
    Examples:
      slidewin windows key-index enable
      slidewin windows key-index enable --stream sensors
      slidewin windows key-index status --json
    """
    with app.connect() as conn:
        doc = answer_windows.key_index(
            conn, {"enable": True, "disable": False}.get(action), stream)
    if as_json:
        emit_json(doc)
        return
    for name, on in doc.get("streams", {doc.get("stream", BUILTIN): doc["key_index"]}).items():
        click.echo(f"{name}: key index {'on' if on else 'off'}")


for _command in windows_sessions.COMMANDS:  # session windows live in the windows group
    windows_group.add_command(_command)
