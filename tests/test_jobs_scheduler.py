"""The scheduler and its job store in PostgreSQL: jobs survive restarts, pause and resume, two
schedulers on one database never double-delete, SIGTERM stops cleanly, status reports lag.

A scheduler run in-process gets a pinned clock (NOW): rows stamped an hour before it are
expired under any history below, an hour after it kept. A ``slidewin jobs run`` subprocess runs
on the wall clock, so its rows are stamped relative to that (``stamped``), never to a date.
Nothing waits for expiry.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from click.testing import CliRunner

from slidewin.client.cli import cli
from slidewin.db.events import Event, copy_events
from slidewin.jobs import store
from slidewin.jobs.config import RetentionPolicy
from slidewin.jobs.errors import JobNotFound
from slidewin.jobs.retention import RoundResult
from slidewin.jobs.scheduler import run_scheduler
from slidewin.jobs.status import job_status, retention_lag
from tests.conftest import T0
from tests.invariants import assert_rollups_exact
from tests.jobs_fixtures import at, events, load

PARTS = 4
HOUR = timedelta(hours=1)
NOW = T0  # the in-process schedulers' clock


@pytest.fixture
def dsn(make_store) -> str:
    return make_store(PARTS)


def rows_at(base: datetime, count: int, prefix: str) -> list[Event]:
    return [Event(f"{prefix}{i:05d}", i, base + timedelta(microseconds=i)) for i in range(count)]


def pinned(offset: timedelta, count: int, prefix: str) -> list[Event]:
    """Rows at NOW + offset, for a scheduler run in-process on the pinned clock."""
    return rows_at(NOW + offset, count, prefix)


def stamped(offset: timedelta, count: int, prefix: str) -> list[Event]:
    """Rows at the wall clock + offset, for a ``slidewin jobs run`` subprocess."""
    return rows_at(datetime.now(UTC) + offset, count, prefix)


def put(dsn: str, rows: list[Event]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        copy_events(conn, rows, PARTS)


def count(dsn: str, query: str = "SELECT count(*) FROM slidewin.events") -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
        assert row is not None
        return int(row[0])


def run_for(dsn: str, seconds: float) -> list[str]:
    lines: list[str] = []
    run_scheduler(dsn, duration=timedelta(seconds=seconds), report=lines.append,
                  clock=lambda: NOW)
    return lines


@pytest.mark.slow
def test_jobs_survive_a_scheduler_restart(dsn):
    store.add_retention(dsn, RetentionPolicy(history=timedelta(seconds=30), chunk=50))
    put(dsn, pinned(-HOUR, 400, "old") + pinned(HOUR, 100, "new"))
    lines = run_for(dsn, 2.0)
    assert count(dsn) == 100
    assert any("deleted" in line for line in lines)
    # a new scheduler (as after a restart) finds the job in PostgreSQL and keeps going
    assert [j.name for j in store.list_jobs(dsn)] == ["default"]
    put(dsn, pinned(-HOUR, 300, "older"))
    run_for(dsn, 1.5)
    assert count(dsn) == 100
    assert count(dsn, "SELECT sum(deleted) FROM slidewin.job_runs WHERE job = 'default'") == 700
    with psycopg.connect(dsn) as conn:
        assert_rollups_exact(conn)


@pytest.mark.slow
def test_paused_jobs_do_not_run_until_resumed(dsn):
    store.add_retention(dsn, RetentionPolicy(history=timedelta(seconds=30)))
    assert store.pause_job(dsn, "default").paused
    put(dsn, pinned(-HOUR, 50, "old"))
    run_for(dsn, 1.0)
    assert count(dsn) == 50
    assert not store.resume_job(dsn, "default").paused
    run_for(dsn, 1.5)
    assert count(dsn) == 0


def test_add_upserts_the_policy_and_remove_drops_it(dsn):
    store.add_retention(dsn, RetentionPolicy(history=timedelta(seconds=30)))
    store.add_retention(dsn, RetentionPolicy(history=timedelta(seconds=45), max_rows=9, chunk=3))
    got = count(dsn, "SELECT count(*) FROM slidewin.retention_settings WHERE name = 'default' "
                     "AND history_s = 45 AND max_rows = 9 AND chunk = 3")
    assert got == 1 and len(store.list_jobs(dsn)) == 1
    store.remove_job(dsn, "default")
    assert store.list_jobs(dsn) == []
    assert count(dsn, "SELECT count(*) FROM slidewin.retention_settings") == 0
    with pytest.raises(JobNotFound, match="no job named 'default'"):
        store.remove_job(dsn, "default")


def test_refresh_and_stats_jobs_run_and_are_recorded(dsn):
    store.add_periodic(dsn, "refresh", timedelta(milliseconds=300))
    store.add_periodic(dsn, "stats", timedelta(milliseconds=300))
    put(dsn, pinned(HOUR, 20, "new"))
    lines = run_for(dsn, 1.5)
    kinds = count(dsn, "SELECT count(DISTINCT kind) FROM slidewin.job_runs WHERE error IS NULL")
    assert kinds == 2
    assert count(dsn, "SELECT coalesce(sum(n), 0) FROM slidewin.minute_history") == 20
    assert any(line.startswith("stats: 20 rows") for line in lines)


def test_job_runs_stay_bounded(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(12):
            conn.execute(
                "SELECT slidewin.record_job_run('x', 'stats', now(), now(), 0, '{}', null, "
                "false, '{}', null, 5)"
            )
    assert count(dsn, "SELECT count(*) FROM slidewin.job_runs WHERE job = 'x'") == 5


def test_status_reports_lag_per_partition(dsn):
    """
    rows 10/s:  |====================|  t = 0 .. 20 s      now = 25 s, history 10 s
    oldest row is 25 s old: 15 s over the history; max-rows 100 of 200 rows: 100 over in total
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        load(conn, events(0, 20, 10), PARTS)
        lag = retention_lag(conn, RetentionPolicy(timedelta(seconds=10), 100), at(25))
        assert max(p.age_over_s for p in lag) == pytest.approx(15.0)
        assert sum(p.rows_over for p in lag) == 100
        assert sum(p.target_rows for p in lag) == 100
        info = store.add_retention(dsn, RetentionPolicy(max_rows=100))
        status = job_status(conn, info, at(25))
        assert status.last_run is None and status.lag is not None
        assert status.as_json()["lag"][0]["age_over_s"] is None  # no history: no age limit


