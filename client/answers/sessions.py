"""Session window answers: the definitions in force with what each has kept (``windows list``)
and a definition's sessions (``windows sessions``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from slidewin.client.answers.windows import iso, number
from slidewin.db import clock, sessions
from slidewin.db.errors import ConfigError


def def_json(d: sessions.SessionDef) -> dict[str, Any]:
    return {"kind": "session", "name": d.name, "stream": d.stream, "measure": d.measure,
            "gap_s": d.gap.total_seconds(), "grace_s": d.grace.total_seconds(),
            "retention_s": d.retention.total_seconds()}


def stats_json(s: sessions.SessionStats) -> dict[str, Any]:
    longest = None if s.longest is None else s.longest.total_seconds()
    return {"stream_time": iso(s.stream_ts), "open": s.open, "merges": s.merges,
            "late": s.late, "longest_s": longest, "longest_key": s.longest_key,
            "events": s.events, "sessions_created": s.created,
            "events_per_session": s.events_per_session, "seconds_spent": s.apply_seconds}


def session_json(s: sessions.Session) -> dict[str, Any]:
    return {"key": s.key, "start": s.start.isoformat(), "end": s.end.isoformat(),
            "length_s": s.length.total_seconds(), "n": s.n, "sum": number(s.total),
            "min": s.vmin, "max": s.vmax, "avg": None if s.avg is None else float(s.avg),
            "final": s.final}


@dataclass(frozen=True)
class Definitions:
    """``windows list``: every definition in force and its stats, and what to warn about."""

    defs: list[sessions.SessionDefState]
    stats: dict[str, sessions.SessionStats]
    warnings: list[str]

    def as_json(self) -> dict[str, Any]:
        return {"sessions": [{**def_json(d.definition), **stats_json(self.stats[d.definition.name])}
                             for d in self.defs], "warnings": self.warnings}


def definitions(conn: psycopg.Connection, stream: str | None = None) -> Definitions:
    """Every definition in force, or those of ``stream`` (the dashboard's stream's)."""
    defs = [d for d in sessions.definitions(conn)
            if stream is None or d.definition.stream == stream]
    names = {d.definition.name for d in defs}
    found = [s for s in sessions.all_stats(conn) if s.name in names]
    warnings = sessions.warnings(conn, found)
    return Definitions(defs, {s.name: s for s in found}, warnings)


@dataclass(frozen=True)
class Sessions:
    """``windows sessions``: the sessions of one definition (of one key, or every key's)."""

    state: sessions.SessionDefState
    key: str | None
    found: list[sessions.Session]
    warnings: list[str]

    def as_json(self) -> dict[str, Any]:
        return {"name": self.state.definition.name, "key": self.key,
                "stream_time": iso(self.state.stream_ts), "close_time": iso(self.state.close_time),
                "sessions": [session_json(s) for s in self.found]}


def check_request(key: str | None, from_: datetime | None, to: datetime | None,
                  last: timedelta | None) -> None:
    """What ``windows sessions`` refuses before it connects."""
    if key is not None and not 1 <= len(key) <= 200:
        raise ConfigError(f"--key must be 1 to 200 characters, got {len(key)}")
    if last is not None and (from_ is not None or to is not None):
        raise ConfigError("--last and --from/--to both given; use one of them")


def since(state: sessions.SessionDefState, from_: datetime | None, to: datetime | None,
          last: timedelta | None) -> tuple[datetime | None, datetime | None]:
    """The range asked for: ``last`` ends at the definition's stream time (or now)."""
    if last is None:
        return from_, to
    return (state.stream_ts or clock.utc_now()) - last, None


def session_list(conn: psycopg.Connection, name: str | None, key: str | None = None,
                 from_: datetime | None = None, to: datetime | None = None,
                 last: timedelta | None = None, limit: int = 1000) -> Sessions:
    """The sessions of definition ``name`` (None: the only one) of ``key`` (None: the
    ``limit`` ending last, of every key) overlapping the range."""
    check_request(key, from_, to, last)
    state = sessions.definition(conn, name)
    start, end = since(state, from_, to, last)
    found = sessions.sessions(conn, key, state.definition.name, start, end, limit)
    return Sessions(state, key, found, sessions.warnings(conn))
