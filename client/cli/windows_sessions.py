"""``slidewin windows add session | remove | list | sessions | expire``: session windows per key
(a thin shell over ``db.sessions`` and ``db.session_follow``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import click

from slidewin.client.answers import sessions as answer_sessions
from slidewin.client.answers.sessions import def_json as _def_json
from slidewin.client.answers.sessions import session_json
from slidewin.client.cli.context import AppContext, emit_json, number, pass_app
from slidewin.client.cli.interrupts import stopped_by
from slidewin.client.cli.options import COUNT, DURATION, TIME, json_option
from slidewin.client.cli.root import SlidewinCommand, SlidewinGroup
from slidewin.db import session_follow, sessions
from slidewin.db.clock import utc_now
from slidewin.db.errors import ConfigError
from slidewin.db.limits import MAX_CHUNK
from slidewin.db.signals import Stop, stop_on_signals
from slidewin.db.streams import BUILTIN


@click.group("add", cls=SlidewinGroup)
def add_group() -> None:
    """Register a window definition in the store (kept by every insert from then on).

    \b
    Examples:
      slidewin windows add session visits --gap 30s --grace 5s --retention 1h
    """


@add_group.command("session", cls=SlidewinCommand)
@click.argument("name")
@click.option("--gap", type=DURATION, required=True,
              help="Inactivity gap: events at most this far apart are one session (30s).")
@click.option("--grace", type=DURATION, default="0s", show_default=True,
              help="How late an event may be and still change a session.")
@click.option("--retention", type=DURATION, default="1h", show_default=True,
              help="How long sessions are kept after they end (at least gap + grace).")
@click.option("--stream", default=BUILTIN, show_default=True,
              help="The stream whose events make the sessions: events, or one declared with "
                   "`slidewin streams add` (its key column is the session key, its time column "
                   "the event time).")
@click.option("--measure", default=None,
              help="A required bigint or integer column of the stream whose sum, min, max and "
                   "avg each session keeps [default: val for events; a declared stream's first "
                   "such measure, else none: sessions count events only].")
@json_option("One JSON object on stdout.")
@pass_app
def add_session_cmd(app: AppContext, name: str, gap: timedelta, grace: timedelta,
                    retention: timedelta, stream: str, measure: str | None,
                    as_json: bool) -> None:
    """Register session window NAME: per key, runs of events at most --gap apart (Kafka's
    session windows) of --stream. Every insert into the stream from now on -- the ingest,
    psql -- keeps its sessions in its own transaction; events that would change a closed
    session are dead-lettered as late (source session:NAME) and still stored.

    \b
    Examples:
      slidewin windows add session visits --gap 30s
      slidewin windows add session visits --gap 30s --grace 5s --retention 2h --json
      slidewin windows add session rides --gap 5m --stream trips --measure fare_cents
    """
    with app.connect() as conn:
        def_id = sessions.define(
            conn, sessions.SessionDef(name, gap, grace, retention, stream, measure))
        definition = sessions.definition(conn, name).definition  # the measure it took
    if as_json:
        emit_json({"id": def_id, **_def_json(definition)})
    else:
        click.echo(f"session window {name}: stream {definition.stream}, "
                   f"{_measure(definition)}, gap {_s(gap)}, grace {_s(grace)}, retention "
                   f"{_s(retention)}; kept from the next insert on")


@click.command("remove", cls=SlidewinCommand)
@click.argument("name")
@pass_app
def remove_cmd(app: AppContext, name: str) -> None:
    """Stop keeping window definition NAME. Its sessions leave every answer now; the retention
    job (or `slidewin windows expire`) deletes them in bounded chunks.

    \b
    Examples:
      slidewin windows remove visits
    """
    with app.connect() as conn:
        if not sessions.remove(conn, name, utc_now()):
            raise ConfigError(f"no window definition named {name!r}; see `slidewin windows "
                              "list`")
    click.echo(f"session window {name} removed; its sessions are deleted in chunks by expiry")


@click.command("list", cls=SlidewinCommand)
@json_option("One JSON object on stdout.")
@pass_app
def list_cmd(app: AppContext, as_json: bool) -> None:
    """The window definitions in force, with what each has kept: stream time, open sessions,
    merges, late events and the longest session.

    \b
    Examples:
      slidewin windows list
      slidewin windows list --json
    """
    with app.connect() as conn:
        answer = answer_sessions.definitions(conn)
    defs, stats, warnings = answer.defs, answer.stats, answer.warnings
    if as_json:
        emit_json(answer.as_json())
        return
    if not defs:
        click.echo("no window definitions; add one: slidewin windows add session NAME --gap 30s")
    for d in defs:
        x = d.definition
        click.echo(f"session {x.name}: stream {x.stream}, {_measure(x)}, gap {_s(x.gap)}, "
                   f"grace {_s(x.grace)}, retention {_s(x.retention)}; stream time "
                   f"{_hms(d.stream_ts)}")
        click.echo(f"  {sessions.stats_line(stats[x.name])}")
        click.echo(f"  {_cost_line(stats[x.name])}")
    _warn(warnings)


@click.command("sessions", cls=SlidewinCommand)
@click.argument("name", required=False)
@click.option("--key", default=None, help="One key's sessions (default: every key's, newest).")
@click.option("--from", "from_", type=TIME, default=None,
              help="Sessions ending at or after this time (ISO-8601; UTC when no zone).")
@click.option("--to", type=TIME, default=None, help="Sessions starting before this time.")
@click.option("--last", type=DURATION, default=None,
              help="Sessions of the last D of the definition's stream time (instead of "
                   "--from/--to).")
@click.option("--limit", type=COUNT, default="1000", show_default=True,
              help="At most this many sessions (every key's: those ending last).")
@click.option("--follow", is_flag=True,
              help="Keep running; print sessions as commits change them (Ctrl-C stops).")
@click.option("--emit", type=click.Choice(session_follow.EMIT_POLICIES),
              default=session_follow.UPDATE, show_default=True,
              help="With --follow: every change, with the tombstones of sessions a merge made "
                   "disappear (update), or each session once, when it closes (final).")
@json_option("One JSON object on stdout (with --follow: one JSON line per emission).")
@pass_app
def sessions_cmd(app: AppContext, name: str | None, key: str | None, from_: datetime | None,
                 to: datetime | None, last: timedelta | None, limit: int, follow: bool,
                 emit: str, as_json: bool) -> None:
    """The session windows of NAME (optional when only one is defined): key, first and last
    event, length, n, sum, min, max, avg, and whether it is final. SQL:
    SELECT * FROM slidewin.sessions('key', 'NAME').

    \b
    Examples:
      slidewin windows sessions visits --key key-000042
      slidewin windows sessions --last 10m --limit 20 --json
      slidewin windows sessions visits --follow --emit final
    """
    answer_sessions.check_request(key, from_, to, last)
    if follow and to is not None:
        raise ConfigError("--to does not go with --follow, which runs until stopped; give "
                          "--from or --last for where it starts")
    with app.connect() as conn:
        if follow:
            state = sessions.definition(conn, name)
            start, _end = answer_sessions.since(state, from_, to, last)
            _follow(conn, state.definition.name, key, emit, as_json, start)
            return
        answer = answer_sessions.session_list(conn, name, key, from_, to, last, limit)
    state, found = answer.state, answer.found
    _warn(answer.warnings)
    if as_json:
        emit_json(answer.as_json())
        return
    click.echo(f"session window {state.definition.name}: {len(found)} sessions; stream time "
               f"{_hms(state.stream_ts)}, closed up to {_hms(state.close_time)}")
    if found:
        click.echo(HEADER)
    for s in found:
        click.echo(session_line(s))


@click.command("expire", cls=SlidewinCommand)
@click.option("--chunk", type=click.IntRange(1, MAX_CHUNK), default=10_000, show_default=True,
              help="At most this many sessions per definition in this call.")
@json_option("One JSON object on stdout.")
@pass_app
def expire_cmd(app: AppContext, chunk: int, as_json: bool) -> None:
    """Delete, once, at most --chunk sessions per definition past its retention (and sessions
    of removed definitions). The retention job (`slidewin jobs run`) does this every round.

    \b
    Examples:
      slidewin windows expire --chunk 1000
    """
    with app.connect() as conn:
        deleted = sessions.expire(conn, chunk)
    if as_json:
        emit_json({"deleted": deleted, "chunk": chunk})
    else:
        click.echo(f"{deleted} sessions deleted")


COMMANDS = (add_group, remove_cmd, list_cmd, sessions_cmd, expire_cmd)

HEADER = (f"{'key':36}  {'start':26}  {'end':26}  {'length_s':>9}  {'n':>7}  {'sum':>12}  "
          f"{'min':>8}  {'max':>8}  {'avg':>12}")


def session_line(s: sessions.Session, mark: str = "") -> str:
    tail = mark or ("final" if s.final else "open")
    avg = "-" if s.avg is None else f"{float(s.avg):.3f}"
    return (f"{s.key:36}  {_us(s.start):26}  {_us(s.end):26}  {s.length.total_seconds():>9.3f}  "
            f"{s.n:>7}  {_dash(number(s.total)):>12}  {_dash(s.vmin):>8}  {_dash(s.vmax):>8}  "
            f"{avg:>12}  {tail}")


def _dash(value: object) -> str:
    """A value, or '-' where a definition without a measure has none."""
    return "-" if value is None else str(value)


def _measure(d: sessions.SessionDef) -> str:
    return f"measure {d.measure}" if d.measure else "no measure (counts events)"


def _follow(conn: Any, name: str, key: str | None, emit: str, as_json: bool,
            start: datetime | None) -> None:
    follower = session_follow.SessionFollower(name, key, emit, start=start)
    if not as_json:
        click.echo(f"following session window {name}{f' key {key}' if key else ''}, emit {emit} "
                   "(Ctrl-C stops)")
        click.echo(HEADER)
    stop = Stop()
    with stop_on_signals(stop):
        for e in session_follow.follow(conn, follower, stop.is_set):
            if as_json:
                extra = {"tombstone": True, "merged_into": e.merged_start.isoformat()} \
                    if e.tombstone and e.merged_start else {}
                body = {"key": e.session.key, "start": e.session.start.isoformat(),
                        "end": e.session.end.isoformat()} if e.tombstone \
                    else session_json(e.session)
                emit_json({"emit": e.emit, "name": name, **body, **extra})
            elif e.tombstone:
                click.echo(f"{e.session.key:36}  {_us(e.session.start):26}  "
                           f"{_us(e.session.end):26}  merged into the session starting "
                           f"{_us(e.merged_start) if e.merged_start else '-'}")
            else:
                click.echo(session_line(e.session))
    stopped_by(stop)


def _cost_line(s: sessions.SessionStats) -> str:
    per = s.events_per_session
    ratio = f" ({per:.2f} per session)" if per is not None else ""
    return (f"kept {s.events:,} events in {s.created:,} sessions{ratio}, "
            f"{s.apply_seconds:.1f} s spent")


def _warn(warnings: list[str]) -> None:
    """Warnings go to stderr, whatever -q says: they are not progress."""
    for text in warnings:
        click.echo(f"warning: {text}", err=True)


def _s(d: timedelta) -> str:
    return f"{d.total_seconds():g}s"


def _hms(t: datetime | None) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if t else "-"


def _us(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
