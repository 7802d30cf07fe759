"""``slidewin client``: the VoltDB windowing client, writing into the landing directory.

Retention, standalone: like VoltDB's client, in --no-inline mode (the default) the client runs
the deletes itself -- retention rounds in a thread (``jobs.retention``) -- unless ``--deleter
jobs`` says a scheduler (``slidewin jobs run``) does it, as in ``slidewin demo``. With --inline
the ingest deletes in its own transactions (run it with ``slidewin ingest --inline``), and the
client deletes nothing. Either way the policy is recorded as retention setting 'default', where
ingest reads its horizon.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import click

from slidewin.client.cli.context import AppContext, emit_json, pass_app
from slidewin.client.cli.interrupts import interrupted
from slidewin.client.cli.options import (
    COUNT,
    DURATION,
    DURATION_MS,
    json_option,
    reconnect_timeout_option,
)
from slidewin.client.cli.root import SlidewinCommand
from slidewin.client.sim.config import DELETERS, ClientConfig
from slidewin.client.sim.generator import FORMATS
from slidewin.client.sim.live import Display, NullDisplay, make_display
from slidewin.client.sim.matched import MatchConfig, check_match, match_line
from slidewin.client.sim.session import ClientSession
from slidewin.client.sim.summary import Summary, format_summary
from slidewin.client.sim.typed_generator import DEFAULT_KEYS
from slidewin.client.sim.typed_session import (
    StreamClientConfig,
    StreamSession,
    StreamSummary,
    format_stream_summary,
)
from slidewin.db import streams
from slidewin.db.errors import ConfigError
from slidewin.db.limits import MAX_CHUNK
from slidewin.db.retention_settings import DEFAULT_NAME, read_settings
from slidewin.db.schema import require_schema
from slidewin.db.signals import Stop, stop_on_signals

_OPTIONS: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
    click.option("--displayinterval", type=DURATION, default="5", show_default=True,
                 help="Seconds between reports (e.g. 5, 2.5s)."),
    click.option("--duration", type=DURATION, default="120", show_default=True,
                 help="How long to generate events, in seconds (e.g. 120, 2m)."),
    click.option("--warmup", type=DURATION, default="5", show_default=True,
                 help="Seconds at the start left out of the final statistics."),
    click.option("--ratelimit", type=COUNT, default="15000", show_default=True,
                 help="Events per second to write (e.g. 15000, 50k)."),
    click.option("--maxrows", type=COUNT, default="0", show_default=True,
                 help="Keep at most this many rows in the store (0: no row limit)."),
    click.option("--historyseconds", type=DURATION, default="30", show_default=True,
                 help="Keep rows younger than this many seconds (0: no age limit). "
                 "Both limits may be set: both hold."),
    click.option("--inline/--no-inline", default=False, show_default=True,
                 help="Delete in the ingest's own transactions instead of a separate deleter."),
    click.option("--deletechunksize", type=click.IntRange(1, MAX_CHUNK), default=100,
                 show_default=True, help="At most this many rows per delete, per partition."),
    click.option("--deleteyieldtime", type=DURATION_MS, default="100", show_default=True,
                 help="Pause after a delete round that found little to do (ms; e.g. 100, 1s)."),
    click.option("--maxinterval", type=DURATION_MS, default="10", show_default=True,
                 help="How often the max tracker looks for a change of the window maximum "
                      "(ms; VoltDB: 10); it queries only after a commit or a new second."),
    click.option("--seed", type=int, default=None,
                 help="Seed for the random events (default: a fresh one each run)."),
    click.option("--landing", type=click.Path(file_okay=False, path_type=Path), default=None,
                 help="Directory the events are written to (default: <data dir>/landing)."),
    click.option("--format", "fmt", type=click.Choice(FORMATS), default="csv",
                 show_default=True, help="File format of the events."),
    click.option("--keys", type=COUNT, default=None, metavar="N",
                 help="Draw keys from a pool of this many, each active in bursts and pauses so "
                      "session windows form (0, the client's default: a fresh uuid per event, "
                      "as VoltDB's)."),
    click.option("--burst", type=DURATION, default="5s", show_default=True,
                 help="With --keys: a key's mean burst of activity (each key within +-50%)."),
    click.option("--pause", type=DURATION, default="20s", show_default=True,
                 help="With --keys: a key's mean pause between bursts (each within +-50%)."),
    reconnect_timeout_option(),
    click.option("--view", type=click.Choice(["auto", "live", "plain"]), default="auto",
                 show_default=True, help="Live view on a terminal (auto), or plain lines."),
    json_option("Print only the final summary, as one JSON object, on stdout; the reports "
                "and the summary's text go to stderr (-q: nowhere)."),
]


def client_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The client's options, shared with ``slidewin demo``."""
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


