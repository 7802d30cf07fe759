"""What the CLI prints when a command fails: one ``error: ...`` line naming the cause and the fix.

``describe`` turns any exception that reaches the command line into that line and an exit
code. Errors slidewin raises itself (``SlidewinError``) already carry both. The rest are the
failures a user meets without slidewin having foreseen the exact spot: PostgreSQL going away
mid-command or refusing a statement (psycopg, directly or wrapped by SQLAlchemy in the job
store), Spark or its JVM dying (PySpark / py4j, whose own ``str()`` may itself fail once the
JVM is gone), a file that cannot be read or written (OSError). Anything else is a bug, shown
as its type and first line with a pointer to ``--debug``.

Every message passes through ``scrub``: a DSN with a password is never printed, whatever the
message (a driver's, a server's, ours) happened to contain.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
from psycopg.conninfo import conninfo_to_dict

from slidewin.db.config import redact
from slidewin.db.connect import unavailable
from slidewin.db.errors import SlidewinError, fix_for_sqlstate
from slidewin.ingest.errors import first_line


def describe(exc: BaseException, dsn: str | None) -> tuple[str, int]:
    """The one-line message (without ``error: ``) and the exit code for ``exc``."""
    text, code = _describe(exc, dsn)
    return scrub(" ".join(text.split()), dsn), code


def _describe(exc: BaseException, dsn: str | None) -> tuple[str, int]:
    if isinstance(exc, SlidewinError):
        return str(exc) or type(exc).__name__, exc.exit_code
    database = _database_error(exc)
    if database is not None:
        return _database_message(database, dsn), 1
    spark = _spark_error(exc)
    if spark is not None:
        return f"spark failed: {_spark_message(spark)}", 1
    if isinstance(exc, OSError):
        return _os_message(exc), 1
    return (
        f"unexpected {type(exc).__name__}: {_safe_first_line(exc)} "
        "(rerun with --debug for the traceback)",
        1,
    )


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, newest first."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _database_error(exc: BaseException) -> psycopg.Error | None:
    """The psycopg error behind ``exc`` (SQLAlchemy's DBAPIError keeps it as ``orig``)."""
    if isinstance(exc, psycopg.Error):
        return exc
    orig = getattr(exc, "orig", None)
    if type(exc).__module__.startswith("sqlalchemy") and isinstance(orig, psycopg.Error):
        return orig
    return None


def _database_message(exc: psycopg.Error, dsn: str | None) -> str:
    first = _safe_first_line(exc)
    if _connection_lost(exc):
        if first.startswith("connection failed"):  # psycopg's words for a failed connect
            return str(unavailable(dsn, first))
        where = f" at {redact(dsn)}" if dsn else ""
        return (
            f"lost the connection to PostgreSQL{where} ({first}); check the server is "
            "running and reachable, then rerun the command"
        )
    fix = fix_for_sqlstate(exc.sqlstate)
    hint = exc.diag.message_hint
    text = f"PostgreSQL refused the command: {first}"
    if hint:
        text += f" (hint: {hint})"
    return f"{text}; {fix}" if fix else text


def _connection_lost(exc: psycopg.Error) -> bool:
    """No connection (any more): a failed connect, a dropped socket, a terminated backend."""
    if not isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return False
    state = exc.sqlstate or ""
    return not state or state.startswith(("08", "57P"))


def _spark_error(exc: BaseException) -> BaseException | None:
    """The PySpark / py4j error in ``exc``'s chain, if Spark is where it came from."""
    for link in _chain(exc):
        if any(k.__module__.split(".")[0] in ("pyspark", "py4j") for k in type(link).__mro__):
            return link
    return None


def _spark_message(exc: BaseException) -> str:
    if type(exc).__name__ == "Py4JNetworkError" or isinstance(exc, ConnectionError):
        return (
            f"the Spark JVM stopped answering ({_safe_first_line(exc)}); it was killed or ran "
            "out of memory -- see the output above (raise the driver memory or free memory), "
            "then rerun: batches not committed are read again"
        )
    return f"{type(exc).__name__}: {_safe_first_line(exc)}"


def _os_message(exc: OSError) -> str:
    reason = exc.strerror or _safe_first_line(exc)
    if exc.filename is None:
        return f"{reason} ({type(exc).__name__}); rerun with --debug for where it happened"
    names = repr(str(exc.filename))
    if exc.filename2 is not None:
        names += f" -> {str(exc.filename2)!r}"
    return f"{reason}: {names}; check the path exists and that you may read and write it"


def _safe_first_line(exc: BaseException) -> str:
    """The first meaningful line of ``exc``'s text. PySpark's ``str()`` raises once the JVM is
    gone (Python then prints ``<exception str() failed>``): fall back to its description,
    then its arguments, then its type. py4j's "An error occurred while calling o42.x" line
    says nothing: skip it."""
    for getter in (str, _description, lambda e: repr(e.args)):
        try:
            text = getter(exc)
        except Exception:  # noqa: S112 - try the next way of reading the message
            continue
        lines = [
            line.strip().removeprefix(": ")
            for line in str(text).splitlines()
            if line.strip() and not line.startswith("An error occurred while calling")
        ]
        if lines and lines[0] not in ("()", ""):
            return first_line(lines[0])
    return type(exc).__name__


def _description(exc: BaseException) -> str:
    """PySpark's own message, read without the JVM (``str()`` asks the JVM for settings)."""
    for name in ("_desc", "desc"):
        text = getattr(exc, name, None)
        if isinstance(text, str) and text.strip():
            return text
    return ""


def scrub(text: str, dsn: str | None) -> str:
    """``text`` with the DSN and its password masked (a password is never printed)."""
    if not dsn:
        return text
    text = text.replace(dsn, redact(dsn))
    try:
        password = conninfo_to_dict(dsn).get("password")
    except Exception:
        return text
    return text.replace(str(password), "***") if password else text