def slidewin(dsn: str, *args: str) -> list[str]:
    """The ``slidewin`` command line, run by this interpreter."""
    entry = "import sys; from slidewin.client.cli import cli; sys.exit(cli(prog_name='slidewin'))"
    return [sys.executable, "-c", entry, "--dsn", dsn, *args]


@pytest.mark.slow
def test_two_schedulers_never_double_delete_or_overshoot(dsn):
    # a short yield, not none: job_runs keeps each job's newest 1000 records, and a busy loop of
    # empty runs would prune the ones that did the deleting before the test reads them
    policy = RetentionPolicy(max_rows=500, chunk=20, yield_=timedelta(milliseconds=50))
    store.add_retention(dsn, policy)
    put(dsn, stamped(-HOUR, 2000, "old"))
    procs = [subprocess.Popen(slidewin(dsn, "-q", "jobs", "run", "--for", "4s"),
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert count(dsn) == 500  # exactly the target: no overshoot
    assert count(dsn, "SELECT sum(deleted) FROM slidewin.job_runs") == 1500  # each row once
    with psycopg.connect(dsn) as conn:
        assert_rollups_exact(conn)


def test_sigterm_stops_the_scheduler_cleanly(dsn):
    store.add_retention(dsn, RetentionPolicy(history=timedelta(seconds=30), chunk=5))
    put(dsn, stamped(-HOUR, 3000, "old"))
    proc = subprocess.Popen(slidewin(dsn, "jobs", "run"), stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stderr is not None
    first = proc.stderr.readline()
    assert "scheduler running 1 job(s)" in first
    deadline = time.monotonic() + 20
    while count(dsn) == 3000 and time.monotonic() < deadline:  # until it is mid-work
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0
    assert "Traceback" not in err and "scheduler stopped" in err


def test_jobs_run_outside_a_scheduler_refuse():
    from slidewin.jobs.errors import JobError
    from slidewin.jobs.scheduler import retention_job

    with pytest.raises(JobError, match="slidewin jobs run"):
        retention_job(name="default", history_s=1.0)


def test_scheduler_stop_flag_is_honoured_promptly(dsn):
    """The stop comes mid-work, from the third round (5000 expired rows, 4 deleted a round): the
    scheduler finishes that round, runs no other, and stops promptly, leaving the rest."""
    store.add_retention(dsn, RetentionPolicy(history=timedelta(seconds=30), chunk=1))
    put(dsn, pinned(-HOUR, 5000, "old"))
    stop = threading.Event()
    rounds: list[RoundResult] = []
    stopped_at: list[float] = []

    def on_round(result: RoundResult) -> None:
        rounds.append(result)
        if len(rounds) == 3:
            stopped_at.append(time.monotonic())
            stop.set()

    runner = threading.Thread(target=run_scheduler, args=(dsn,), kwargs={
        "stop": stop, "on_round": on_round, "clock": lambda: NOW})
    runner.start()
    runner.join(timeout=60)
    stop.set()  # whatever happened, let the thread end
    assert stopped_at and not runner.is_alive() and time.monotonic() - stopped_at[0] < 5
    assert len(rounds) == 3 and all(r.filled for r in rounds)  # mid-work: more was waiting
    assert count(dsn) == 5000 - 3 * PARTS  # and left for later


@pytest.mark.slow
def test_the_retention_job_expires_session_windows_by_their_own_retention(dsn):
    """Sessions end more than their retention (30 s) before their stream time: the retention
    job deletes them in chunks (chunk 2: several calls) though the raw rows stay (history 2 h)."""
    from slidewin.db import sessions

    with psycopg.connect(dsn, autocommit=True) as conn:
        sessions.define(conn, sessions.SessionDef("v", timedelta(seconds=5), timedelta(0),
                                                  timedelta(seconds=30)))
    put(dsn, [Event(f"k{i}", 1, NOW - HOUR + timedelta(seconds=i)) for i in range(5)])
    put(dsn, [Event("late", 1, NOW - HOUR + timedelta(minutes=5))])
    store.add_retention(dsn, RetentionPolicy(history=2 * HOUR, chunk=2))
    lines = run_for(dsn, 1.5)
    assert count(dsn, "SELECT count(*) FROM slidewin.session_store") == 1
    assert count(dsn) == 6
    assert any("5 sessions past their retention deleted" in line for line in lines), lines
    detail = count(dsn, "SELECT max((detail->>'sessions_expired')::int) FROM slidewin.job_runs")
    assert detail == 5


@pytest.mark.slow
def test_the_retention_job_nibbles_each_declared_stream_by_its_own_history(dsn):
    """A declared stream with a 30 s history loses its older events in chunks of the policy's
    size (chunk 2: several calls), a stream kept forever loses nothing, and the run says so."""
    from slidewin.db import streams
    from slidewin.db.streams import Column

    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, history in (("short", timedelta(seconds=30)), ("kept", None)):
            streams.define(conn, name, key="k", time="ts", history=history,
                           columns=[Column("k", "text"), Column("v", "bigint")], measures=["v"])
            conn.execute(
                f"INSERT INTO slidewin_streams.{name} (k, ts, v) SELECT 'k' || i, "
                "%s - i * interval '10 s', i FROM generate_series(0, 9) i", (NOW,))
    store.add_retention(dsn, RetentionPolicy(history=2 * HOUR, chunk=2))
    lines = run_for(dsn, 1.5)
    assert count(dsn, "SELECT count(*) FROM slidewin_streams.short") == 4  # 0, 10, 20, 30 s
    assert count(dsn, "SELECT sum(n) FROM slidewin_rollups.short") == 4
    assert count(dsn, "SELECT count(*) FROM slidewin_streams.kept") == 10
    assert any("stream short: 6 rows past its history deleted" in line for line in lines), lines
    detail = count(dsn, "SELECT max((detail->'streams_deleted'->>'short')::int) "
                        "FROM slidewin.job_runs")
    assert detail == 6


@pytest.mark.slow
def test_a_skipped_retention_round_says_who_holds_the_lock(dsn):
    """A second jobs process holds the retention lock: the run deletes nothing, prints one
    warning naming the holder's pid once three runs in a row were skipped (not one per run),
    records each run as skipped with the pid, and `jobs status` shows it."""
    store.add_retention(dsn, RetentionPolicy(history=HOUR / 2, yield_=timedelta(milliseconds=100)))
    put(dsn, pinned(-HOUR, 50, "old"))
    with psycopg.connect(dsn, autocommit=True) as other:
        assert other.execute("SELECT taken FROM slidewin.job_lock_take('retention')"
                             ).fetchone() == (True,)
        lines = run_for(dsn, 1.5)
        pid = other.info.backend_pid
    warned = [line for line in lines if "skipped" in line]
    assert warned == [f"warning: retention default: 3 runs in a row skipped, pid {pid} holds "
                      "the retention lock (slidewin.job_locks); no rows are deleted while it "
                      "holds it (see: slidewin jobs status)"], lines
    assert count(dsn) == 50
    with psycopg.connect(dsn, autocommit=True) as conn:
        runs = conn.execute("SELECT count(*), bool_and(skipped), "
                            "min((detail->>'held_by_pid')::int) FROM slidewin.job_runs "
                            "WHERE job = 'default'").fetchone()
    assert runs[0] >= 2 and runs[1] and runs[2] == pid
    shown = CliRunner().invoke(cli, ["--dsn", dsn, "jobs", "status"])
    assert f"skipped (pid {pid} holds the retention lock" in shown.output, shown.output
    run_for(dsn, 1.0)  # released (the other session ended): rounds run again
    assert count(dsn) == 0
