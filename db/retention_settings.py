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
