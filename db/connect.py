"""Opening connections: resolve the DSN (or start the embedded server), connect, map errors."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from slidewin.db import embedded
from slidewin.db.config import configured_dsn, data_dir, redact
from slidewin.db.errors import DatabaseUnavailable, ProcedureError, SlidewinError

EMBEDDED_DATABASE = "slidewin"
# What CREATE DATABASE raises when another session created the same name first.
_CREATE_RACE = (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation)


def resolve_dsn(dsn: str | None = None, data: str | os.PathLike[str] | None = None) -> str:
    """The DSN to use: the configured one, else the embedded server's (started on demand)."""
    chosen = configured_dsn(dsn)
    if chosen:
        return chosen
    return ensure_embedded(data_dir(data))


def ensure_embedded(folder: Path, *, keep: bool = False) -> str:
    """Start or join the embedded server and make sure its ``slidewin`` database exists."""
    admin = embedded.embedded_dsn(folder, "postgres", keep=keep)
    with _connect_embedded(admin, folder) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (EMBEDDED_DATABASE,)
        ).fetchone()
        if not exists:
            # Commands started together on a fresh data dir race to create it; one wins.
            with contextlib.suppress(*_CREATE_RACE):
                conn.execute(f'CREATE DATABASE "{EMBEDDED_DATABASE}"')
    return embedded.embedded_dsn(folder, EMBEDDED_DATABASE)


def _connect_embedded(admin: str, folder: Path) -> psycopg.Connection:
    try:
        return psycopg.connect(admin, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DatabaseUnavailable(
            f"the embedded PostgreSQL in {embedded.pgdata(folder)} does not answer ({first}); "
            "run slidewin db stop and try again, or pass --dsn to use another server"
        ) from None


def connect(dsn: str, *, autocommit: bool = False, timeout_s: int = 10) -> psycopg.Connection:
    """Connect to ``dsn``; an unreachable server becomes DatabaseUnavailable with the fix."""
    try:
        return psycopg.connect(dsn, autocommit=autocommit, connect_timeout=timeout_s)
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise unavailable(dsn, first) from None


def unavailable(dsn: str | None, reason: str) -> DatabaseUnavailable:
    """The error for a server that cannot be reached, with the fix (the password masked)."""
    where = f" at {redact(dsn)}" if dsn else ""
    return DatabaseUnavailable(
        f"cannot connect to PostgreSQL{where} ({reason}); check the server is running "
        "and --dsn / SLIDEWIN_DSN is right, or unset them to use the embedded server"
    )


class ThreadConnections:
    """One autocommit connection per thread, opened on first use (and again once closed or
    broken) and prepared by ``setup``; ``close_all`` closes every one (psycopg connections are
    not shared across threads)."""

    def __init__(
        self, dsn: str, setup: Callable[[psycopg.Connection], object] = lambda _c: None
    ) -> None:
        self._dsn, self._setup = dsn, setup
        self._local = threading.local()
        self._opened: list[psycopg.Connection] = []
        self._lock = threading.Lock()

    def get(self) -> psycopg.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.broken:
            conn = connect(self._dsn, autocommit=True)
            self._setup(conn)
            self._local.conn = conn
            with self._lock:
                self._opened.append(conn)
        return conn

    def drop(self) -> None:
        """Close this thread's connection (the next ``get`` opens a fresh one)."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def close_all(self) -> None:
        with self._lock:
            for conn in self._opened:
                conn.close()
            self._opened.clear()


@contextmanager
def procedure_errors() -> Iterator[None]:
    """Turn a procedure's invalid_parameter_value into ProcedureError (message kept)."""
    try:
        yield
    except (psycopg.errors.InvalidParameterValue, psycopg.errors.NullValueNotAllowed) as exc:
        raise ProcedureError(refusal_text(exc)) from None


def refusal_text(exc: psycopg.Error) -> str:
    """A procedure's refusal as one line: its message, then its hint (the fix) in brackets."""
    diag = exc.diag
    text = diag.message_primary or str(exc)
    return f"{text} ({diag.message_hint})" if diag.message_hint else text


__all__ = [
    "SlidewinError", "ThreadConnections", "connect", "ensure_embedded", "procedure_errors",
    "refusal_text", "resolve_dsn", "unavailable",
]
