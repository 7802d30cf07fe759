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