RETENTION_OPTIONS = ("maxrows", "historyseconds", "deletechunksize", "deleteyieldtime")


def gave_retention_options() -> bool:
    """Did the command line set a retention option (rather than leave its default)?"""
    ctx = click.get_current_context()
    return any(ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
               for name in RETENTION_OPTIONS)


def build_config(app: AppContext, landing: Path | None, deleter: str, **opts: Any) -> ClientConfig:
    """ClientConfig from parsed options (durations arrive as timedelta)."""
    secs: dict[str, Any] = {
        k: v.total_seconds() if isinstance(v, timedelta) else v for k, v in opts.items()
    }
    return ClientConfig(
        landing=Path(landing) if landing else app.data_dir / "landing",
        displayinterval=secs["displayinterval"],
        duration=secs["duration"],
        warmup=secs["warmup"],
        ratelimit=secs["ratelimit"],
        maxrows=secs["maxrows"],
        historyseconds=secs["historyseconds"],
        inline=secs["inline"],
        deletechunksize=secs["deletechunksize"],
        deleteyieldtime_ms=secs["deleteyieldtime"] * 1000,
        maxinterval_ms=secs["maxinterval"] * 1000,
        seed=secs["seed"],
        fmt=secs["fmt"],
        deleter=deleter,
        reconnect_timeout=secs["reconnect_timeout"],
        keys=secs["keys"],
        burst=secs["burst"],
        pause=secs["pause"],
    )


def run_client(
    config: ClientConfig, dsn: str, view: str, stop: threading.Event, drain_s: float = 10.0,
    app: AppContext | None = None, as_json: bool = False,
    extra_report: Callable[[], list[str]] | None = None,
) -> Summary:
    """Run one client session to the end; print the summary lines; return the summary.
    With ``app``, a failure's --json line carries the session's totals so far;
    ``extra_report`` adds lines to every report (``slidewin demo``'s second stream)."""
    out = report_stream(as_json, app is not None and app.quiet)
    display = client_display(view, out)
    try:
        session = ClientSession(config, dsn, display, drain_s=drain_s,
                                extra_report=extra_report)
        if app is not None:
            app.error_totals = partial(totals_so_far, session)
        summary = session.run(stop)
    finally:
        display.close()
    if out is not None:
        for line in format_summary(summary):
            click.echo(line, file=out)
    return summary


def report_stream(as_json: bool, quiet: bool) -> TextIO | None:
    """Where the reports and the summary's text go: stdout; with --json stderr, as stdout
    then holds only the JSON object; with --json -q nowhere (None)."""
    if not as_json:
        return sys.stdout
    return None if quiet else sys.stderr


def client_display(view: str, out: TextIO | None) -> Display:
    if out is None:
        return NullDisplay()
    return make_display(None if view == "auto" else view == "live", out)


def totals_so_far(session: ClientSession) -> dict[str, Any]:
    """What a session counted before it failed (no database needed to read it)."""
    store = session.reporter.watch.totals if session.reporter is not None else None
    return {
        "written": session.generator.stats.events,
        "ingested": store.ingested if store is not None else 0,
        "rejected": store.rejected if store is not None else 0,
        "failures": session.failures.count,
    }


