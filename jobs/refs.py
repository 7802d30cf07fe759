"""Stored jobs' function references, kept loadable across renames of the modules they name.

APScheduler stores a job as a pickled dict whose ``func`` is a ``module:function`` text; a
scheduler that cannot import it logs an error and deletes the job. Version 0.1.0 of slidewin
named ``jobs.scheduler:*``; the packages now install as ``slidewin.*``, so those jobs would
vanish on the next ``slidewin jobs run``. ``migrate_job_refs`` rewrites them in place, in one
transaction, and is run by ``slidewin db init`` and before any scheduler opens the store.
"""

from __future__ import annotations

import pickle  # the store's own job states, written by APScheduler for slidewin
from typing import Any

import psycopg

TABLE = "slidewin.apscheduler_jobs"
RENAMED = {"jobs.scheduler:": "slidewin.jobs.scheduler:"}  # old prefix -> new prefix


def renamed(func: str) -> str | None:
    """The current name of a stored reference, or None when it needs no change."""
    for old, new in RENAMED.items():
        if func.startswith(old):
            return new + func[len(old):]
    return None


def migrate_job_refs(conn: psycopg.Connection[Any]) -> list[str]:
    """Rewrite stored jobs that name a module by its former name; the ids of those rewritten.

    Only ``func`` changes: the trigger, next run time, kwargs and paused state stay as stored
    (the state is re-pickled with the protocol APScheduler writes, its highest)."""
    if conn.execute("SELECT to_regclass(%s)", (TABLE,)).fetchone() in (None, (None,)):
        return []
    changed: list[str] = []
    with conn.transaction():
        rows = conn.execute(f"SELECT id, job_state FROM {TABLE} ORDER BY id FOR UPDATE").fetchall()
        for job_id, blob in rows:
            try:
                state = pickle.loads(blob)  # noqa: S301 -- see the import
            except (pickle.UnpicklingError, AttributeError, ImportError, EOFError, TypeError):
                continue  # not ours to mend: APScheduler reports such a job when it loads it
            new = renamed(state.get("func", "")) if isinstance(state, dict) else None
            if new is None:
                continue
            state["func"] = new
            conn.execute(f"UPDATE {TABLE} SET job_state = %s WHERE id = %s",
                         (pickle.dumps(state, pickle.HIGHEST_PROTOCOL), job_id))
            changed.append(job_id)
    return changed
