"""The one APScheduler internal slidewin uses: ``BaseScheduler._process_jobs``.

APScheduler 3.x's scheduler loop calls ``_process_jobs`` for each pass over the job stores (it
returns the seconds until the next pass, None for "until woken"). ``GuardedPasses`` routes that
call through ``guarded_pass``, which ``jobs.store.Scheduler`` overrides: process jobs only while
running, and survive a store that fails in the middle of a pass.

If APScheduler renames or drops ``_process_jobs`` (pyproject pins <4; 4.x is a rewrite), the
override is never called and the scheduler makes APScheduler's plain passes. Jobs still run,
and an editing scheduler still runs none (it is started paused); but a pass that fails after
reading the due jobs (a job's next run time not saved because the database went away) ends the
scheduler's loop for good, and a pass after ``shutdown()`` logs an error. ``start`` warns
(``HookMissing``) when that is so.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import BaseScheduler

HOOK = "_process_jobs"

Pass = Callable[[], float | None]


class HookMissing(RuntimeWarning):
    """This APScheduler no longer calls the method ``GuardedPasses`` overrides."""


def hook_in_place() -> bool:
    """Whether APScheduler still has the pass method ``GuardedPasses`` overrides."""
    return callable(getattr(BaseScheduler, HOOK, None))


class GuardedPasses(BackgroundScheduler):
    """A BackgroundScheduler whose every pass over the job stores goes through
    ``guarded_pass``."""

    def guarded_pass(self, process: Pass) -> float | None:
        """Override: decide whether and how ``process`` (APScheduler's pass) runs."""
        return process()

    def _process_jobs(self) -> float | None:
        return self.guarded_pass(super()._process_jobs)

    def start(self, *args: Any, **kwargs: Any) -> None:
        if not hook_in_place():
            warnings.warn(
                f"this APScheduler has no BaseScheduler.{HOOK}: slidewin's scheduler runs "
                "without its guard (a database lost in the middle of a pass stops running jobs "
                "until restarted); install apscheduler>=3.10,<4",
                HookMissing,
                stacklevel=2,
            )
        super().start(*args, **kwargs)
