"""``slidewin windows``: tumbling, hopping, sliding and count windows, Faust's lookups, and
``--follow`` (a thin shell over ``client.answers.windows`` and ``db.window_follow``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import click
import psycopg

from client.answers import windows as answers
from client.answers.windows import BUILTIN, WindowSpec, named, num, reference_time, window_spec
from client.cli import windows_sessions
from client.cli.context import AppContext, emit_json, number, pass_app
from client.cli.interrupts import stopped_by
from client.cli.options import COUNT, DURATION, RELATIVE_TO, TIME, json_option
from client.cli.root import SlidewinGroup
from db import streams, window_follow, windows
from db.errors import ConfigError, ProcedureError
from db.signals import Stop, stop_on_signals


def key_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--key", default=None,
        help="The windows of this key alone, from its own events (fast with `slidewin windows "
             "key-index enable`).")(f)


def stream_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--measure", default=None,
                     help="The measure a declared stream's windows aggregate (needed when it "
                          "has more than one).")(f)
    return click.option("--stream", default=BUILTIN, show_default=True,
                        help="The stream: events (built in) or one declared with `slidewin "
                             "streams add`.")(f)


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


def _show(app: AppContext, spec: WindowSpec, opts: dict[str, Any]) -> None:
    with app.connect() as conn:
        if opts["follow"]:
            try:
                start, _end = answers.resolve_range(conn, opts["last"], opts["from_"],
                                                    opts["to"], opts["relative_to"], spec.stream)
                _follow(app, conn, spec, start, opts)
            except ProcedureError as exc:
                raise named(exc) from None
            return
        answer = answers.time_windows(conn, spec, last=opts["last"], from_=opts["from_"],
                                      to=opts["to"], relative_to=opts["relative_to"])
    if opts["as_json"]:
        emit_json(answer.as_json())
        return
    state, found = answer.state, answer.windows
    click.echo(f"{spec.kind} {_describe(spec.shown_params)}, windows in [{_hms(answer.start)}, "
               f"{_hms(answer.end)}) UTC; complete up to "
               f"{_hms(state.complete_up_to) if state.complete_up_to else '-'}; "
               f"{state.late} late events in range; {len(found)} windows")
    if found:
        click.echo(HEADER)
    for w in found:
        click.echo(window_line(w))


def _describe(params: dict[str, Any]) -> str:
    return ", ".join(f"{k.removesuffix('_s')} {v:g}s" if k.endswith("_s") else f"{k} {v}"
                     for k, v in params.items())


def _follow(
    app: AppContext,
    conn: psycopg.Connection,
    spec: WindowSpec,
    start: datetime,
    opts: dict[str, Any],
) -> None:
    relative_to, stream = opts["relative_to"], spec.stream
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
    if spec.declared:
        def watermark(c: psycopg.Connection) -> datetime | None:
            return streams.status(c, stream, start, start).complete_up_to

    follower = window_follow.Follower(spec.series, reference, start, spec.settled, opts["emit"],
                                      spec.place, watermark)
    if not opts["as_json"]:
        click.echo(f"following {spec.kind} {_describe(spec.params)} from {_hms(start)} UTC, "
                   f"emit {opts['emit']} (Ctrl-C stops)")
        click.echo(HEADER)
    stop = Stop()
    with stop_on_signals(stop):
        declared = stream if spec.declared else None
        for e in window_follow.follow(conn, follower, stop.is_set, stream=declared):
            if opts["as_json"]:
                emit_json({"emit": e.emit, "kind": spec.kind, **spec.params,
                           **answers.window_json(e.window)})
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
    _show(app, window_spec("tumbling", size, None, key, stream, measure), opts)


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
    _show(app, window_spec("hopping", size, advance, key, stream, measure), opts)


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
    _show(app, window_spec("sliding", size, None, key, stream, measure), opts)


@windows_group.command("rows")
@click.option("--size", type=COUNT, required=True, help="Events per window (10k).")
@click.option("--advance", type=COUNT, default=None,
              help="Events between window starts (default: --size, tumbling).")
@click.option("--rows", "rows_", type=COUNT, default=None,
              help="How many of the newest events the windows cover (default: --size).")
@key_option
@stream_options
@json_option("One JSON object on stdout.")
@pass_app
def rows_cmd(app: AppContext, size: int, advance: int | None, rows_: int | None,
             key: str | None, stream: str, measure: str | None, as_json: bool) -> None:
    """Count windows over the newest events in (ts, uuid) order; window 1 is the newest.

    \b
    Examples:
      slidewin windows rows --size 10000                 # the last 10,000 events
      slidewin windows rows --size 1k --rows 10k         # ten windows of 1,000
      slidewin windows rows --size 1k --advance 500 --rows 5k --json
    """
    if key is not None and not answers.declared(stream, measure):  # refused before connecting
        raise ConfigError("--key on count windows needs a declared stream (--stream NAME)")
    with app.connect() as conn:
        answer = answers.count_windows(conn, size, advance, rows_, key=key, stream=stream,
                                       measure=measure)
    if as_json:
        emit_json(answer.as_json())
        return
    found = answer.windows
    click.echo(f"count windows of {size} events every {advance or size} over the newest "
               f"{rows_ or size}: {len(found)} windows")
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
    answers.declared(stream, measure)  # a wrong --measure is refused before connecting
    with app.connect() as conn:
        answer = answers.current_windows(conn, size, advance, delta, all_, relative_to, key=key,
                                         stream=stream, measure=measure)
    if as_json:
        emit_json(answer.as_json())
        return
    for line in _current_lines(size, answer.step, answer.at, relative_to, delta, key,
                               answer.picked):
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
@json_option("One JSON object on stdout.")
@pass_app
def key_index_cmd(app: AppContext, action: str, as_json: bool) -> None:
    """The per-key access path for `--key` windows: an index on events (uuid, ts). With it a
    key's windows read only that key's events; without, every event in the range. It costs
    the ingest one more index (see `slidewin bench sessions`), so it is off until enabled.
    Enabling builds it over the stored rows once and blocks writes meanwhile.

    \b
    Examples:
      slidewin windows key-index enable
      slidewin windows key-index status --json
    """
    with app.connect() as conn:
        answer = answers.key_index(conn, {"enable": True, "disable": False}.get(action))
    if as_json:
        emit_json(answer)
    else:
        click.echo(f"key index {'on' if answer['key_index'] else 'off'}")


for _command in windows_sessions.COMMANDS:  # session windows live in the windows group
    windows_group.add_command(_command)
