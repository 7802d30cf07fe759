"""``slidewin jobs``: schedule retention (and view refresh, stats) and watch it work.

A thin shell over ``jobs.store`` (the job store in PostgreSQL), ``jobs.scheduler`` (the running
scheduler) and ``jobs.status``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import click

from slidewin.client.answers import jobs as answer_jobs
from slidewin.client.cli.context import AppContext, emit_json, pass_app
from slidewin.client.cli.interrupts import stopped_by
from slidewin.client.cli.options import (
    COUNT,
    DURATION,
    DURATION_MS,
    json_option,
    reconnect_timeout_option,
)
from slidewin.client.cli.root import SlidewinGroup
from slidewin.db.reconnect import ReconnectPolicy
from slidewin.db.retention_settings import DEFAULT_NAME
from slidewin.db.signals import Stop, stop_on_signals
from slidewin.jobs import scheduler as sched
from slidewin.jobs import store
from slidewin.jobs.config import MAX_WORKERS, SPLITS, RetentionPolicy
from slidewin.jobs.status import JobStatus


@click.group(cls=SlidewinGroup)
def jobs() -> None:
    """Scheduled retention ("run everywhere" nibble deletes), view refresh and stats.

    Jobs are stored in PostgreSQL, so they survive restarts; `jobs run` executes them.

    \b
    Examples:
      slidewin jobs add retention --history 30s --max-rows 1M
      slidewin jobs add refresh --every 10s
      slidewin jobs run                      # until Ctrl-C / SIGTERM
      slidewin jobs status --json
    """


@jobs.command("run")
@click.option(
    "--for",
    "duration",
    type=DURATION,
    default=None,
    help="Stop after this long (e.g. 30s); default: run until Ctrl-C or SIGTERM.",
)
@reconnect_timeout_option()
@pass_app
def jobs_run(app: AppContext, duration: timedelta | None, reconnect_timeout: timedelta) -> None:
    """Run the stored jobs: the long-running scheduler.

    Retention rounds and vacuums are reported on stderr (-q silences them). Ctrl-C or SIGTERM
    stops it cleanly after the round in progress (exit 130 after Ctrl-C, 0 after SIGTERM). If
    PostgreSQL restarts, the scheduler waits for it (one line when lost, one when back) and
    carries on.

    \b
    Examples:
      slidewin jobs run
      slidewin -q jobs run --for 5m
    """
    policy = ReconnectPolicy(timeout=reconnect_timeout)
    stop = Stop()
    with stop_on_signals(stop):
        dsn = app.dsn
        count = len(store.list_jobs(dsn))
        app.progress(f"scheduler running {count} job(s); Ctrl-C or SIGTERM to stop")
        sched.run_scheduler(dsn, stop=stop, duration=duration, report=app.progress,
                            reconnect=policy)
    app.progress("scheduler stopped")
    stopped_by(stop)


@jobs.group("add")
def jobs_add() -> None:
    """Add (or replace, by name) a scheduled job.

    \b
    Examples:
      slidewin jobs add retention --history 30s
      slidewin jobs add stats --every 5s
    """


@jobs_add.command("retention")
@click.option("--name", default=DEFAULT_NAME, show_default=True,
              help="Job name; the ingest expires events by the 'default' policy's history.")
@click.option("--history", type=DURATION, default=None,
              help="Keep rows younger than this (e.g. 30s, 10m).")
@click.option("--max-rows", type=COUNT, default=None,
              help="Keep the newest N rows of the store (e.g. 1M).")
@click.option("--chunk", type=COUNT, default=100, show_default=True,
              help="Most rows one nibble deletes per partition per round.")
@click.option("--yield", "yield_", type=DURATION_MS, default="100ms", show_default=True,
              help="Pause after a round that filled no chunk (bare numbers are ms).")
@click.option("--split", type=click.Choice(SPLITS), default="global", show_default=True,
              help="How --max-rows becomes per-partition targets: 'global' keeps the newest "
              "N rows overall; 'even' gives each partition N/partitions (VoltDB).")
@click.option("--workers", type=click.IntRange(1, MAX_WORKERS), default=1, show_default=True,
              help="Partitions nibbled at once in a round (each worker has its own connection).")
@json_option("Print the stored job as JSON.")
@pass_app
def add_retention(
    app: AppContext, name: str, history: timedelta | None, max_rows: int | None, chunk: int,
    yield_: timedelta, split: str, workers: int, as_json: bool,
) -> None:
    """Schedule retention: nibble every partition to the history and/or row limit.

    Needs --history, --max-rows or both (not zero). The policy is also recorded in
    slidewin.retention_settings under NAME.

    \b
    Examples:
      slidewin jobs add retention --history 30s
      slidewin jobs add retention --max-rows 2M --chunk 500 --yield 50ms
    """
    policy = RetentionPolicy(
        history, max_rows, chunk, yield_, split, workers  # type: ignore[arg-type]
    )
    info = store.add_retention(app.dsn, policy, name)
    _added(app, info, policy.describe(), as_json)


@jobs_add.command("refresh")
@click.option("--name", default="refresh", show_default=True, help="Job name.")
@click.option("--every", type=DURATION, default="10s", show_default=True,
              help="How often to refresh the materialized views.")
@json_option("Print the stored job as JSON.")
@pass_app
def add_refresh(app: AppContext, name: str, every: timedelta, as_json: bool) -> None:
    """Schedule refreshing the materialized views (slidewin.minute_history).

    \b
    Example:
      slidewin jobs add refresh --every 30s
    """
    info = store.add_periodic(app.dsn, "refresh", every, name)
    _added(app, info, f"every {every.total_seconds():g}s", as_json)


@jobs_add.command("stats")
@click.option("--name", default="stats", show_default=True, help="Job name.")
@click.option("--every", type=DURATION, default="5s", show_default=True,
              help="How often to snapshot rows, sizes, dead tuples and lag.")
@json_option("Print the stored job as JSON.")
@pass_app
def add_stats(app: AppContext, name: str, every: timedelta, as_json: bool) -> None:
    """Schedule a stats snapshot (one stderr line per run of `jobs run`, kept in job_runs).

    \b
    Example:
      slidewin jobs add stats --every 5s
    """
    info = store.add_periodic(app.dsn, "stats", every, name)
    _added(app, info, f"every {every.total_seconds():g}s", as_json)


def _added(app: AppContext, info: store.JobInfo, what: str, as_json: bool) -> None:
    if as_json:
        emit_json(info.as_json())
    app.progress(f"job {info.name} ({info.kind}, {what}) stored; it runs under: slidewin jobs run")


@jobs.command("list")
@json_option("One JSON object on stdout.")
@pass_app
def jobs_list(app: AppContext, as_json: bool) -> None:
    """List the stored jobs.

    \b
    Example:
      slidewin jobs list --json | jq '.jobs[].name'
    """
    answer = answer_jobs.job_list(app.dsn)
    found = answer.jobs
    if as_json:
        emit_json(answer.as_json())
        return
    if not found:
        click.echo("no jobs; add one with: slidewin jobs add retention --history 30s")
    for j in found:
        state = "paused" if j.paused else f"next {_ts(j.next_run)}"
        click.echo(f"{j.name:<16} {j.kind:<10} every {j.every_s:g}s  {state}  {_kwargs(j)}")


def _kwargs(job: store.JobInfo) -> str:
    if job.kind != "retention":
        return ""
    return RetentionPolicy.from_kwargs(job.kwargs).describe()


@jobs.command("remove")
@click.argument("name")
@pass_app
def jobs_remove(app: AppContext, name: str) -> None:
    """Remove job NAME (a retention job's policy leaves retention_settings too).

    \b
    Example:
      slidewin jobs remove default
    """
    store.remove_job(app.dsn, name)
    app.progress(f"job {name} removed")


@jobs.command("pause")
@click.argument("name")
@pass_app
def jobs_pause(app: AppContext, name: str) -> None:
    """Pause job NAME (stays stored; `jobs resume` restarts it).

    \b
    Example:
      slidewin jobs pause default
    """
    store.pause_job(app.dsn, name)
    app.progress(f"job {name} paused")


@jobs.command("resume")
@click.argument("name")
@pass_app
def jobs_resume(app: AppContext, name: str) -> None:
    """Resume paused job NAME.

    \b
    Example:
      slidewin jobs resume default
    """
    info = store.resume_job(app.dsn, name)
    app.progress(f"job {name} resumed; next run {_ts(info.next_run)}")


@jobs.command("status")
@json_option("One JSON object on stdout.")
@pass_app
def jobs_status(app: AppContext, as_json: bool) -> None:
    """Each job's last run and deletes/s; per partition retention lag.

    Lag: "age over" is the oldest row's age minus the history (> 0: behind); "rows over" is the
    partition's rows minus its row target.

    \b
    Examples:
      slidewin jobs status
      slidewin jobs status --json | jq '.jobs[0].lag'
    """
    with app.connect() as conn:
        answer = answer_jobs.jobs_status(conn, app.dsn)
    statuses = answer.statuses
    if as_json:
        emit_json(answer.as_json())
        return
    if not statuses:
        click.echo("no jobs; add one with: slidewin jobs add retention --history 30s")
    for s in statuses:
        _echo_status(s)


@jobs.command("runs")
@click.option("--job", default=None, help="One job's runs (default: every job's).")
@click.option("--before", type=int, default=None,
              help="Older than this run id: the next_before of the previous page.")
@click.option("--limit", type=click.IntRange(1, answer_jobs.MAX_RUNS), default=20,
              show_default=True, help="At most this many.")
@json_option("One JSON object on stdout.")
@pass_app
def jobs_runs(app: AppContext, job: str | None, before: int | None, limit: int,
              as_json: bool) -> None:
    """The runs the scheduler recorded, newest first: when, how long, rows deleted, errors
    (the store keeps each job's newest 1,000 runs).

    \b
    Examples:
      slidewin jobs runs --limit 5
      slidewin jobs runs --job default --json
    """
    with app.connect() as conn:
        answer = answer_jobs.job_runs(conn, job, before, limit)
    if as_json:
        emit_json(answer.as_json())
        return
    if not answer.runs:
        click.echo("no runs recorded; the scheduler runs the jobs: slidewin jobs run")
    for r in answer.runs:
        took = (datetime.fromisoformat(r["finished_at"])
                - datetime.fromisoformat(r["started_at"])).total_seconds() * 1000
        state = "error: " + r["error"] if r["error"] else ("skipped" if r["skipped"] else "ok")
        click.echo(f"{r['id']:>8}  {r['started_at'][:23].replace('T', ' ')}  {r['job']:<16} "
                   f"{r['kind']:<10} {took:>7.0f} ms  {r['rounds']:>3} round(s)  "
                   f"{r['deleted']:>8} deleted  {state}")
    if answer.next_before is not None:
        click.echo(f"more: slidewin jobs runs --before {answer.next_before}")


def _echo_status(s: JobStatus) -> None:
    j = s.job
    state = "paused" if j.paused else f"next {_ts(j.next_run)}"
    click.echo(f"{j.name} ({j.kind}, every {j.every_s:g}s, {state})")
    click.echo(f"  last run: {_last(s.last_run)}")
    if s.deletes_per_s is not None:
        click.echo(f"  deletes/s (last minute): {s.deletes_per_s:g}, runs: {s.runs_last_minute}")
    if s.lag:
        click.echo(f"  {'part':>4} {'rows':>10} {'oldest':>24} {'age_over_s':>10} "
                   f"{'target':>10} {'rows_over':>9}")
        for p in s.lag:
            click.echo(f"  {p.part:>4} {p.rows:>10} {_ts(p.oldest):>24} {_opt(p.age_over_s):>10} "
                       f"{_opt(p.target_rows):>10} {_opt(p.rows_over):>9}")


def _last(run: dict[str, Any] | None) -> str:
    if run is None:
        return "never"
    took = (run["finished_at"] - run["started_at"]).total_seconds() * 1000
    text = f"{_ts(run['finished_at'])}, {took:.0f} ms, {run['rounds']} round(s), " \
           f"{run['deleted']} deleted"
    if run.get("skipped"):
        why = (run.get("detail") or {}).get("skipped_because", "another scheduler held the lock")
        text += f", skipped ({why})"
    if run.get("error"):
        text += f", error: {run['error']}"
    return text


def _opt(value: object) -> str:
    return "-" if value is None else str(value)


def _ts(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if value else "-"
