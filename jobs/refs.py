"""Stored jobs' function references, kept loadable across renames of the modules they name.

APScheduler stores a job as a pickled dict whose ``func`` is a ``module:function`` text; a
scheduler that cannot import it logs an error and deletes the job. Version 0.1.0 of slidewin
named ``jobs.scheduler:*``; the packages now install as ``slidewin.*``, so those jobs would
vanish on the next ``slidewin jobs run``. ``migrate_job_refs`` rewrites them in place, in one
transaction, and is run by ``slidewin db init`` and before any scheduler opens the store.

It reads first and locks only the rows it rewrites, and only when this session may write the
table: a reader (``slidewin jobs status``, ``serve``'s ``/api/v1/jobs``) lists the jobs
read-only, with no ``FOR UPDATE`` (which needs UPDATE privilege) and no write.

Job states are read with ``load_state``, never with a bare ``pickle.loads``: the jobs role may
write the table (APScheduler stores each run's next time in the pickled state), and a pickle
runs any code it names when it is loaded -- in whichever process loads it: the owner's
``jobs list``, a superuser's ``jobs status``, ``serve``. ``load_state`` builds only the classes
a slidewin job state holds (APScheduler's IntervalTrigger, datetime's datetime, timedelta and
timezone) and accepts only a ``func`` naming one of slidewin's job functions (APScheduler
imports the module a job names when it loads the job).
"""

from __future__ import annotations

import io
import pickle  # job states: read through load_state only (see above)
from typing import Any

import psycopg

TABLE = "slidewin.apscheduler_jobs"
RENAMED = {"jobs.scheduler:": "slidewin.jobs.scheduler:"}  # old prefix -> new prefix
JOB_FUNCS = frozenset(f"{prefix}{kind}_job" for prefix in ("slidewin.jobs.scheduler:", *RENAMED)
                      for kind in ("retention", "refresh", "stats"))
STATE_CLASSES = frozenset({("apscheduler.triggers.interval", "IntervalTrigger"),
                           ("datetime", "datetime"), ("datetime", "timedelta"),
                           ("datetime", "timezone")})


class UnsafeJobState(pickle.UnpicklingError):
    """A stored job state that names a class or a function a slidewin job never holds."""


class _StateUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in STATE_CLASSES:
            raise UnsafeJobState(f"a stored job state names {module}.{name}, which no slidewin "
                                 "job holds; remove the job (slidewin jobs remove) and add it "
                                 "again")
        return super().find_class(module, name)


def load_state(blob: bytes, funcs: frozenset[str] = JOB_FUNCS) -> dict[str, Any]:
    """A stored job's state (APScheduler's dict), built from the classes a slidewin job holds
    only, its ``func`` one of ``funcs`` (slidewin's job functions); UnsafeJobState otherwise."""
    state = _StateUnpickler(io.BytesIO(blob)).load()
    if not isinstance(state, dict):
        raise UnsafeJobState(f"a stored job state is a {type(state).__name__}, not a dict")
    if state.get("func") not in funcs:
        raise UnsafeJobState(f"a stored job names function {state.get('func')!r}, not one of "
                             "slidewin's jobs; remove it (slidewin jobs remove)")
    return state


def renamed(func: str) -> str | None:
    """The current name of a stored reference, or None when it needs no change."""
    for old, new in RENAMED.items():
        if func.startswith(old):
            return new + func[len(old):]
    return None


def migrate_job_refs(conn: psycopg.Connection[Any]) -> list[str]:
    """Rewrite stored jobs that name a module by its former name; the ids of those rewritten.

    Only ``func`` changes: the trigger, next run time, kwargs and paused state stay as stored
    (the state is re-pickled with the protocol APScheduler writes, its highest). A session that
    may not write the table (a reader, a read-only transaction) changes nothing and gets []."""
    if not can_rewrite(conn):
        return []
    stale = [job_id for job_id, _ in _stale(conn, lock=False)]
    if not stale:
        return []
    changed: list[str] = []
    with conn.transaction():
        for job_id, state in _stale(conn, lock=True, ids=stale):
            conn.execute(f"UPDATE {TABLE} SET job_state = %s WHERE id = %s",
                         (pickle.dumps(state, pickle.HIGHEST_PROTOCOL), job_id))
            changed.append(job_id)
    return changed


def can_rewrite(conn: psycopg.Connection[Any]) -> bool:
    """True when the job table exists and this session may update it now."""
    row = conn.execute(
        "SELECT CASE WHEN to_regclass(%(t)s) IS NULL THEN false "
        "ELSE has_table_privilege(to_regclass(%(t)s), 'UPDATE') "
        "     AND current_setting('transaction_read_only') = 'off' END",
        {"t": TABLE}).fetchone()
    return bool(row and row[0])


def _stale(conn: psycopg.Connection[Any], *, lock: bool,
           ids: list[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """The stored jobs (of ``ids``, else all) whose ``func`` has a former name, with their
    state already renamed; ``lock``: their rows locked until the transaction ends."""
    query = f"SELECT id, job_state FROM {TABLE} WHERE %(ids)s::text[] IS NULL OR id = ANY(%(ids)s)"
    query += " ORDER BY id" + (" FOR UPDATE" if lock else "")
    found: list[tuple[str, dict[str, Any]]] = []
    for job_id, blob in conn.execute(query, {"ids": ids}).fetchall():
        try:
            state = load_state(blob)
        except (pickle.UnpicklingError, AttributeError, ImportError, EOFError, TypeError):
            continue  # not ours to mend: APScheduler reports such a job when it loads it
        new = renamed(state.get("func", ""))
        if new is not None:
            found.append((job_id, {**state, "func": new}))
    return found
