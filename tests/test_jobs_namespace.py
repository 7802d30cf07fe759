"""Jobs stored by the version before the ``slidewin.`` namespace keep running after an upgrade.

tests/fixtures/jobs_before_namespace.sql holds the stored jobs (two retention jobs, a paused
refresh job, a stats job) and retention settings that version wrote, naming
``jobs.scheduler:*_job``. APScheduler deletes a job whose function it cannot import, so
without the rename those jobs would vanish on the next ``slidewin jobs run``: the first test
shows that, the others that ``slidewin db init`` (and any scheduler opening the store) renames
them and that they then run as before.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from slidewin.client.cli import cli
from slidewin.db.events import Event, copy_events
from slidewin.jobs.refs import migrate_job_refs
from slidewin.jobs.scheduler import run_scheduler
from tests.waiting import wait_until

FIXTURE = Path(__file__).parent / "fixtures" / "jobs_before_namespace.sql"
JOBS = {"default": "retention", "hourly": "retention", "refresh": "refresh", "stats": "stats"}


@pytest.fixture
def old_jobs(make_store: Callable[..., str]) -> str:
    dsn = make_store(2)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(FIXTURE.read_text(encoding="utf-8"))
    return dsn


def funcs(dsn: str) -> dict[str, str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT id, job_state FROM slidewin.apscheduler_jobs").fetchall()
    return {job_id: pickle.loads(blob)["func"] for job_id, blob in rows}


# APScheduler's own store, without the rename, where a user's process runs: not in the source
# tree (this test's process has it on sys.path, where the old name would still import)
LOAD_RAW = """
import sys
from slidewin.jobs.store import make_engine, make_jobstore
raw = make_jobstore(make_engine(sys.argv[1]))
raw.start(None, "default")
print(len(raw.get_all_jobs()))
"""


@pytest.mark.slow
def test_without_the_rename_apscheduler_drops_the_old_jobs(
        old_jobs: str, tmp_path: Path) -> None:
    assert set(funcs(old_jobs).values()) == {
        "jobs.scheduler:retention_job", "jobs.scheduler:refresh_job", "jobs.scheduler:stats_job"}
    done = subprocess.run([sys.executable, "-c", LOAD_RAW, old_jobs], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["0"], done.stderr[-2000:]
    assert "No module named 'jobs'" in done.stderr  # APScheduler's log line for each job
    assert funcs(old_jobs) == {}  # deleted from the store


def test_db_init_renames_them_and_keeps_everything_else(old_jobs: str) -> None:
    with psycopg.connect(old_jobs, autocommit=True) as conn:
        before = conn.execute("SELECT id, next_run_time FROM slidewin.apscheduler_jobs "
                              "ORDER BY id").fetchall()
    done = CliRunner().invoke(cli, ["--dsn", old_jobs, "db", "init"])
    assert done.exit_code == 0, done.output
    assert "stored jobs default, hourly, refresh, stats now name slidewin.jobs" in done.output
    assert funcs(old_jobs) == {
        name: f"slidewin.jobs.scheduler:{kind}_job" for name, kind in JOBS.items()}
    with psycopg.connect(old_jobs, autocommit=True) as conn:
        after = conn.execute("SELECT id, next_run_time FROM slidewin.apscheduler_jobs "
                             "ORDER BY id").fetchall()
        assert after == before  # the refresh job still paused (NULL), the others' times kept
        assert migrate_job_refs(conn) == []  # a second init has nothing to do
    listed = json.loads(CliRunner().invoke(
        cli, ["--dsn", old_jobs, "jobs", "list", "--json"]).stdout)["jobs"]
    assert {j["name"]: j["kind"] for j in listed} == JOBS
    shown = {j["name"]: j for j in listed}
    assert shown["refresh"]["paused"] and not shown["default"]["paused"]
    assert shown["default"]["kwargs"]["history_s"] == 30.0
    assert shown["default"]["kwargs"]["max_rows"] == 1_000_000
    assert shown["hourly"]["kwargs"]["history_s"] == 120.0


@pytest.mark.slow
def test_the_renamed_jobs_run(old_jobs: str) -> None:
    """Straight to ``jobs run`` without ``db init``: the scheduler renames before it loads."""
    now = datetime.now(UTC)
    old = [Event(f"{i:08x}-0000-4000-8000-000000000000", i, now - timedelta(hours=1))
           for i in range(300)]
    with psycopg.connect(old_jobs, autocommit=True) as conn:
        copy_events(conn, old, 2)
    stop = threading.Event()
    runner = threading.Thread(target=run_scheduler, args=(old_jobs,),
                              kwargs={"stop": stop, "report": lambda _line: None})
    runner.start()

    def deleted_and_ran() -> tuple[tuple[int, ...] | None, dict[str, int]] | None:
        with psycopg.connect(old_jobs, autocommit=True) as conn:
            left = conn.execute("SELECT count(*) FROM slidewin.events").fetchone()
            ran = dict(conn.execute("SELECT job, count(*) FROM slidewin.job_runs GROUP BY job")
                       .fetchall())
        done = left == (0,) and ran.get("default", 0) > 0 and ran.get("hourly", 0) > 0
        return (left, ran) if done else None

    try:
        # the old default job (history 30 s) deletes the hour-old events; both jobs record runs
        _left, ran = wait_until(deleted_and_ran, 60, 0.2, "the renamed jobs' first rounds")
    finally:
        stop.set()
        runner.join(60)
    assert "refresh" not in ran  # still paused
    assert funcs(old_jobs) == {
        name: f"slidewin.jobs.scheduler:{kind}_job" for name, kind in JOBS.items()}
