"""``slidewin demo``: the whole system in one command -- store, ingest, retention, client.

Order: check Java (Spark needs 17+) and the database first, so a missing JVM or an unreachable
server is one clear line before anything starts; initialise the schema; record the retention
policy (the store's own, saved first, is put back at the end); start ``slidewin ingest`` and
wait until its streams run (events written before then would be judged late against the first
batch); unless --inline, schedule and start the retention
scheduler (``slidewin jobs``); then run the client in this process for --duration.

Every child gets the DSN in its environment (SLIDEWIN_DSN, never on its command line, which
``ps`` shows to every user) and runs in its own process group (see client.processes), so a
Ctrl-C on the terminal reaches the demo alone; at the end -- or on Ctrl-C / SIGTERM -- the client
stops writing, the written events get a few seconds to land, then the scheduler and the ingest
are stopped (SIGTERM, wait, SIGKILL of the group as a last resort, so no JVM survives).

Stopped early by a signal, the demo still does all of that and prints the summary so far, then
exits 130 after SIGINT (Ctrl-C) or 143 after SIGTERM -- 128 + the signal, what a shell reports
for a process the signal ended -- with one ``error: stopped by ...`` line (and, with --json, the
summary, the error and the code as the JSON object): a run cut short is not a complete run (see
client.cli.interrupts). A signal before the client starts (while Spark starts) stops the parts
already running and exits the same way. Before the signal handlers are in place (the Java and
database checks), Ctrl-C exits 130 through the root group and SIGTERM ends the process at once.
With no --dsn the embedded PostgreSQL is started by this process and stops when it exits, after
the children. Files go to a per-run directory under
``<data dir>/demo/`` (landing, checkpoints, the children's logs); the landing and checkpoint
folders are removed at the end, the logs are kept.

Two streams side by side: beside the built-in ``events``, the demo feeds the declared stream
``demo_sensors`` (sensor, ts, temp double precision -- its measure --, site; history: the demo's
--historyseconds, else 10 min), declaring it before the ingest starts if it is not there, with
a second generator in a thread (``client.sim.typed_session.SideStream``, --demo-stream-rate
events/s); each report ends with that stream's rows and measure, the summary with its totals.
The ingest reads its folder, ``<landing>/demo_sensors/``, and the scheduler applies its history.
When the demo ends it drops the stream it declared (--keep-demo-stream keeps it).

A join beside them (``client.cli.demo_join``): the demo declares ``demo_orders`` and
``demo_shipments`` and defines the left interval join ``demo_orders_shipments`` (a shipment 0-30 s
after its order, grace 5 s) unless they are there, writes orders at --join-rate and a shipment for
80% of them 5 s +- 2 s later (1% written 10 s late) in a thread of their own, and each report ends
with the join's pairs, unshipped orders (left-only, final), late records, W and result freshness
(``emitted_at`` minus when the pair's second record was written); the summary adds the newest
pairs, and --json the join's figures under ``joins``. At the end the demo drops the join, then the
streams, that it made (--keep-demo-join keeps them).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import click

from slidewin.client.cli import demo_join
from slidewin.client.cli.client import build_config, client_options, report_stream, run_client
from slidewin.client.cli.context import AppContext, emit_json, pass_app
from slidewin.client.cli.interrupts import interrupted
from slidewin.client.cli.options import COUNT, DURATION
from slidewin.client.cli.root import SlidewinCommand
from slidewin.client.processes import Child, Launch, slidewin_child, start_child
from slidewin.client.sim.config import ClientConfig
from slidewin.client.sim.generator import EventGenerator, GeneratorConfig
from slidewin.client.sim.join_demo import JoinSummary, format_join_summary
from slidewin.client.sim.session import record_retention
from slidewin.client.sim.typed_session import SideStream, StreamSummary, format_stream_summary
from slidewin.db import sessions, streams
from slidewin.db.clock import utc_now
from slidewin.db.config import redact
from slidewin.db.errors import SlidewinError
from slidewin.db.retention_settings import (
    PolicySnapshot,
    describe_policy,
    restore_policy,
    snapshot_policy,
)
from slidewin.db.schema import init_schema
from slidewin.db.signals import Stop, stop_on_signals
from slidewin.ingest.backlog import (
    Backlog,
    behind_after,
    behind_line,
    folders_under,
    measure,
)
from slidewin.ingest.config import DEFAULT_TRIGGER_TEXT

BATCH_MARK = "[text] batch "  # one line per committed text micro-batch
READY_MARK = "ingest "  # the ingest's "ingest <query id>: <streams> from <landing>" line
# the ingest's lines the demo passes on to its own stderr (the rest go to the ingest's log)
BEHIND_MARKS = ("warning: ingest falling behind", "ingest caught up")
QUERY_ID = "demo"
# the side streams' micro-batch interval (or --trigger when longer): each batch costs about a
# quarter second of Spark however few its records, and three side streams polled every 250 ms
# took the cores from events (freshness p95 5.8 s against 1.75 s without them, 2026-11-26)
DECLARED_TRIGGER = timedelta(seconds=1)
# the warm-up batches, written one at a time, each after the last committed: a tiny first batch
# (Spark plans and compiles the stream's code), then batches of about the size the client's
# rate makes at the default trigger, so the JIT has compiled the parse before the first report
WARMUP_BATCHES = (100, 6000, 6000, 6000, 6000, 6000)
DEMO_KEYS = 1000
SESSION_NAME = "demo_sessions"
STREAM_NAME = "demo_sensors"
STREAM_HISTORY = timedelta(minutes=10)  # when --historyseconds is 0


def demo_stream_columns() -> list[streams.Column]:
    """The demo's declared stream: a sensor's temperature (the measure) at a site."""
    return [streams.Column("sensor", "text", True), streams.Column("ts", "timestamptz", True),
            streams.Column("temp", "double precision"), streams.Column("site", "text")]


def ensure_demo_stream(conn: Any, config: ClientConfig) -> tuple[streams.Stream, bool]:
    """The demo stream, declared now if it is not there; whether the demo declared it."""
    if STREAM_NAME in {s.name for s in streams.list_streams(conn, declared_only=True)}:
        return streams.get_stream(conn, STREAM_NAME), False
    history = timedelta(seconds=config.history_s) if config.history_s else STREAM_HISTORY
    stream = streams.define(conn, STREAM_NAME, key="sensor", time="ts",
                            columns=demo_stream_columns(), measures=["temp"], history=history)
    return stream, True


def _leave_demo_stream(app: AppContext, keep: bool) -> None:
    """The demo's stream would stay in every later ingest: drop it, or say that it stays."""
    if keep:
        app.progress(f"stream {STREAM_NAME} stays declared: every later ingest reads "
                     f"<landing>/{STREAM_NAME}/; `slidewin streams drop {STREAM_NAME} --yes` "
                     "removes it")
        return
    with contextlib.suppress(Exception), app.connect() as conn:  # a failure is reported already
        streams.drop(conn, STREAM_NAME)
        app.progress(f"stream {STREAM_NAME} dropped (the demo declared it; --keep-demo-stream "
                     "keeps it)")


