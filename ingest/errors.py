"""Errors of the ingest: each says what is wrong and the fix, and fails before Spark starts."""

from __future__ import annotations

from typing import Any

from slidewin.db.errors import ConfigError, DatabaseUnavailable, SchemaMissing, SlidewinError


class IngestError(SlidewinError):
    """The ingest could not run (a failure the user can act on)."""


class JavaUnavailable(IngestError):
    """No Java, or a Java older than 17, so Spark cannot start."""

    exit_code = 2


class BatchCancelled(IngestError):
    """Spark cancelled the batch's job -- the ingest is stopping, or Spark is shutting down --
    so the batch is neither stored nor dead-lettered: its transaction rolls back and it is
    read again when the ingest starts again."""


# Spark's words for a job it cancelled: a stop (``StreamingQuery.stop`` cancels the query's job
# group and interrupts its thread) or a SparkContext shutting down -- never a file's fault
CANCELLED_MARKS = (
    "SPARK_JOB_CANCELLED",
    "OPERATION_CANCELED",
    "SparkContext was shut down",
    "stopped SparkContext",
    "SparkContext is stopped",
    "InterruptedException",
    "ClosedByInterruptException",
)


def is_cancellation(exc: BaseException) -> bool:
    """Does this Spark failure (or one in its ``__cause__`` chain) say that Spark cancelled the
    job rather than that a file could not be read? Read from the exception's text, which holds
    the Java message (a JVM that is gone leaves py4j's own words, read as they are)."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return False
        if any(mark in _text(seen) for mark in CANCELLED_MARKS):
            return True
        seen = seen.__cause__
    return False


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a py4j error asks the JVM for its text; the JVM may be gone
        return type(exc).__name__


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
    "BatchCancelled",
    "ConfigError",
    "DatabaseUnavailable",
    "IngestError",
    "JavaUnavailable",
    "SchemaMissing",
    "SlidewinError",
    "first_line",
    "is_cancellation",
    "spark_error_text",
]
