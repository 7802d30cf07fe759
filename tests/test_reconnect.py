"""The reconnect policy and waiter (``db.reconnect``): backoff and timeout on an injected clock,
one line per state change, one wait shared by threads, and the predicate on real errors from a
real server the test stops (its own, never the shared one)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest

from slidewin.db.connect import connect
from slidewin.db.errors import ConfigError, DatabaseUnavailable
from slidewin.db.reconnect import (
    Reconnector,
    ReconnectPolicy,
    fmt_duration,
    is_connection_lost,
)
from tests.restartable_pg import RestartablePostgres, restartable_postgres
from tests.waiting import wait_until

DSN = "postgresql://app:secret@db.example:5432/store"
LOST = psycopg.OperationalError("connection refused\n\tIs the server running?")


class FakeTime:
    """A clock that only moves when the waiter sleeps; records each pause."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> bool:
        self.sleeps.append(seconds)
        self.now += seconds
        return False


def waiter(
    fake: FakeTime, answers_after_s: float | None, timeout: str = "3m"
) -> tuple[Reconnector, list[str]]:
    """A Reconnector whose server answers once the fake clock passed ``answers_after_s``."""
    lines: list[str] = []
    start = fake.now

    def check() -> None:
        if answers_after_s is None or fake.now - start < answers_after_s:
            raise psycopg.OperationalError("connection refused")

    minutes = {"3m": 180, "10s": 10, "0": 0}[timeout]
    policy = ReconnectPolicy(timeout=timedelta(seconds=minutes))
    rec = Reconnector(DSN, policy, lines.append, clock=fake.clock, sleep=fake.sleep, check=check)
    return rec, lines


def test_backoff_doubles_from_200ms_and_caps_at_5s():
    delays = ReconnectPolicy().delays()
    assert [next(delays) for _ in range(8)] == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]


def test_waits_with_backoff_then_prints_back_once():
    fake = FakeTime()
    rec, lines = waiter(fake, answers_after_s=4.0)
    rec.wait(LOST)
    assert fake.sleeps == [0.2, 0.4, 0.8, 1.6, 3.2]  # the probe after 6.2 s answers
    assert lines == [
        "database lost (user=app password=*** dbname=store host=db.example port=5432: "
        "connection refused); retrying for up to 3m",
        "database back after 6.2s",
    ]
    assert rec.outages == 1


def test_gives_up_at_the_timeout_naming_the_option_and_the_fix():
    fake = FakeTime()
    rec, lines = waiter(fake, answers_after_s=None, timeout="10s")
    with pytest.raises(DatabaseUnavailable) as caught:
        rec.wait(LOST)
    assert sum(fake.sleeps) == pytest.approx(10.0)  # the last pause is cut to the deadline
    assert fake.sleeps[-1] < 5.0
    message = str(caught.value)
    assert "--reconnect-timeout" in message and "start PostgreSQL" in message
    assert "secret" not in message and "password=***" in message
    assert len(lines) == 1 and lines[0].startswith("database lost")


def test_once_a_wait_gave_up_every_later_wait_fails_at_once():
    """One deadline for the whole process: another stream's batch (or another thread) meeting
    the outage after the first wait gave up does not wait the timeout out again -- each
    stream in turn made a 15 s timeout give up after 38 s."""
    fake = FakeTime()
    rec, lines = waiter(fake, answers_after_s=None, timeout="10s")
    with pytest.raises(DatabaseUnavailable):
        rec.wait(LOST)
    waited = list(fake.sleeps)
    with pytest.raises(DatabaseUnavailable, match="gave up: not back within 10s"):
        rec.wait(LOST)
    assert fake.sleeps == waited  # no second wait
    assert len(lines) == 1  # and no second "database lost" line


def test_still_waiting_is_said_at_most_every_30s():
    fake = FakeTime()
    rec, lines = waiter(fake, answers_after_s=100.0)
    rec.wait(LOST)
    still = [line for line in lines if "still unreachable" in line]
    assert 2 <= len(still) <= 3  # ~100 s of waiting: at 30 s, 60 s, 90 s at most
    assert lines[-1].startswith("database back after 10")


def test_timeout_zero_fails_at_once_without_probing():
    fake = FakeTime()
    rec, lines = waiter(fake, answers_after_s=0.0, timeout="0")
    with pytest.raises(DatabaseUnavailable, match="--reconnect-timeout is 0"):
        rec.wait(LOST)
    assert fake.sleeps == [] and lines == []


def test_a_server_that_answers_at_once_is_a_dropped_connection_said_once():
    fake = FakeTime()
    rec, lines = waiter(fake, answers_after_s=0.0)
    rec.wait(LOST)
    rec.wait(LOST)  # a second stale connection, just after: silent
    assert lines == ["database connection lost (connection refused); reconnected"]
    assert rec.outages == 0 and fake.sleeps == []


