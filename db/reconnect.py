"""Waiting for a database that went away: one policy, one predicate, one waiter.

Long-running commands (the ingest, ``slidewin jobs run``, the client) keep working through a
PostgreSQL restart or a dropped connection: the code that hit the error asks ``Reconnector.wait``
to block until the server answers again, then opens a new connection and carries on (the ingest
writes the same batch again; its batch marker makes that exactly once).

The waiter probes with a fresh connection, backing off exponentially (0.2 s doubling to 5 s by
default) until the server answers or ``--reconnect-timeout`` passes, and prints one line per
state change -- lost, still waiting (at most every 30 s), back -- never one per probe.

Several threads share one ``Reconnector``: the first to notice leads the wait and prints; the
others wait for its outcome, so a restart prints its lines once, not once per thread. A thread
whose connection died in an outage that has already ended finds the server answering at once
and reconnects silently.

One deadline for the whole process: once a wait has given up, every later wait (another
stream's next batch, another thread) fails at once with the same error, instead of waiting
out ``--reconnect-timeout`` again in turn.

A command that is idle (an ingest with no file arriving) would not hit an error at all: its
``Heartbeat`` runs ``SELECT 1`` on a connection of its own at most every ``HEARTBEAT_EVERY_S``
and hands a lost database to the same waiter, so the outage is said, waited for, and given up
on after ``--reconnect-timeout`` as if a batch had found it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta

import psycopg

from slidewin.db.config import redact
from slidewin.db.errors import ConfigError, DatabaseUnavailable

DEFAULT_TIMEOUT = timedelta(minutes=3)
# SQLSTATEs of a server going away: 57P01 admin_shutdown (pg_ctl stop -m fast, a terminated
# backend), 57P02 crash_shutdown, 57P03 cannot_connect_now (starting up or shutting down);
# class 08 is connection_exception.
LOST_STATES = frozenset({"57P01", "57P02", "57P03"})
QUIET_AFTER_S = 60.0  # a connection that died in an outage ended this recently reconnects silently
PROBE_TIMEOUT_S = 5
HEARTBEAT_EVERY_S = 5.0


@dataclass(frozen=True)
class ReconnectPolicy:
    """How long to wait for a lost database, and how often to look (``--reconnect-timeout``).

    ``timeout`` 0 fails at once, as before this existed."""

    timeout: timedelta = DEFAULT_TIMEOUT
    initial_backoff: timedelta = timedelta(milliseconds=200)
    max_backoff: timedelta = timedelta(seconds=5)
    still_every: timedelta = timedelta(seconds=30)

    def __post_init__(self) -> None:
        if self.timeout < timedelta(0):
            raise ConfigError(
                f"--reconnect-timeout {fmt_duration(self.timeout)} is negative; use e.g. 3m, "
                "or 0 to fail at once"
            )
        if self.initial_backoff <= timedelta(0):
            raise ConfigError(
                f"initial backoff {fmt_duration(self.initial_backoff)} must be positive, "
                "e.g. 200ms"
            )
        if self.max_backoff < self.initial_backoff:
            raise ConfigError(
                f"max backoff {fmt_duration(self.max_backoff)} is below the initial backoff "
                f"{fmt_duration(self.initial_backoff)}; use e.g. 5s"
            )
        if self.still_every <= timedelta(0):
            raise ConfigError(f"still_every {fmt_duration(self.still_every)} must be positive")

    def delays(self) -> Iterator[float]:
        """The pauses between probes, in seconds: initial, doubling, capped at max."""
        delay = self.initial_backoff.total_seconds()
        cap = self.max_backoff.total_seconds()
        while True:
            yield delay
            delay = min(delay * 2, cap)


def is_connection_lost(exc: BaseException) -> bool:
    """True when ``exc`` (or its explicit cause) says the database went away: a refused or
    dropped connection, a server shutting down or starting up. Errors with another SQLSTATE
    (a cancelled statement, a lock timeout, a full disk) are not: waiting would not fix them."""
    seen: BaseException | None = exc
    while seen is not None:
        if _lost(seen):
            return True
        seen = seen.__cause__
    return False


def _lost(exc: BaseException) -> bool:
    if isinstance(exc, DatabaseUnavailable):
        return True
    if not isinstance(exc, psycopg.Error):
        return False
    state = exc.sqlstate
    if state:
        return state.startswith("08") or state in LOST_STATES
    # no SQLSTATE: libpq's own error (refused, closed, broken) or a closed connection object
    return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)


def probe(dsn: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Connect and run one query; raises what psycopg raises when the server does not answer."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=max(1, round(timeout_s))) as conn:
        conn.execute("SELECT 1")


class _Episode:
    """One outage as its leader sees it; followers wait for ``done`` and share the outcome."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.failure: BaseException | None = None


