"""Session windows per key: definitions (data in the store) and the sessions they keep.

A definition is validated here and again in SQL (``slidewin.session_define``); it names its
stream (``events`` unless told), whose key column is the session key and whose time column the
event time, and the measure it aggregates (``val`` for events; a declared stream's first
required integer measure unless told; none: sessions count events only). The sessions are kept
by ``slidewin.sessions_on_insert``, a statement trigger on every insert into the stream's table,
so the ingest maintains them in each batch's own transaction and a replayed batch changes
nothing. Semantics are Kafka's (KIP-94): a session is ``[first, last]`` event of a
key; an event at most ``gap`` from a session joins it, one within ``gap`` of two bridges them;
an event older than the definition's stream time before its batch minus ``grace`` is
dead-lettered as ``late`` (source ``session:NAME``) but still stored; so a session is final --
nothing accepted can change it -- once ``end < stream time - gap - grace``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

import psycopg

from slidewin.db.connect import procedure_errors, refusal_text
from slidewin.db.errors import ConfigError, ProcedureError
from slidewin.db.limits import MAX_DURATION, MAX_DURATION_TEXT, check_duration
from slidewin.db.streams import BUILTIN
from slidewin.db.units import format_duration

NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
MAX_LIMIT = 100_000


@dataclass(frozen=True)
class SessionDef:
    """A session window definition, checked on construction (KIP-428's rules): each error
    names the option, the value and the fix."""

    name: str
    gap: timedelta
    grace: timedelta = timedelta(0)
    retention: timedelta = timedelta(hours=1)
    stream: str = BUILTIN
    measure: str | None = None  # None: the stream's default (val for events), or none

    def __post_init__(self) -> None:
        if not NAME.match(self.name):
            raise ConfigError(
                f"NAME {self.name!r} is not a session window name: use 1-40 lowercase letters, "
                "digits and _, starting with a letter (clicks_30s)"
            )
        if self.gap <= timedelta(0):
            raise ConfigError(f"--gap {_text(self.gap)} must be more than 0: use e.g. --gap 30s")
        if self.grace < timedelta(0):
            raise ConfigError(f"--grace {_text(self.grace)} must be 0 or more: use e.g. 5s")
        for option, value in (("--gap", self.gap), ("--grace", self.grace),
                              ("--retention", self.retention)):
            check_duration(option, value)  # at most 100 years: session times stay timestamps
        if self.gap + self.grace > MAX_DURATION:
            raise ConfigError(
                f"--gap plus --grace ({format_duration(self.gap + self.grace)}) is longer than "
                f"the limit of {MAX_DURATION_TEXT}, which --retention must cover; use a shorter "
                "--gap or --grace")
        if self.retention < self.gap + self.grace:
            raise ConfigError(
                f"--retention {_text(self.retention)} is shorter than --gap plus --grace "
                f"({_text(self.gap + self.grace)}): use --retention "
                f"{_text(self.gap + self.grace)} or more, so a session stays until it can close"
            )


@dataclass(frozen=True)
class SessionDefState:
    """A definition in force, with what it has done so far."""

    definition: SessionDef
    stream_ts: datetime | None
    merges: int
    late: int
    created_at: datetime

    @property
    def close_time(self) -> datetime | None:
        """Sessions ending before this are final."""
        d = self.definition
        return None if self.stream_ts is None else self.stream_ts - d.gap - d.grace


@dataclass(frozen=True)
class Session:
    """One session of a key: ``[start, end]`` are its first and last event times."""

    key: str
    start: datetime
    end: datetime
    n: int
    total: Decimal | None  # sum, min, max and avg are None for a definition without a measure
    vmin: int | None
    vmax: int | None
    avg: Decimal | None
    final: bool

    @property
    def length(self) -> timedelta:
        return self.end - self.start


@dataclass(frozen=True)
class Change:
    """What ``--emit update`` prints: a session written (``tombstone`` False) or one merged
    away into the session starting at ``merged_start``."""

    version: int
    tombstone: bool
    session: Session
    merged_start: datetime | None


@contextmanager
def session_errors() -> Iterator[None]:
    """A procedure's refusal (bad value, unknown or duplicate name) as ProcedureError."""
    with procedure_errors():
        try:
            yield
        except (psycopg.errors.UndefinedObject, psycopg.errors.DuplicateObject) as exc:
            raise ProcedureError(refusal_text(exc)) from None


def define(conn: psycopg.Connection, definition: SessionDef) -> int:
    """Register ``definition``; every insert into its stream from the next on keeps its
    sessions. Its id."""
    d = definition
    with session_errors():
        row = conn.execute(
            "SELECT slidewin.session_define(%s, %s, %s, %s, %s, %s)",
            (d.name, d.gap, d.grace, d.retention, d.stream, d.measure),
        ).fetchone()
    assert row is not None
    return int(row[0])


def remove(conn: psycopg.Connection, name: str, now: datetime) -> bool:
    """Stop keeping ``name``; its sessions leave every answer now and are deleted in chunks by
    ``expire``. False when no definition in force has that name."""
    row = conn.execute("SELECT slidewin.session_remove(%s, %s)", (name, now)).fetchone()
    return bool(row and row[0])


def definitions(conn: psycopg.Connection) -> list[SessionDefState]:
    """The definitions in force, by name."""
    rows = conn.execute(
        f"SELECT {_DEF_COLUMNS} FROM slidewin.session_defs WHERE dropped_at IS NULL ORDER BY name"
    ).fetchall()
    return [_state(r) for r in rows]


def definition(conn: psycopg.Connection, name: str | None) -> SessionDefState:
    """The definition ``name`` (None: the only one), or ProcedureError naming the fix."""
    with session_errors():
        row = conn.execute(f"SELECT {_DEF_COLUMNS} FROM slidewin.session_def(%s)", (name,)
                           ).fetchone()
    assert row is not None
    return _state(row)


_DEF_COLUMNS = "name, gap, grace, retention, stream, measure, stream_ts, merges, late, created_at"


def _state(r: tuple) -> SessionDefState:
    return SessionDefState(SessionDef(*r[:6]), r[6], r[7], r[8], r[9])


def _session(row: tuple) -> Session:
    return Session(*row[:9])


def sessions(
    conn: psycopg.Connection,
    key: str | None,
    name: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    limit: int = 1000,
) -> list[Session]:
    """The sessions of ``key`` (None: the ``limit`` ending last, of every key) overlapping
    ``[start, end)`` when given, in start order."""
    _check_limit(limit)
    with session_errors():
        rows = conn.execute(
            "SELECT * FROM slidewin.sessions(%s, %s, %s, %s, %s)", (key, name, start, end, limit)
        ).fetchall()
    return [_session(r) for r in rows]


def changes(
    conn: psycopg.Connection, name: str | None, after: int, key: str | None = None,
    limit: int = 10_000,
) -> list[Change]:
    """Sessions written and tombstones of sessions merged away after version ``after``."""
    _check_limit(limit)
    with session_errors():
        rows = conn.execute(
            "SELECT version, tombstone, uuid, start_ts, end_ts, n, sum, min, max, avg, final, "
            "merged_start FROM slidewin.session_changes(%s, %s, %s, %s)",
            (name, after, key, limit),
        ).fetchall()
    return [Change(r[0], r[1], Session(*r[2:11]), r[11]) for r in rows]


def closed(
    conn: psycopg.Connection, name: str | None, after: tuple[datetime, str] | None,
    key: str | None = None, limit: int = 10_000,
) -> list[Session]:
    """Final sessions after ``after`` = (end, key) in (end, key) order: each once."""
    _check_limit(limit)
    after_end, after_key = after if after else (None, "")
    with session_errors():
        rows = conn.execute(
            "SELECT * FROM slidewin.sessions_closed(%s, %s, %s, %s, %s)",
            (name, after_end, after_key, key, limit),
        ).fetchall()
    return [Session(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], final=True) for r in rows]


