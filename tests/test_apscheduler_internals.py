"""``jobs.apscheduler_internals`` on real PostgreSQL: the scheduler's passes go through the
guard, and with APScheduler's private pass method renamed (as a new APScheduler might) the
scheduler warns and still runs the stored jobs, unguarded."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from apscheduler.schedulers.base import STATE_STOPPED, BaseScheduler
from apscheduler.schedulers.blocking import TIMEOUT_MAX, BlockingScheduler

from slidewin.jobs import apscheduler_internals, store
from slidewin.jobs.scheduler import run_scheduler


@pytest.fixture
def dsn(make_store) -> str:
    return make_store(4)


@pytest.fixture
def guarded(monkeypatch) -> list[str]:
    """The scheduler passes that went through ``Scheduler.guarded_pass``."""
    passes: list[str] = []
    real = store.Scheduler.guarded_pass

    def counted(self, process):
        passes.append("editing" if self.editing else "running")
        return real(self, process)

    monkeypatch.setattr(store.Scheduler, "guarded_pass", counted)
    return passes


@pytest.fixture
def hook_renamed(monkeypatch) -> None:
    """APScheduler with ``_process_jobs`` renamed: its loop calls the new name."""
    monkeypatch.setattr(BaseScheduler, "_process_due_jobs", BaseScheduler._process_jobs,
                        raising=False)
    monkeypatch.delattr(BaseScheduler, apscheduler_internals.HOOK)

    def main_loop(self):  # BlockingScheduler._main_loop, calling the renamed pass
        wait_seconds = TIMEOUT_MAX
        while self.state != STATE_STOPPED:
            self._event.wait(wait_seconds)
            self._event.clear()
            wait_seconds = self._process_due_jobs()

    monkeypatch.setattr(BlockingScheduler, "_main_loop", main_loop)


def recorded_runs(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM slidewin.job_runs WHERE error IS NULL")
        return int(row.fetchone()[0])


def test_this_apscheduler_has_the_hook_and_passes_go_through_the_guard(dsn, guarded):
    assert apscheduler_internals.hook_in_place()
    store.add_periodic(dsn, "refresh", timedelta(milliseconds=300))
    run_scheduler(dsn, duration=timedelta(seconds=1.5))
    assert "running" in guarded
    assert recorded_runs(dsn) >= 1


def test_without_the_hook_the_scheduler_warns_and_still_runs_the_jobs(
    dsn, guarded, hook_renamed
):
    assert not apscheduler_internals.hook_in_place()
    with pytest.warns(apscheduler_internals.HookMissing, match="_process_jobs"):
        store.add_periodic(dsn, "refresh", timedelta(milliseconds=300))
        assert recorded_runs(dsn) == 0  # the editing scheduler ran nothing: it starts paused
        run_scheduler(dsn, duration=timedelta(seconds=1.5))
    assert guarded == []  # the guard is bypassed ...
    assert recorded_runs(dsn) >= 1  # ... and the job ran all the same