# options of the built-in stream's retention and max tracker: a declared stream keeps its own
# history (applied by `slidewin jobs run`), so they are refused with --stream NAME
EVENTS_ONLY = ("maxrows", "inline", "deletechunksize", "deleteyieldtime", "maxinterval", "deleter")
STREAM_RATE = 1000.0  # a declared stream's default --ratelimit (its ingest parses in Python)


def given(name: str) -> bool:
    """Did the command line set this option (rather than leave its default)?"""
    ctx = click.get_current_context()
    return ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE


def refuse_events_only(stream: str, opts: dict[str, Any]) -> None:
    """One line naming the first option only ``events`` has, given with --stream NAME."""
    for name in EVENTS_ONLY:
        if given(name):
            flag = ("--inline" if opts.get("inline") else "--no-inline") if name == "inline" \
                else f"--{name}"
            raise ConfigError(
                f"{flag} applies only to the built-in stream events; stream {stream} keeps its "
                f"own history, applied by `slidewin jobs run` (change it with `slidewin streams "
                f"alter {stream} --history ...`): leave {flag} out")


def stream_config(app: AppContext, stream: str, landing: Path | None,
                  match: MatchConfig | None = None, **opts: Any) -> StreamClientConfig:
    """StreamClientConfig from parsed options: --historyseconds, when given, is the reports'
    window; --keys defaults to a pool of 100 (with --match to 0: each record its own key),
    --ratelimit to 1000/s."""
    secs: dict[str, Any] = {
        k: v.total_seconds() if isinstance(v, timedelta) else v for k, v in opts.items()
    }
    return StreamClientConfig(
        landing=Path(landing) if landing else app.data_dir / "landing",
        stream=stream,
        displayinterval=secs["displayinterval"],
        duration=secs["duration"],
        warmup=secs["warmup"],
        ratelimit=secs["ratelimit"] if given("ratelimit") else STREAM_RATE,
        window_s=secs["historyseconds"] if given("historyseconds") else None,
        seed=secs["seed"],
        fmt=secs["fmt"],
        keys=(0 if match else DEFAULT_KEYS) if secs["keys"] is None else secs["keys"],
        burst=secs["burst"],
        pause=secs["pause"],
        reconnect_timeout=secs["reconnect_timeout"],
        match=match,
    )


MATCH_OPTIONS = ("match_rate", "delay", "jitter", "late_rate", "late_by")


def match_config(stream: str, match: str | None, **opts: Any) -> MatchConfig | None:
    """--match STREAM.COLUMN and its options (None without --match; its options alone, or with
    the built-in stream, are refused naming the fix)."""
    if match is None:
        for name in MATCH_OPTIONS:
            if given(name):
                raise ConfigError(f"--{name.replace('_', '-')} applies only with --match "
                                  "STREAM.COLUMN; e.g. --stream orders --match "
                                  "shipments.order_id")
        return None
    if stream == streams.BUILTIN:
        raise ConfigError("--match needs --stream NAME, a declared stream whose records the "
                          "matched ones refer to; e.g. --stream orders --match "
                          "shipments.order_id")
    secs = {k: v.total_seconds() if isinstance(v, timedelta) else v for k, v in opts.items()}
    return MatchConfig.parse(match, rate=secs["match_rate"], delay_s=secs["delay"],
                             jitter_s=secs["jitter"], late_rate=secs["late_rate"],
                             late_by_s=secs["late_by"])


