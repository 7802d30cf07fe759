"""slidewin.retention_settings: the named retention policies, read and written only here.

The jobs store a row per retention job; the client simulator stores its policy as ``default``;
the ingest reads ``default`` for its ``expired`` horizon and inline limits, and the stats job for
the lag it reports. One row is a ``RetentionSettings``, holding the columns as stored (seconds,
milliseconds); ``history`` and ``yield_`` give them as durations.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import psycopg

DEFAULT_NAME = "default"  # the policy the ingest reads for its ``expired`` rule

_SELECT = (
    "SELECT name, history_s, max_rows, chunk, yield_ms FROM slidewin.retention_settings "
    "WHERE name = %s"
)
_UPSERT = (
    "INSERT INTO slidewin.retention_settings (name, history_s, max_rows, chunk, yield_ms) "
    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET "
    "history_s = EXCLUDED.history_s, max_rows = EXCLUDED.max_rows, chunk = EXCLUDED.chunk, "
    "yield_ms = EXCLUDED.yield_ms, updated_at = now()"
)
_DELETE = "DELETE FROM slidewin.retention_settings WHERE name = %s"


@dataclass(frozen=True)
class RetentionSettings:
    """One row: ``history_s`` and/or ``max_rows`` (the table refuses neither), ``chunk`` rows
    per nibble, ``yield_ms`` between rounds that found little to do."""

    name: str
    history_s: float | None
    max_rows: int | None
    chunk: int
    yield_ms: int

    @property
    def history(self) -> timedelta | None:
        return timedelta(seconds=self.history_s) if self.history_s is not None else None

    @property
    def yield_(self) -> timedelta:
        return timedelta(milliseconds=self.yield_ms)


def read_settings(conn: psycopg.Connection, name: str = DEFAULT_NAME) -> RetentionSettings | None:
    """The row named ``name``, or None when there is none."""
    row = conn.execute(_SELECT, (name,)).fetchone()
    if row is None:
        return None
    name, history_s, max_rows, chunk, yield_ms = row
    return RetentionSettings(
        name,
        float(history_s) if history_s is not None else None,
        int(max_rows) if max_rows is not None else None,
        int(chunk),
        int(yield_ms),
    )


def upsert_settings(conn: psycopg.Connection, settings: RetentionSettings) -> None:
    """Store ``settings`` under its name, replacing the row of that name if there is one."""
    conn.execute(
        _UPSERT,
        (settings.name, settings.history_s, settings.max_rows, settings.chunk, settings.yield_ms),
    )


def delete_settings(conn: psycopg.Connection, name: str) -> None:
    """Drop the row named ``name`` (nothing happens when there is none)."""
    conn.execute(_DELETE, (name,))


@dataclass(frozen=True)
class PolicySnapshot:
    """Retention policy ``name`` as a command found it: its settings row and the scheduler's
    job of that name (the row APScheduler stores: next run time and pickled state), each None
    when there was none. ``restore_policy`` puts both back as they were, byte for byte."""

    name: str
    settings: RetentionSettings | None
    job: tuple[float | None, bytes] | None


_JOB_SELECT = "SELECT next_run_time, job_state FROM slidewin.apscheduler_jobs WHERE id = %s"
_JOB_UPSERT = (
    "INSERT INTO slidewin.apscheduler_jobs (id, next_run_time, job_state) VALUES (%s, %s, %s) "
    "ON CONFLICT (id) DO UPDATE SET next_run_time = EXCLUDED.next_run_time, "
    "job_state = EXCLUDED.job_state"
)


def snapshot_policy(conn: psycopg.Connection, name: str = DEFAULT_NAME) -> PolicySnapshot:
    """Policy ``name`` (settings and scheduled job) as it is now, for ``restore_policy``."""
    row = conn.execute(_JOB_SELECT, (name,)).fetchone()
    job = None if row is None else (row[0], bytes(row[1]))
    return PolicySnapshot(name, read_settings(conn, name), job)


def restore_policy(conn: psycopg.Connection, saved: PolicySnapshot) -> None:
    """Put policy ``saved.name`` back as ``snapshot_policy`` found it, in one transaction: the
    settings row and the job restored, or removed when there were none. Run it when no
    scheduler is running the job (one would write its next run time back)."""
    with conn.transaction():
        if saved.settings is None:
            delete_settings(conn, saved.name)
        else:
            upsert_settings(conn, saved.settings)
        if saved.job is None:
            conn.execute("DELETE FROM slidewin.apscheduler_jobs WHERE id = %s", (saved.name,))
        else:
            conn.execute(_JOB_UPSERT, (saved.name, *saved.job))


def describe_policy(saved: PolicySnapshot) -> str:
    """``retention policy 'default' (history 30s, max rows 1000)`` or ``... none``: how a
    command reports what it put back."""
    s = saved.settings
    if s is None:
        return f"retention policy '{saved.name}': none"
    limits = [f"history {s.history_s:g}s" if s.history_s is not None else "",
              f"max rows {s.max_rows}" if s.max_rows is not None else ""]
    job = ", its job scheduled" if saved.job is not None else ""
    return f"retention policy '{saved.name}' ({', '.join(x for x in limits if x)}{job})"