def expire(conn: psycopg.Connection, chunk: int = 10_000) -> int:
    """Delete at most ``chunk`` sessions per definition past its retention (and the sessions of
    removed definitions); the sessions deleted."""
    with procedure_errors():
        row = conn.execute("SELECT slidewin.sessions_expire(%s)", (chunk,)).fetchone()
    return int(row[0]) if row else 0


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_LIMIT:
        raise ConfigError(f"--limit {limit} must be from 1 to {MAX_LIMIT:,}")


def _text(d: timedelta) -> str:
    seconds = d.total_seconds()
    return f"{seconds:g}s"


@dataclass(frozen=True)
class SessionStats:
    """A definition at a glance: open (not final) sessions, merges, late events, the longest."""

    name: str
    stream_ts: datetime | None
    open: int
    merges: int
    late: int
    longest_key: str | None
    longest_start: datetime | None
    longest_end: datetime | None
    events: int = 0  # merged into sessions so far
    created: int = 0  # sessions created so far
    apply_seconds: float = 0.0  # spent keeping them

    @property
    def events_per_session(self) -> float | None:
        return self.events / self.created if self.created else None

    @property
    def longest(self) -> timedelta | None:
        if self.longest_start is None or self.longest_end is None:
            return None
        return self.longest_end - self.longest_start