def run_stream_client(app: AppContext, name: str, view: str, as_json: bool,
                      landing: Path | None, match: MatchConfig | None = None,
                      **opts: Any) -> None:
    """``slidewin client --stream NAME`` for a declared stream (``client.sim.typed_session``),
    with --match a second one whose records refer to it (``client.sim.matched``)."""
    refuse_events_only(name, opts)
    config = stream_config(app, name, landing, match, **opts)
    with app.connect() as conn:
        require_schema(conn)
        stream = streams.get_stream(conn, name)
        right = streams.get_stream(conn, match.stream) if match is not None else None
    if match is not None and right is not None:
        check_match(stream, right, match)  # before anything is written
    out = report_stream(as_json, app.quiet)
    display = client_display(view, out)
    stop = Stop()
    app.progress(f"writing {config.ratelimit:g} events/s of stream {name} into "
                 f"{config.landing / name} for {config.duration:g} s")
    if match is not None:
        app.progress(f"and for {match.rate:.0%} of them a record of stream {match.stream} "
                     f"whose {match.column} is its {stream.key}, {match.timing()}, into "
                     f"{config.landing / match.stream}")
    session = None
    try:
        session = StreamSession(config, stream, app.dsn, display, right=right)
        with stop_on_signals(stop):
            summary = session.run(stop)
        side = _side_summary(app, session, stop)
    finally:
        display.close()
        if session is not None and session.side is not None:
            session.side.close()
    if out is not None:
        for line in format_stream_summary(summary):
            click.echo(line, file=out)
        if side is not None:
            for line in format_stream_summary(side):
                click.echo(line, file=out)
        if session.matched is not None and match is not None:
            click.echo(match_line(session.matched.stats, name, match.stream, match), file=out)
    totals = partial(_with_match, summary, side, session)
    cut_short = interrupted(
        stop, f"after {summary.duration_s:.0f} s of {config.duration:g} s; the summary counts "
        "the run until then")
    if cut_short is not None:
        app.error_totals = totals
        raise cut_short
    if as_json:
        emit_json(totals())


def _side_summary(app: AppContext, session: StreamSession,
                  stop: threading.Event) -> StreamSummary | None:
    """The matched stream's totals (None without --match, or when the store could not be
    read: the first stream's summary stands alone)."""
    if session.side is None:
        return None
    try:
        return session.side.summary(drain_s=0.0 if stop.is_set() else 5.0)
    except Exception as exc:  # the run's own summary matters more
        app.progress(f"stream {session.side.stream.name}: no summary ({type(exc).__name__}: "
                     f"{exc})")
        return None


def _with_match(summary: StreamSummary, side: StreamSummary | None,
                session: StreamSession) -> dict[str, Any]:
    """The summary's JSON object; with --match the matched stream's under ``streams`` and the
    matches under ``match``."""
    out = summary.as_json()
    match = session.config.match
    if side is not None:
        out["streams"] = {side.stream: side.as_json()}
    if session.matched is not None and match is not None:
        out["match"] = {"stream": match.stream, "column": match.column, "rate": match.rate,
                        "delay_s": match.delay_s, "jitter_s": match.jitter_s,
                        "late_rate": match.late_rate, "late_by_s": match.late_by_s,
                        **session.matched.stats.snapshot()}
    return out


@click.command("client", cls=SlidewinCommand)
@client_options
@click.option("--stream", "stream_name", default=streams.BUILTIN, show_default=True, metavar="NAME",
              help="The stream to write: the built-in events, or a declared one (`slidewin "
                   "streams list`), whose events of its own shape go to <landing>/NAME/ "
                   "(--keys defaults to 100 and --ratelimit to 1000 for it; --historyseconds "
                   "is then the reports' window, default the stream's history).")
@click.option("--match", default=None, metavar="STREAM.COLUMN",
              help="With --stream NAME: also write the declared stream STREAM, whose COLUMN "
                   "holds the key of a NAME record -- two streams to join on NAME's key = "
                   "STREAM.COLUMN. A share of NAME's records (--match-rate) get one STREAM "
                   "record each, --delay (+- --jitter) after it, written into <landing>/STREAM/ "
                   "when that time comes; NAME's --keys defaults to 0 (each record its own key).")
@click.option("--match-rate", type=float, default=0.8, show_default=True, metavar="SHARE",
              help="With --match: the share of NAME's records that get a STREAM record (0-1).")
@click.option("--delay", type=DURATION, default="5s", show_default=True,
              help="With --match: how long after a NAME record its STREAM record happens.")