def demo_sessions(gap: timedelta) -> sessions.SessionDef:
    """The session window the demo registers (validated before anything starts)."""
    grace = timedelta(seconds=2)
    return sessions.SessionDef(SESSION_NAME, gap, grace, max(timedelta(minutes=10), gap + grace))


def _restore_retention(app: AppContext, saved: PolicySnapshot) -> None:
    """The demo stored its retention as the store's policy 'default' (the scheduler's job and
    the ingest's expired rule); left there, it would rule every later ingest, `jobs run` and
    window check (a 30 s history refuses the dashboard's windows). Put back what the demo found
    -- or, when that fails, say what stays and how to change it."""
    try:
        with app.connect() as conn:
            restore_policy(conn, saved)
    except Exception as exc:  # the store went away: say what the demo left
        app.progress(f"warning: the demo's retention policy '{saved.name}' stays in the store "
                     f"({type(exc).__name__}); it was {describe_policy(saved)}: set it again "
                     "with `slidewin jobs add retention --history ...` or remove it with "
                     f"`slidewin jobs remove {saved.name}`")
        return
    if saved.settings is None and saved.job is None:
        app.progress(f"retention policy '{saved.name}' removed (the store had none before the "
                     "demo)")
    else:
        app.progress(f"{describe_policy(saved)} put back as the demo found it")


