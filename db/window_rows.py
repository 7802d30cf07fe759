"""Window series read through a server-side cursor: memory stays flat with the number of windows.

``streamed`` opens a transaction, caps it with ``statement_timeout`` (the last guard behind the
work limit the SQL functions check before they start, ``slidewin.check_window_work``), declares
a scrollable cursor over the query and fetches its first batch -- so a refusal (a bad option,
too much work) or a timeout is raised before the caller prints anything. Then ``Rows`` yields
the windows ``batch`` at a time; ``count()`` tells how many there are without keeping them
(the server counts, then the cursor goes back to where it was).

    with windows.open_series(conn, "hopping", size=..., advance=..., start=..., end=...) as found:
        print(found.count(), "windows")
        for w in found:
            ...
"""

from __future__ import annotations

import contextlib
import itertools
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any, Generic, TypeVar

import psycopg
from psycopg import sql

from slidewin.db.connect import refusal_text
from slidewin.db.errors import ProcedureError, WindowTimeout

T = TypeVar("T")
U = TypeVar("U")

# statement_timeout of a streamed window query, unless the session's own is shorter
TIMEOUT = timedelta(minutes=1)
BATCH = 2000  # rows per FETCH
TIMEOUT_FIX = "ask for less: a shorter range, a larger advance or fewer rows"
REFUSALS: tuple[type[psycopg.Error], ...] = (
    psycopg.errors.InvalidParameterValue, psycopg.errors.NullValueNotAllowed)


@contextlib.contextmanager
def window_errors(refusals: tuple[type[psycopg.Error], ...] = REFUSALS) -> Iterator[None]:
    """A refusal as ProcedureError (exit code 2), statement_timeout as WindowTimeout: one line
    each, the fix in brackets. A cancel for another reason stays as it was."""
    try:
        yield
    except refusals as exc:
        raise ProcedureError(refusal_text(exc)) from None
    except psycopg.errors.QueryCanceled as exc:
        said = exc.diag.message_primary or ""
        if "statement_timeout" in said:  # the window function's own words (window_timed_out)
            raise WindowTimeout(refusal_text(exc)) from None
        if "statement timeout" in said:  # PostgreSQL's, outside the window functions
            raise WindowTimeout(f"the window query ran longer than statement_timeout and was "
                                f"cancelled ({TIMEOUT_FIX})") from None
        raise


class Rows(Generic[T]):
    """The rows of one streamed window query, in order, ``batch`` at a time. Iterate once."""

    def __init__(self, conn: psycopg.Connection, cur: psycopg.ServerCursor[Any],
                 first: Sequence[Any], make: Callable[[Any], T],
                 refusals: tuple[type[psycopg.Error], ...]) -> None:
        self._conn, self._cur, self._first, self._make = conn, cur, first, make
        self._refusals = refusals
        self._count: int | None = None

    def count(self) -> int:
        """How many rows there are in all (read once, by the server; none kept here)."""
        if self._count is None:
            name = sql.Identifier(self._cur.name)
            with window_errors(self._refusals):
                rest = self._conn.execute(sql.SQL("MOVE FORWARD ALL FROM {}").format(name))
                self._count = len(self._first) + max(rest.rowcount, 0)
                self._conn.execute(sql.SQL("MOVE ABSOLUTE {} FROM {}").format(
                    sql.Literal(len(self._first)), name))
        return self._count

    def map(self, f: Callable[[T], U]) -> Rows[U]:
        """The same rows, each passed through ``f``."""
        make = self._make
        return Rows(self._conn, self._cur, self._first, lambda row: f(make(row)),
                    self._refusals)

    def __iter__(self) -> Iterator[T]:
        for row in self._first:
            yield self._make(row)
        if len(self._first) < max(self._cur.itersize, 1):
            return  # the first batch was all of it
        with window_errors(self._refusals):
            while True:
                batch = self._cur.fetchmany(self._cur.itersize)
                yield from (self._make(row) for row in batch)
                if len(batch) < self._cur.itersize:
                    return


@contextlib.contextmanager
def streamed(
    conn: psycopg.Connection, query: str, args: Sequence[object], make: Callable[[Any], T], *,
    timeout: timedelta | None = TIMEOUT, batch: int = BATCH,
    refusals: tuple[type[psycopg.Error], ...] = REFUSALS,
) -> Iterator[Rows[T]]:
    """``query``'s rows through a server-side cursor, in a transaction of their own (a
    savepoint when one is open), capped by ``timeout`` (None: the session's statement_timeout
    alone). The first batch is read before this yields: errors come before any output."""
    with conn.transaction():
        if timeout is not None:
            cap = max(int(timeout.total_seconds() * 1000), 1)
            conn.execute(
                "SELECT set_config('statement_timeout', "
                "least(nullif(setting::bigint, 0), %s)::text, true) "
                "FROM pg_settings WHERE name = 'statement_timeout'", (cap,))
        with conn.cursor(name=f"slidewin_windows_{uuid.uuid4().hex[:12]}",
                         scrollable=True) as cur:
            cur.itersize = batch
            with window_errors(refusals):
                cur.execute(query, args)
                first = cur.fetchmany(batch)
            yield Rows(conn, cur, first, make, refusals)


def take(rows: Rows[T], limit: int | None) -> Iterator[T]:
    """The first ``limit`` rows (all when None)."""
    return iter(rows) if limit is None else itertools.islice(rows, limit)
