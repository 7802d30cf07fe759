"""Emptying the store for a fresh start (``slidewin db reset``), keeping what was defined.

Data goes: raw events, the rollups of every grain, dead letters, the ingest's batch markers and
stream state (its watermark), retention's progress, session windows' sessions and tombstones,
the jobs' run history, the counters /metrics reports (a reset restarts them, as a process
restart does). Definitions stay: the schema and partition count, retention policies
(``retention_settings``), session window definitions, the scheduler's jobs -- what a person
typed to set the store up, which a fresh start should not make them type again. A session
window definition keeps its name, gap, grace and retention but starts again from nothing: its
stream time (against which later events would be late), its counts and its longest session go,
and definitions already removed go with their sessions. Everything happens in one transaction,
so a reader sees the store full or empty, never half. A join reading ``events`` keeps results
the reset would leave without their records: the reset is refused, naming the join to drop.

A store something is writing to is not reset: an ingest keeps its checkpoints in memory and
would carry on from them, and its next batch would stand alone. ``other_sessions`` lists the
other connections to the database, and the command refuses while there are any.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import psycopg
from psycopg import sql

from slidewin.db.connect import refusal_text
from slidewin.db.errors import ProcedureError

DATA_TABLES = (
    "events", "rollups", "rollups_coarse", "dead_letters", "ingest_batches", "stream_state",
    "retention_state", "session_store", "session_tombstones", "job_runs", "counters",
)
KEPT_TABLES = ("config", "schema_version", "retention_settings", "session_defs",
               "apscheduler_jobs")
LOCK_TIMEOUT = "5s"  # a reset waits this long for a lock, then fails rather than queue writers


@dataclass(frozen=True)
class Session:
    """Another connection to the store's database."""

    pid: int
    application: str
    client: str

    def describe(self) -> str:
        who = self.application or "a client"
        return f"{who} (pid {self.pid}{', from ' + self.client if self.client else ''})"


SETTLE_S = 2.0  # a connection closed a moment ago may still be listed while its backend exits


def other_sessions(conn: psycopg.Connection, settle_s: float = SETTLE_S) -> list[Session]:
    """The database's other client connections (an ingest, a scheduler, psql, ...); those
    that go within ``settle_s`` -- a backend still exiting after its client closed -- are not
    counted."""
    deadline = time.monotonic() + settle_s
    while True:
        rows = conn.execute(
            "SELECT pid, coalesce(application_name, ''), coalesce(host(client_addr), '') "
            "FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend' ORDER BY pid"
        ).fetchall()
        if not rows or time.monotonic() >= deadline:
            return [Session(pid, app, client) for pid, app, client in rows]
        time.sleep(0.1)


# a session window definition's progress over the events (see the module docstring); its
# version stays: it only ever grows, and followers read changes "since a version"
_RESTART_SESSION_DEFS = (
    "UPDATE slidewin.session_defs SET stream_ts = NULL, base_ts = NULL, base_xid = NULL, "
    "merges = 0, late = 0, longest_key = NULL, longest_start = NULL, longest_end = NULL, "
    "events = 0, created = 0, apply_seconds = 0"
)


def reset_store(conn: psycopg.Connection) -> tuple[str, ...]:
    """Empty ``DATA_TABLES``, start the session window definitions afresh and refresh the
    minute history, in one transaction; returns the tables emptied. ``conn`` must not be
    inside a transaction already."""
    tables = sql.SQL(", ").join(sql.Identifier("slidewin", name) for name in DATA_TABLES)
    with conn.transaction():
        conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(LOCK_TIMEOUT)))
        try:
            conn.execute(sql.SQL("TRUNCATE {}").format(tables))
        except psycopg.errors.ObjectInUse as exc:  # a join reads events: its results would stay
            raise ProcedureError(f"db reset: {refusal_text(exc)}") from None
        conn.execute("DELETE FROM slidewin.session_defs WHERE dropped_at IS NOT NULL")
        conn.execute(_RESTART_SESSION_DEFS)
        conn.execute("REFRESH MATERIALIZED VIEW slidewin.minute_history")
    return DATA_TABLES
