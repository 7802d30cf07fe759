"""Errors of the ingest: each says what is wrong and the fix, and fails before Spark starts."""

from __future__ import annotations

from typing import Any

from slidewin.db.errors import ConfigError, DatabaseUnavailable, SchemaMissing, SlidewinError


class IngestError(SlidewinError):
    """The ingest could not run (a failure the user can act on)."""


class JavaUnavailable(IngestError):
    """No Java, or a Java older than 17, so Spark cannot start."""

    exit_code = 2


def first_line(text: str) -> str:
    """The first non-blank line of an error's text (Spark's run to pages), at most 500 chars."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0][:500] if lines else "unknown error"


# wrappers whose message says nothing of the cause: the chain is followed past them
_GENERIC = ("Exception thrown in awaitResult", "Job aborted due to stage failure")


def spark_error_text(exc: BaseException) -> str:
    """A Spark failure in words: for a Java exception, the first message in its cause chain that
    is not a generic wrapper, plus the root cause when that says more -- not py4j's "An error
    occurred while calling o123.getResult" nor a JVM stack trace."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return first_line(str(exc))
    try:
        messages = _chain_messages(java)
    except Exception:  # the JVM may be gone: py4j's own text is all there is
        return first_line(str(exc))
    useful = [m for m in messages if m and not m.startswith(_GENERIC)]
    if not useful:
        return first_line(str(exc))
    text = useful[0] if useful[-1] in useful[0] else f"{useful[0]}; cause: {useful[-1]}"
    return first_line(text.split(" SQLSTATE:")[0])


def _chain_messages(java: Any, limit: int = 10) -> list[str]:
    """A Java throwable's messages down its cause chain (``java`` is a py4j proxy)."""
    messages: list[str] = []
    current = java
    while current is not None and len(messages) < limit:
        message = current.getMessage()
        messages.append(" ".join(str(message).split()) if message is not None else "")
        cause = current.getCause()
        current = None if cause is None or cause.equals(current) else cause
    return messages


__all__ = [
    "ConfigError",
    "DatabaseUnavailable",
    "IngestError",
    "JavaUnavailable",
    "SchemaMissing",
    "SlidewinError",
    "first_line",
    "spark_error_text",
]
