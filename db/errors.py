"""Errors of the database layer. Messages are lowercase, name the bad value, and say the fix."""

from __future__ import annotations


class SlidewinError(Exception):
    """Base of every error slidewin reports to a user (the CLI prints it without a traceback)."""

    exit_code = 1


class ConfigError(SlidewinError):
    """A bad option or setting; the message names it and the fix."""

    exit_code = 2


class DatabaseUnavailable(SlidewinError):
    """PostgreSQL could not be reached or started."""


class SchemaMissing(SlidewinError):
    """The slidewin schema is absent or older than this code expects."""


class ProcedureError(SlidewinError):
    """A procedure refused its arguments (PostgreSQL invalid_parameter_value)."""

    exit_code = 2


class WindowTimeout(SlidewinError):
    """A window query ran past statement_timeout and was cancelled; the message names the fix."""


DB_INIT_FIX = "the slidewin schema is missing or older than this slidewin: run `slidewin db init`"
# SQLSTATE (or its two-character class) of a statement PostgreSQL refused -> the fix to name
SQLSTATE_FIXES = {
    "3F000": DB_INIT_FIX,  # invalid_schema_name
    "42P01": DB_INIT_FIX,  # undefined_table
    "42883": DB_INIT_FIX,  # undefined_function
    "42703": DB_INIT_FIX,  # undefined_column
    "42501": "connect as a role with the privilege (e.g. the database's owner)",
    "25006": "the server is read-only (a standby?): point --dsn at the primary",
    "53": "the server is out of a resource (disk, memory, connections): free it and rerun",
    "40": "another transaction conflicted with this one: rerun the command",
    "57": "the server cancelled the statement or is shutting down: rerun when it is up",
}


def fix_for_sqlstate(sqlstate: str | None) -> str | None:
    """The fix for a refused statement, by its SQLSTATE, when there is a general one."""
    state = sqlstate or ""
    return SQLSTATE_FIXES.get(state) or SQLSTATE_FIXES.get(state[:2])