def _leave_session_window(app: AppContext, keep: bool) -> None:
    """The demo's session window would change what every later ingest does (each keeps its
    sessions): remove it, or say that it stays."""
    if keep:
        app.progress(f"session window {SESSION_NAME} stays defined: every later ingest keeps "
                     f"its sessions; `slidewin windows remove {SESSION_NAME}` removes it")
        return
    with contextlib.suppress(Exception), app.connect() as conn:  # a failure is reported already
        sessions.remove(conn, SESSION_NAME, utc_now())
        app.progress(f"session window {SESSION_NAME} removed (the demo added it; "
                     "--keep-session-window keeps it)")


class DemoError(SlidewinError):
    """A part of the demo could not start; the message says which and where its log is."""


def run_dir(data_dir: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    folder = data_dir / "demo" / f"run-{stamp}-{time.monotonic_ns() % 100000:05d}"
    folder.mkdir(parents=True, exist_ok=False)
    return folder


def ingest_launch(dsn: str, data_dir: Path, config: ClientConfig, folder: Path,
                  trigger: str, streams_trigger: str | None = None) -> Launch:
    args = ["--data-dir", str(data_dir), "ingest", "--landing", str(config.landing),
            "--checkpoint-dir", str(folder / "checkpoints"), "--processed", "delete",
            "--trigger", trigger, "--streams-trigger", streams_trigger or trigger,
            "--query-id", QUERY_ID, *reconnect_args(config),
            "--verbose"]  # Spark's warnings too: its log is a file, read when something failed
    if config.history_s:
        args += ["--history", f"{config.history_s:g}s"]
    if config.inline:
        args += ["--inline", "--chunk", str(config.deletechunksize)]
        if config.max_rows:  # store-wide, as VoltDB's maxrows
            args += ["--max-rows", str(config.max_rows)]
    return slidewin_child(dsn, *args)


def reconnect_args(config: ClientConfig) -> list[str]:
    """The client's --reconnect-timeout, for the children: every part waits as long."""
    return ["--reconnect-timeout", f"{config.reconnect_timeout:g}s"]


def jobs_add_launch(dsn: str, config: ClientConfig) -> Launch:
    args = ["jobs", "add", "retention", "--chunk", str(config.deletechunksize),
            "--yield", f"{config.deleteyieldtime_ms:g}ms"]
    if config.history_s:
        args += ["--history", f"{config.history_s:g}s"]
    if config.max_rows:
        args += ["--max-rows", str(config.max_rows)]
    return slidewin_child(dsn, *args)


class Demo:
    """The children of one demo run, started in order and always stopped in reverse."""

    def __init__(self, app: AppContext, config: ClientConfig, folder: Path, dsn: str) -> None:
        self.app, self.config, self.folder, self.dsn = app, config, folder, dsn
        self.children: list[Child] = []
        self.ready = threading.Event()
        self.died: str | None = None
        self.stopping = False
        self.batches = 0  # text batches committed (their progress lines)
        self.batch_done = threading.Condition()

    def _on_ingest_line(self, text: str) -> None:
        if text.startswith(READY_MARK) and " from " in text:
            self.ready.set()
        elif text.startswith(BATCH_MARK):
            with self.batch_done:
                self.batches += 1
                self.batch_done.notify_all()
        elif text.startswith(BEHIND_MARKS):
            click.echo(text, err=True)  # even with -q: the run's numbers depend on it

    def start_ingest(self, trigger: str, stop: threading.Event, timeout_s: float,
                     streams_trigger: str | None = None) -> None:
        launch = ingest_launch(self.dsn, self.app.data_dir, self.config, self.folder, trigger,
                               streams_trigger)
        child = start_child("ingest", launch.argv, self.folder / "ingest.log", env=launch.env,
                            on_line=self._on_ingest_line)
        self.children.append(child)
        self.app.progress("starting the Spark ingest (this takes a while the first time)...")
        deadline = time.monotonic() + timeout_s
        while not self.ready.wait(0.2):
            if not child.alive():
                raise DemoError(_died("ingest", child))
            if stop.is_set():
                return
            if time.monotonic() > deadline:
                raise DemoError(
                    f"the ingest did not start within {timeout_s:g} s; see {child.log_path} "
                    "(raise --startup-timeout on a slow machine)"
                )
        self.app.progress(f"ingest running; warming it up with {len(WARMUP_BATCHES)} batches...")
        if self._warm_up(stop, deadline):
            self.app.progress("ingest warmed up")
        elif not stop.is_set():
            self.app.progress(
                f"warning: the ingest committed {self.batches} of {len(WARMUP_BATCHES)} warm-up "
                f"batches within --startup-timeout {timeout_s:g}s; going on (the machine is "
                "busy: expect the ingest to fall behind)")

    def _warm_up(self, stop: threading.Event, deadline: float) -> bool:
        """Write WARMUP_BATCHES, each when the one before has committed: Spark's first batches
        are slow (planning, class loading, then the JIT compiling the parse), and events written
        meanwhile would start the run seconds behind. These events are real ones; the client's
        statistics start after them. False when a stop or the deadline cut it short."""
        gen = EventGenerator(GeneratorConfig(self.config.landing, seed=self.config.seed))
        for size in WARMUP_BATCHES:
            with self.batch_done:
                seen = self.batches
            now = datetime.now(UTC)
            gen.write_batch(size, now - timedelta(milliseconds=100), now)
            with self.batch_done:
                while self.batches == seen:
                    self.batch_done.wait(0.2)
                    if not self.children[0].alive():
                        raise DemoError(_died("ingest", self.children[0]))
                    if stop.is_set() or time.monotonic() > deadline:
                        return False
        return True

    def start_scheduler(self) -> None:
        add = jobs_add_launch(self.dsn, self.config)
        # its own session, as every child: a Ctrl-C on the terminal is the demo's to handle
        done = subprocess.run(add.argv, env=add.env, capture_output=True, text=True,
                              check=False, timeout=120, start_new_session=True)
        if done.returncode != 0:
            said = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
            raise DemoError(f"could not schedule retention: {said.removeprefix('error: ')}")
        run = slidewin_child(self.dsn, "jobs", "run", *reconnect_args(self.config))
        self.children.append(start_child("jobs", run.argv, self.folder / "jobs.log",
                                         env=run.env))
        self.app.progress("retention scheduler running")

    def check_alive(self) -> None:
        for child in self.children:
            if not child.alive():
                raise DemoError(_died(child.name, child))

    def watch(self, stop: threading.Event) -> None:
        """Stop the run when a child dies (checked every second, in a daemon thread)."""

        def loop() -> None:
            while not stop.wait(1.0) and not self.stopping:
                dead = [c for c in self.children if not c.alive()]
                if dead:
                    self.died = _died(dead[0].name, dead[0])
                    # said now, as the run stops; the error line itself comes at the end
                    click.echo(f"{self.died}; stopping the demo", err=True)
                    stop.set()

        threading.Thread(target=loop, name="demo-watch", daemon=True).start()

    def stop_all(self) -> None:
        self.stopping = True
        for child in reversed(self.children):
            self.app.progress(f"stopping {child.name}...")
            child.stop()

    def backlog(self) -> Backlog:
        """The files still waiting for the ingest in the run's landing folders."""
        return measure(folders_under(self.config.landing), utc_now())

    def cleanup(self) -> None:
        for name in ("landing", "checkpoints"):
            shutil.rmtree(self.folder / name, ignore_errors=True)


def _died(name: str, child: Child) -> str:
    """One line: the child's own ``error:`` line (else its last line) and where its log is."""
    lines = [line.strip() for line in child.tail if line.strip()]
    said = [line.removeprefix("error: ") for line in lines if line.startswith("error: ")]
    cause = said[-1] if said else (lines[-1] if lines else "no output")
    code = child.proc.returncode
    return f"the {name} process exited (code {code}): {cause}; its log: {child.log_path}"


def ingest_failure(summary: Any, backlog: Backlog | None, log: Path) -> DemoError | None:
    """The demo's error when the ingest stored none of the events the client wrote -- a run
    that shows no ingest is no demo, and exits non-zero -- else None."""
    if summary.written == 0 or summary.ingested > 0:
        return None
    waiting = f" ({backlog.describe()})" if backlog is not None and backlog.files else ""
    return DemoError(
        f"the ingest stored none of the {summary.written} events written in "
        f"{summary.duration_s:.0f} s{waiting}: it fell behind, the machine short of CPU for "
        f"this rate -- lower --ratelimit (and --demo-stream-rate, --join-rate), or see the "
        f"ingest's log {log}"
    )


def behind_at_end(backlog: Backlog | None, threshold: timedelta) -> str | None:
    """A warning when the run ended with files waiting longer than the ingest should take."""
    if backlog is None or backlog.oldest_age is None or backlog.oldest_age < threshold:
        return None
    return behind_line(backlog, threshold).replace("falling behind:", "behind at the end:", 1)


def preflight(app: AppContext) -> str:
    """Java and the database, before anything starts. Returns the DSN."""
    from slidewin.ingest.java import check_java

    check_java()
    dsn = app.dsn  # starts the embedded server when no DSN is configured
    with app.connect(autocommit=False) as conn:
        init_schema(conn)
    return dsn


@click.command("demo", cls=SlidewinCommand)
@client_options
@click.option("--trigger", default=DEFAULT_TRIGGER_TEXT, show_default=True, type=DURATION,
              help="The ingest's micro-batch interval.")
@click.option("--startup-timeout", type=DURATION, default="240", show_default=True,
              help="How long to wait for Spark to start before giving up (s).")
@click.option("--session-gap", type=DURATION, default="10s", show_default=True,
              help=f"Gap of the session window the demo registers ({SESSION_NAME}); its open "
                   "sessions, merges and longest session are in the reports.")
@click.option("--keep-session-window", is_flag=True,
              help=f"Leave {SESSION_NAME} defined when the demo ends (by default the demo "
                   "removes the session window it registered, so later ingests do not keep it).")
@click.option("--demo-stream-rate", type=COUNT, default="200", show_default=True,
              help=f"Events per second of the declared stream {STREAM_NAME}, fed beside events "
                   "(0: no second stream; nothing is declared).")
@click.option("--keep-demo-stream", is_flag=True,
              help=f"Leave {STREAM_NAME} declared when the demo ends (by default the demo drops "
                   "the stream it declared, with its rows).")
@click.option("--join-rate", type=COUNT, default="100", show_default=True,
              help=f"Orders per second of the join demo: {demo_join.ORDERS} and "
                   f"{demo_join.SHIPMENTS} (a shipment for 80% of the orders, 5s +- 2s later, 1% "
                   f"of them written 10s late), joined live by {demo_join.JOIN_NAME} (left join, "
                   "a shipment 0-30s after its order, grace 5s). 0: no join demo; nothing is "
                   "declared.")
@click.option("--keep-demo-join", is_flag=True,
              help=f"Leave {demo_join.JOIN_NAME} and its two streams when the demo ends (by "
                   "default the demo drops the join and the streams it made, with their rows).")
@pass_app
def demo_command(app: AppContext, view: str, as_json: bool, landing: Path | None,
                 trigger: Any, startup_timeout: Any, session_gap: Any,
                 keep_session_window: bool, demo_stream_rate: int, keep_demo_stream: bool,
                 join_rate: int, keep_demo_join: bool, **opts: Any) -> None:
    """Run everything at once: PostgreSQL (embedded unless --dsn), the schema, the Spark ingest,
    the retention scheduler (unless --inline) and the client, for --duration; then stop every
    part and print the final summary. Ctrl-C stops early, just as cleanly, and exits 130
    (SIGTERM: 143) after the summary so far.

    Takes the client's options (see `slidewin client --help`); --landing defaults to a per-run
    folder under <data dir>/demo, removed at the end (the logs stay). Keyed traffic: --keys
    defaults to 1,000 here, each key in bursts and pauses, and the demo registers the session
    window demo_sessions (--session-gap, grace 2s, retention 10m) unless it exists, and removes
    it when it ends (--keep-session-window keeps it); --keys 0 writes a fresh uuid per event,
    as VoltDB's client, and registers nothing. Beside events, a second stream: the demo declares
    demo_sensors (sensor, ts, temp, site; history: --historyseconds) unless it exists, feeds it
    at --demo-stream-rate, reports its rows and temp every interval, and drops it when it ends
    (--keep-demo-stream keeps it). And a join: the demo declares demo_orders and
    demo_shipments, defines the left join demo_orders_shipments (a shipment 0-30s after its
    order, grace 5s), writes orders at --join-rate and shipments for 80% of them about 5s
    later, reports the join's pairs, unshipped orders, late records, W and result freshness
    every interval, and drops what it made when it ends (--keep-demo-join keeps it; --join-rate
    0 runs no join). The demo's retention is stored as the policy 'default' while it runs; at
    the end (Ctrl-C and failures too) the store's own policy 'default' is put back as it was,
    or removed if there was none. Needs Java 17+ for Spark.

    \b
    Examples:
      slidewin demo --duration 60
      slidewin demo --duration 30 --ratelimit 5000 --historyseconds 10
      slidewin demo --inline --maxrows 50000 --historyseconds 0
      slidewin demo --duration 90 --join-rate 500 --keep-demo-join
      slidewin --dsn postgresql://127.0.0.1/demo demo --json
    """
    if opts.get("keys") is None:
        opts["keys"] = DEMO_KEYS
    config = build_config(app, landing or Path("landing"), "jobs", **opts)  # validate first
    sessions_def = demo_sessions(session_gap)
    dsn = preflight(app)
    app.progress(f"store ready at {redact(dsn)}")
    folder = run_dir(app.data_dir)
    config = replace(config, landing=landing or folder / "landing")
    with app.connect() as conn:
        saved = snapshot_policy(conn)  # put back when the demo ends, however it ends
        record_retention(conn, config)
        registered = declared = False
        try:
            registered = bool(config.keys) and sessions.ensure(conn, sessions_def)
            if registered:
                app.progress(f"session window {SESSION_NAME} registered (gap {session_gap})")
            config.landing.mkdir(parents=True, exist_ok=True)
            side, declared = _side_stream(app, conn, config, dsn, demo_stream_rate)
            joined = demo_join.set_up(app, conn, config, dsn, join_rate)
        except BaseException:
            if registered:
                _leave_session_window(app, keep_session_window)
            if declared:
                _leave_demo_stream(app, keep_demo_stream)
            _restore_retention(app, saved)
            raise
    demo = Demo(app, config, folder, dsn)
    stop = Stop()
    summary = None
    side_summary: StreamSummary | None = None
    join_summary: JoinSummary | None = None
    backlog: Backlog | None = None
    with stop_on_signals(stop):
        try:
            demo.start_ingest(
                f"{trigger.total_seconds():g}s", stop, startup_timeout.total_seconds(),
                f"{max(trigger, DECLARED_TRIGGER).total_seconds():g}s",
            )
            if not config.inline and not stop.is_set():
                demo.start_scheduler()
            if not stop.is_set():
                demo.check_alive()
                demo.watch(stop)
                app.progress(f"client: {config.ratelimit:g} events/s for {config.duration:g} s "
                             f"into {config.landing}; logs in {folder}")
                if side is not None:
                    side.start(stop, config.duration)
                if joined is not None:
                    joined.feed.start(stop, config.duration, config.warmup)
                summary = run_client(config, dsn, view, stop, drain_s=15.0, app=app,
                                     as_json=as_json, extra_report=_extra_report(side, joined))
                backlog = demo.backlog()  # before the stop: what the ingest never got to
                if side is not None:
                    side_summary = _side_summary(app, side, stop, as_json)
                if joined is not None:
                    join_summary = _join_summary(app, joined, stop, as_json)
        finally:
            if side is not None:
                side.stop()
                side.close()
            if joined is not None:
                joined.feed.stop()
                joined.feed.watch.close()
            with contextlib.suppress(Exception):
                demo.stop_all()
            demo.cleanup()
            if registered:
                _leave_session_window(app, keep_session_window)
            if declared:
                _leave_demo_stream(app, keep_demo_stream)
            if joined is not None:
                demo_join.leave(app, joined, keep_demo_join)
            _restore_retention(app, saved)
    if summary is not None:
        # a failure's JSON line carries the whole summary
        app.error_totals = partial(_with_stream, summary, side_summary, join_summary)
    if demo.died:
        raise DemoError(demo.died)
    if summary is None:
        cut_short = interrupted(stop, "while the demo started; every part it started is stopped")
        raise cut_short or DemoError("stopped before the client started")
    cut_short = interrupted(
        stop, f"after {summary.duration_s:.0f} s of {config.duration:g} s; every part is "
        "stopped and the summary counts the run until then")
    if cut_short is not None:
        raise cut_short
    behind = behind_at_end(backlog, behind_after(trigger, max(trigger, DECLARED_TRIGGER)))
    if behind is not None:
        click.echo(behind, err=True)
    failure = ingest_failure(summary, backlog, folder / "ingest.log")
    if failure is not None:
        raise failure
    if as_json:
        emit_json(_with_stream(summary, side_summary, join_summary))


def _side_stream(app: AppContext, conn: Any, config: ClientConfig, dsn: str,
                 rate: float) -> tuple[SideStream | None, bool]:
    """The demo stream's feeder (None with --demo-stream-rate 0), and whether the demo declared
    the stream (before the ingest starts, so its query starts with the ingest)."""
    if rate <= 0:
        return None, False
    stream, declared = ensure_demo_stream(conn, config)
    app.progress(f"stream {STREAM_NAME} {'declared' if declared else 'found'} (history "
                 f"{stream.history or 'forever'}): {rate:g} events/s beside events")
    window_s = stream.history.total_seconds() if stream.history else 30.0
    side = SideStream(stream, config.landing, dsn, rate=rate, window_s=window_s,
                      seed=config.seed)
    return side, declared


def _side_summary(app: AppContext, side: SideStream, stop: threading.Event,
                  as_json: bool) -> StreamSummary | None:
    """The demo stream's totals, printed after the built-in stream's summary (None when the
    store could not be read: the built-in summary stands alone)."""
    try:
        found = side.summary(drain_s=0.0 if stop.is_set() else 5.0)
    except Exception as exc:  # the run's own summary matters more than the side stream's
        app.progress(f"stream {side.stream.name}: no summary ({type(exc).__name__}: {exc})")
        return None
    out = report_stream(as_json, app.quiet)
    if out is not None:
        for line in format_stream_summary(found):
            click.echo(line, file=out)
    return found


def _extra_report(side: SideStream | None,
                  joined: demo_join.DemoJoin | None) -> Callable[[], list[str]] | None:
    """The lines each report adds: the demo stream's, then the join's."""
    parts = [f for f in (side.lines if side is not None else None,
                         joined.feed.watch.lines if joined is not None else None)
             if f is not None]
    if not parts:
        return None
    return lambda: [line for part in parts for line in part()]


def _join_summary(app: AppContext, joined: demo_join.DemoJoin, stop: threading.Event,
                  as_json: bool) -> JoinSummary | None:
    """The join's totals and newest pairs, printed last (None when the store could not be
    read: the streams' summaries stand alone)."""
    try:
        found = joined.feed.summary(drain_s=0.0 if stop.is_set() else 5.0)
    except Exception as exc:  # the run's own summary matters more than the join's
        app.progress(f"join {joined.join.name}: no summary ({type(exc).__name__}: {exc})")
        return None
    out = report_stream(as_json, app.quiet)
    if out is not None:
        for line in format_join_summary(found, "order", "shipment"):
            click.echo(line, file=out)
    return found


def _with_stream(summary: Any, side: StreamSummary | None,
                 join: JoinSummary | None = None) -> dict[str, Any]:
    """The summary's JSON object, with the demo stream's under ``streams`` and the join's under
    ``joins``."""
    out: dict[str, Any] = summary.as_json()
    if side is not None:
        out["streams"] = {side.stream: side.as_json()}
    if join is not None:
        out["joins"] = {join.join: join.as_json()}
    return out
