"""Opening connections: resolve the DSN (or start the embedded server), connect, map errors."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from db import embedded
from db.config import configured_dsn, data_dir, redact
from db.errors import DatabaseUnavailable, ProcedureError, SlidewinError

EMBEDDED_DATABASE = "slidewin"


def resolve_dsn(dsn: str | None = None, data: str | os.PathLike[str] | None = None) -> str:
    """The DSN to use: the configured one, else the embedded server's (started on demand)."""
    chosen = configured_dsn(dsn)
    if chosen:
        return chosen
    return ensure_embedded(data_dir(data))


def ensure_embedded(folder: Path, *, keep: bool = False) -> str:
    """Start or join the embedded server and make sure its ``slidewin`` database exists."""
    admin = embedded.embedded_dsn(folder, "postgres", keep=keep)
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (EMBEDDED_DATABASE,)
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{EMBEDDED_DATABASE}"')
    return embedded.embedded_dsn(folder, EMBEDDED_DATABASE)


def connect(dsn: str, *, autocommit: bool = False, timeout_s: int = 10) -> psycopg.Connection:
    """Connect to ``dsn``; an unreachable server becomes DatabaseUnavailable with the fix."""
    try:
        return psycopg.connect(dsn, autocommit=autocommit, connect_timeout=timeout_s)
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatabaseUnavailable(
            f"cannot connect to PostgreSQL at {redact(dsn)} ({first}); check the server is running "
            "and --dsn / SLIDEWIN_DSN is right, or unset them to use the embedded server"
        ) from None


@contextmanager
def procedure_errors() -> Iterator[None]:
    """Turn a procedure's invalid_parameter_value into ProcedureError (message kept)."""
    try:
        yield
    except (psycopg.errors.InvalidParameterValue, psycopg.errors.NullValueNotAllowed) as exc:
        diag = exc.diag
        text = diag.message_primary or str(exc)
        if diag.message_hint:
            text = f"{text} ({diag.message_hint})"
        raise ProcedureError(text) from None


__all__ = ["SlidewinError", "connect", "ensure_embedded", "procedure_errors", "resolve_dsn"]