def test_stop_ends_the_wait():
    stop = threading.Event()
    stop.set()
    rec = Reconnector(DSN, ReconnectPolicy(), lambda _l: None, stop=stop,
                      check=lambda: (_ for _ in ()).throw(LOST))
    with pytest.raises(DatabaseUnavailable, match="stopped while waiting"):
        rec.wait(LOST)


def test_threads_share_one_wait_and_its_lines():
    lines: list[str] = []
    back = threading.Event()
    probes = []

    def check() -> None:
        probes.append(1)
        if not back.is_set():
            raise psycopg.OperationalError("connection refused")

    policy = ReconnectPolicy(initial_backoff=timedelta(milliseconds=10),
                             max_backoff=timedelta(milliseconds=20))
    rec = Reconnector(DSN, policy, lines.append, check=check)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            rec.wait(LOST)
        except BaseException as exc:  # pragma: no cover - reported by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    wait_until(lambda: len(probes) >= 5, 10, interval_s=0.01, what="five probes of the database")
    back.set()
    for t in threads:
        t.join(10)
    assert errors == []
    assert [line.split(" (")[0].split(" after")[0] for line in lines] == [
        "database lost", "database back"
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"timeout": timedelta(seconds=-1)}, "--reconnect-timeout -1s is negative"),
        ({"initial_backoff": timedelta(0)}, "initial backoff 0s must be positive"),
        ({"max_backoff": timedelta(milliseconds=100)}, "max backoff 100ms is below"),
    ],
)
def test_policy_is_validated(value, message):
    with pytest.raises(ConfigError, match=message):
        ReconnectPolicy(**value)


def test_durations_print_as_typed():
    assert [fmt_duration(timedelta(seconds=s)) for s in (180, 90, 1.5, 0.2, 0)] == [
        "3m", "90s", "1.5s", "200ms", "0s"
    ]


# -- the predicate on real errors ------------------------------------------------------------


@pytest.fixture(scope="module")
def own_server() -> Iterator[RestartablePostgres]:
    with restartable_postgres() as pg:
        yield pg


@pytest.mark.slow
def test_predicate_on_real_errors(own_server: RestartablePostgres):
    dsn = own_server.admin_dsn
    with psycopg.connect(dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as syntax:
            conn.execute("SELEKT 1")
        assert not is_connection_lost(syntax.value)
        with pytest.raises(psycopg.Error) as cancelled:
            conn.execute("SET statement_timeout = '10ms'; SELECT pg_sleep(1)")
        assert cancelled.value.sqlstate == "57014"
        assert not is_connection_lost(cancelled.value)  # waiting would not fix a timeout
        conn.execute("SET statement_timeout = 0")

        own_server.stop()
        try:
            with pytest.raises(psycopg.OperationalError) as dropped:
                conn.execute("SELECT 1")
            assert is_connection_lost(dropped.value)
            with pytest.raises(psycopg.OperationalError) as closed:
                conn.execute("SELECT 1")  # the connection is now broken for good
            assert is_connection_lost(closed.value)
            with pytest.raises(psycopg.OperationalError) as refused:
                psycopg.connect(dsn, connect_timeout=2)
            assert is_connection_lost(refused.value)
            with pytest.raises(DatabaseUnavailable) as unavailable:
                connect(dsn, timeout_s=2)
            assert is_connection_lost(unavailable.value)
        finally:
            own_server.start()
    assert not is_connection_lost(ValueError("connection refused"))


@pytest.mark.slow
def test_terminated_backend_is_lost(own_server: RestartablePostgres):
    dsn = own_server.admin_dsn
    with psycopg.connect(dsn, autocommit=True) as victim, \
            psycopg.connect(dsn, autocommit=True) as admin:
        pid = victim.info.backend_pid
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(psycopg.OperationalError) as caught:
            victim.execute("SELECT 1")
    assert is_connection_lost(caught.value)


@pytest.mark.slow
def test_waits_through_a_real_restart(own_server: RestartablePostgres):
    lines: list[str] = []
    policy = ReconnectPolicy(timeout=timedelta(seconds=60))
    rec = Reconnector(own_server.admin_dsn, policy, lines.append)
    own_server.stop()
    restarter = threading.Timer(2.0, own_server.start)
    restarter.start()
    try:
        rec.wait(LOST)
    finally:
        restarter.join()
    assert lines[0].startswith("database lost (")
    assert lines[-1].startswith("database back after ")
    assert float(lines[-1].split()[-1].rstrip("s")) >= 1.5
    with psycopg.connect(own_server.admin_dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
