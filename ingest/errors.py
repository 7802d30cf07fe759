"""Errors of the ingest: each says what is wrong and the fix, and fails before Spark starts."""

from __future__ import annotations

from db.errors import ConfigError, DatabaseUnavailable, SchemaMissing, SlidewinError


class IngestError(SlidewinError):
    """The ingest could not run (a failure the user can act on)."""


class JavaUnavailable(IngestError):
    """No Java, or a Java older than 17, so Spark cannot start."""

    exit_code = 2


def first_line(text: str) -> str:
    """The first non-blank line of an error's text (Spark's run to pages), at most 500 chars."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0][:500] if lines else "unknown error"


__all__ = [
    "ConfigError",
    "DatabaseUnavailable",
    "IngestError",
    "JavaUnavailable",
    "SchemaMissing",
    "SlidewinError",
    "first_line",
]