@click.option("--jitter", type=DURATION, default="0s", show_default=True,
              help="With --match: each delay is drawn evenly from --delay +- --jitter (never "
                   "below 0).")
@click.option("--late-rate", type=float, default=0.0, show_default=True, metavar="SHARE",
              help="With --match: the share of STREAM records written --late-by after their "
                   "time, behind newer ones (late for a join whose grace is shorter; past the "
                   "stream's own grace, rejected as late).")
@click.option("--late-by", type=DURATION, default="10s", show_default=True,
              help="With --match: how late the --late-rate records are written.")
@click.option("--deleter", type=click.Choice(DELETERS), default="client", show_default=True,
              help="With --no-inline: who runs the retention deletes -- this client (in a "
              "thread), or the scheduler (`slidewin jobs run`), which keeps the store's "
              "policy unless --historyseconds, --maxrows, ... are given.")
@pass_app
def client_command(app: AppContext, view: str, as_json: bool, landing: Path | None,
                   deleter: str, stream_name: str, match: str | None, match_rate: float,
                   delay: timedelta, jitter: timedelta, late_rate: float, late_by: timedelta,
                   **opts: Any) -> None:
    """Write random events into the landing directory and report on the window, as VoltDB's
    windowing client does: averages over 1/5/10/30 s, a max tracker, throughput, freshness,
    deletes, rejects; a final summary at the end.

    Run `slidewin ingest` alongside (or use `slidewin demo`, which runs everything). Ctrl-C
    stops early: the summary so far is printed, and the exit code is 130 (SIGTERM: 143).
    With --json, stdout holds only the summary's JSON object; the reports go to stderr.

    Two streams to join: --stream orders --match shipments.order_id writes orders and, for a
    share of them (--match-rate), a shipments record whose order_id is the order's id, --delay
    (+- --jitter) later, into <landing>/shipments/ when that time comes; --late-rate writes a
    share of them late, out of order. Both streams are declared ones (`slidewin streams add`);
    each report shows both and how many orders got a shipment.

    \b
    Examples:
      slidewin client --duration 60 --ratelimit 20000
      slidewin client --maxrows 100000 --historyseconds 0 --deletechunksize 500
      slidewin client --inline --landing /tmp/landing      # ingest runs with --inline
      slidewin client --deleter jobs   # `slidewin jobs run` deletes, by the stored policy
      slidewin client --stream sensors --ratelimit 500   # a declared stream's own events
      slidewin client --stream orders --match shipments.order_id --match-rate 0.8 \\
          --delay 5s --jitter 2s   # orders, and a shipment for 80% of them ~5 s later
    """
    matched = match_config(stream_name, match, match_rate=match_rate, delay=delay,
                           jitter=jitter, late_rate=late_rate, late_by=late_by)
    if stream_name != streams.BUILTIN:
        run_stream_client(app, stream_name, view, as_json, landing, matched, deleter=deleter,
                          **opts)
        return
    config = build_config(app, landing, deleter, **opts)
    if deleter == "jobs" and not gave_retention_options():
        config = replace(config, record_policy=False)
    with app.connect() as conn:
        require_schema(conn)
        if not config.record_policy and read_settings(conn, DEFAULT_NAME) is not None:
            app.progress("retention: the scheduler keeps the store's policy 'default' "
                         "(--historyseconds and --maxrows set it when given)")
    stop = Stop()
    app.progress(f"writing {config.ratelimit:g} events/s into {config.landing} "
                 f"for {config.duration:g} s")
    with stop_on_signals(stop):
        summary = run_client(config, app.dsn, view, stop, app=app, as_json=as_json)
    cut_short = interrupted(
        stop, f"after {summary.duration_s:.0f} s of {config.duration:g} s; the summary counts "
        "the run until then")
    if cut_short is not None:
        app.error_totals = summary.as_json  # the error's JSON line carries the whole summary
        raise cut_short
    if as_json:
        emit_json(summary.as_json())