def stats(conn: psycopg.Connection, name: str | None = None) -> SessionStats:
    """``SessionStats`` of ``name`` (None: the only definition)."""
    with session_errors():
        row = conn.execute("SELECT * FROM slidewin.session_stats(%s)", (name,)).fetchone()
    assert row is not None
    return SessionStats(*row)


def all_stats(conn: psycopg.Connection) -> list[SessionStats]:
    """``SessionStats`` of every definition in force, by name (none: an empty list)."""
    rows = conn.execute(
        "SELECT s.* FROM slidewin.session_defs d, LATERAL slidewin.session_stats(d.name) s "
        "WHERE d.dropped_at IS NULL ORDER BY d.name"
    ).fetchall()
    return [SessionStats(*r) for r in rows]


@dataclass(frozen=True)
class SessionCost:
    """What session windows cost the ingest over its newest batches (``slidewin.session_cost``)."""

    batches: int
    batch_s: float
    session_s: float

    @property
    def share(self) -> float | None:
        return self.session_s / self.batch_s if self.batch_s > 0 else None


HEAVY_SHARE = 0.5  # of the ingest's time: more, and session windows cost more than it affords
RARE_KEYS = 1.5  # events per session: fewer (over enough sessions), and keys rarely recur
RARE_KEYS_SESSIONS = 1000


def cost(conn: psycopg.Connection, batches: int = 100) -> SessionCost:
    row = conn.execute("SELECT * FROM slidewin.session_cost(%s)", (batches,)).fetchone()
    assert row is not None
    return SessionCost(int(row[0]), float(row[1]), float(row[2]))


def warnings(conn: psycopg.Connection, found: list[SessionStats] | None = None) -> list[str]:
    """What to tell a user about the session windows in force: that they take most of the
    ingest's time, and which definitions make about one session per event (keys that never
    recur), each with the fix. Empty when all is well."""
    found = all_stats(conn) if found is None else found
    if not found:
        return []
    out = []
    spent = cost(conn)
    if spent.share is not None and spent.share > HEAVY_SHARE:
        out.append(
            f"session windows took {spent.share:.0%} of the ingest's time over its last "
            f"{spent.batches} batches, more than the stream can afford: remove the definitions "
            "that do not need keeping (slidewin windows remove NAME)"
        )
    for s in found:
        per = s.events_per_session
        if per is not None and s.created >= RARE_KEYS_SESSIONS and per < RARE_KEYS:
            out.append(
                f"session window {s.name}: {per:.2f} events per session -- its keys rarely "
                "recur, so nearly every event is a session of its own; remove it (slidewin "
                f"windows remove {s.name}) unless the stream's keys recur within the gap"
            )
    return out


def stats_line(s: SessionStats) -> str:
    """One report line: open sessions, merges, late events and the longest session."""
    longest_s = None if s.longest is None else s.longest.total_seconds()
    return describe(s.name, s.open, s.merges, s.late, longest_s, s.longest_key)


def describe(
    name: str, open_: int, merges: int, late: int, longest_s: float | None, longest_key: str | None
) -> str:
    """The wording of a definition's line, for the live reports and the final summary alike."""
    longest = "none yet" if longest_s is None else f"{longest_s:.1f} s (key {longest_key})"
    return f"Sessions {name}: {open_:,} open, {merges:,} merges, {late:,} late, longest {longest}"


def ensure(conn: psycopg.Connection, definition: SessionDef) -> bool:
    """Register ``definition`` unless one of its name is in force (kept as it is). True when
    registered now."""
    row = conn.execute(
        "SELECT 1 FROM slidewin.session_defs WHERE name = %s AND dropped_at IS NULL",
        (definition.name,),
    ).fetchone()
    if row:
        return False
    define(conn, definition)
    return True