class Reconnector:
    """Waits for the database at ``dsn`` (see the module docstring); thread-safe.

    ``stop`` set (SIGTERM, Ctrl-C) ends a wait at once with DatabaseUnavailable. ``clock``,
    ``sleep`` and ``check`` are injectable so tests need neither a real outage nor real pauses;
    ``sleep`` returns True when the wait should end early."""

    def __init__(
        self,
        dsn: str,
        policy: ReconnectPolicy,
        progress: Callable[[str], None],
        *,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], bool] | None = None,
        check: Callable[[], None] | None = None,
    ) -> None:
        self.dsn, self.policy, self.progress = dsn, policy, progress
        self.stop = stop or threading.Event()
        self.clock = clock
        self.sleep = sleep or self.stop.wait
        self.check = check or (lambda: probe(dsn))
        self.outages = 0  # episodes in which the server really did not answer
        self.gave_up: DatabaseUnavailable | None = None  # set when a wait timed out
        self._lock = threading.Lock()
        self._episode: _Episode | None = None
        self._ended_at: float | None = None

    def wait(self, error: BaseException) -> None:
        """Block until the database answers again after ``error``; raise DatabaseUnavailable
        (naming --reconnect-timeout and the fix) when it does not within the timeout."""
        with self._lock:
            episode, leader = self._episode, self._episode is None
            if leader:
                episode = self._episode = _Episode()
        assert episode is not None
        if not leader:
            episode.done.wait()
            if episode.failure is not None:
                raise episode.failure
            return
        try:
            self._lead(error)
        except BaseException as exc:
            episode.failure = exc
            raise
        finally:
            with self._lock:
                self._episode, self._ended_at = None, self.clock()
            episode.done.set()

    def _lead(self, error: BaseException) -> None:
        timeout_s = self.policy.timeout.total_seconds()
        if self.gave_up is not None:  # the process's one deadline has passed
            raise DatabaseUnavailable(str(self.gave_up))
        if self.stop.is_set():  # stopping: no new wait, no new lines
            raise self._stopped()
        if timeout_s <= 0:
            raise self._gave_up(error, "--reconnect-timeout is 0")
        started = self.clock()
        if self._answers() is None:
            self._reconnected_at_once(error, started)
            return
        self.outages += 1
        self.progress(
            f"database lost ({redact(self.dsn)}: {error_line(error)}); retrying for up to "
            f"{fmt_duration(self.policy.timeout)}"
        )
        self._retry(error, started, timeout_s)

    def _retry(self, error: BaseException, started: float, timeout_s: float) -> None:
        last_said = started
        for delay in self.policy.delays():
            left = timeout_s - (self.clock() - started)
            if left <= 0:
                raise self._gave_up(error, f"not back within {fmt_duration(self.policy.timeout)}")
            if self.sleep(min(delay, left)):
                raise self._stopped()
            failure = self._answers()
            now = self.clock()
            if failure is None:
                self.progress(f"database back after {now - started:.1f}s")
                return
            error = failure
            if now - last_said >= self.policy.still_every.total_seconds():
                last_said = now
                self.progress(
                    f"database still unreachable after {now - started:.0f}s "
                    f"({error_line(failure)}); retrying"
                )

    def _answers(self) -> BaseException | None:
        """None when the server answers, else the error that says it does not."""
        try:
            self.check()
        except Exception as exc:
            if not is_connection_lost(exc):
                raise
            return exc
        return None

    def _reconnected_at_once(self, error: BaseException, started: float) -> None:
        """The server answers: a connection dropped on its own (a terminated backend), or one
        that died in an outage another thread already waited out -- say so only for the first."""
        recent = self._ended_at is not None and started - self._ended_at < QUIET_AFTER_S
        if not recent:
            self.progress(f"database connection lost ({error_line(error)}); reconnected")

    def _stopped(self) -> DatabaseUnavailable:
        return DatabaseUnavailable(f"stopped while waiting for the database at {redact(self.dsn)}")

    def _gave_up(self, error: BaseException, why: str) -> DatabaseUnavailable:
        self.gave_up = DatabaseUnavailable(
            f"lost the database at {redact(self.dsn)} ({error_line(error)}) and gave up: {why}; "
            "start PostgreSQL (or fix the network) and run the command again, or pass a longer "
            "--reconnect-timeout (e.g. 10m)"
        )
        return self.gave_up


class Heartbeat:
    """``SELECT 1`` on a connection of its own, at most every ``every_s`` seconds (``clock``
    monotonic, injectable); a database found gone goes to ``reconnect`` (see the module
    docstring). Not thread-safe: one caller, the command's main loop."""

    def __init__(
        self,
        dsn: str,
        reconnect: Reconnector,
        *,
        every_s: float = HEARTBEAT_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.dsn, self.reconnect, self.every_s, self.clock = dsn, reconnect, every_s, clock
        self._conn: psycopg.Connection | None = None
        self._last: float | None = None

    def beat(self) -> bool:
        """Check the database if a check is due; True when it checked (and it answered, at
        once or after a wait). Raises DatabaseUnavailable when it did not come back within
        ``--reconnect-timeout`` (or the wait was stopped); other errors as they come."""
        now = self.clock()
        if self._last is not None and now - self._last < self.every_s:
            return False
        self._last = now
        try:
            self._connection().execute("SELECT 1")
        except Exception as exc:
            self.close()
            if not is_connection_lost(exc):
                raise
            self.reconnect.wait(exc)
            self._last = self.clock()  # the wait just saw it answer
        return True

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = psycopg.connect(
                self.dsn, autocommit=True, connect_timeout=PROBE_TIMEOUT_S
            )
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


def error_line(exc: BaseException) -> str:
    """The first non-blank line of an error (psycopg's run to several), or its type; for an
    error SQLAlchemy wrapped (the job store's), the driver's own."""
    orig = getattr(exc, "orig", None)
    if isinstance(orig, BaseException):
        exc = orig
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0][:300] if lines else type(exc).__name__


def fmt_duration(value: timedelta) -> str:
    """``3m``, ``90s``, ``1.5s``, ``200ms``: the way the options are typed."""
    seconds = value.total_seconds()
    if 0 < seconds < 1:
        return f"{seconds * 1000:g}ms"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"
