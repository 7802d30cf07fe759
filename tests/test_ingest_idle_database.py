"""An idle ingest notices that its database died: ``db.reconnect.Heartbeat`` runs ``SELECT 1``
every few seconds on a connection of its own and hands a lost server to the reconnect waiter,
which says so, waits, and gives up after --reconnect-timeout. Against a PostgreSQL of the
test's own that the test stops (never the shared one); clocks are pinned, nothing sleeps."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from slidewin.db.errors import DatabaseUnavailable
from slidewin.db.reconnect import Heartbeat, Reconnector, ReconnectPolicy
from slidewin.ingest.runner import _wait
from tests.restartable_pg import RestartablePostgres

# slow: every test stops or restarts a PostgreSQL of its own
pytestmark = pytest.mark.slow


class FakeTime:
    """A monotonic clock that moves only when told to, or when the waiter sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> bool:
        self.now += seconds
        return False


def heartbeat(dsn: str, fake: FakeTime, lines: list[str], timeout_s: float = 15.0,
              sleep=None, stop: threading.Event | None = None) -> Heartbeat:
    policy = ReconnectPolicy(timeout=timedelta(seconds=timeout_s))
    reconnect = Reconnector(dsn, policy, lines.append, stop=stop, clock=fake.clock,
                            sleep=sleep or fake.sleep)
    return Heartbeat(dsn, reconnect, every_s=5.0, clock=fake.clock)


@pytest.fixture
def dsn(own_server: RestartablePostgres) -> str:
    return own_server.database()


def test_an_idle_heartbeat_gives_up_on_a_stopped_database_after_the_reconnect_timeout(
    own_server, dsn
):
    fake, lines = FakeTime(), []
    beat = heartbeat(dsn, fake, lines)
    assert beat.beat()
    own_server.stop()
    fake.now += 5.0
    with pytest.raises(DatabaseUnavailable, match=r"gave up: not back within 15s.*"
                       r"--reconnect-timeout"):
        beat.beat()
    assert lines[0].startswith("database lost ("), lines
    assert lines[0].endswith("retrying for up to 15s"), lines
    assert fake.now - 1005.0 >= 15.0  # it waited the whole timeout first


def test_the_heartbeat_checks_at_most_every_few_seconds(own_server, dsn):
    fake, lines = FakeTime(), []
    beat = heartbeat(dsn, fake, lines)
    assert beat.beat()
    own_server.stop()
    fake.now += 4.9
    assert not beat.beat()  # not due: no query, so no error yet
    assert lines == []


def test_the_heartbeat_waits_for_a_database_that_comes_back(own_server, dsn):
    fake, lines = FakeTime(), []

    def sleep(seconds: float) -> bool:
        fake.now += seconds
        if not own_server.running:
            own_server.start()  # back during the first pause
        return False

    beat = heartbeat(dsn, fake, lines, sleep=sleep)
    assert beat.beat()
    own_server.stop()
    fake.now += 5.0
    assert beat.beat()
    assert lines[0].startswith("database lost ("), lines
    assert lines[-1].startswith("database back after"), lines
    fake.now += 5.0
    assert beat.beat()  # on a new connection
    beat.close()


class IdleQuery:
    """A streaming query with no file arriving: active, no failure, nothing to wait for."""

    isActive = True

    def awaitTermination(self, _timeout: float) -> None:
        return None

    def exception(self) -> None:
        return None


def test_an_idle_ingest_loop_ends_with_the_reconnect_error_when_its_database_died(
    own_server, dsn
):
    fake, lines = FakeTime(), []
    beat = heartbeat(dsn, fake, lines)
    assert beat.beat()
    own_server.stop()
    fake.now += 5.0
    stop = threading.Event()
    with pytest.raises(DatabaseUnavailable, match="gave up"):
        _wait([IdleQuery()], [object()], stop, beat.reconnect, None, beat)
    assert any(line.startswith("database lost") for line in lines), lines


def test_a_stop_during_the_wait_ends_the_ingest_loop_cleanly(own_server, dsn):
    fake, lines, stop = FakeTime(), [], threading.Event()

    def sleep(seconds: float) -> bool:
        fake.now += seconds
        stop.set()  # SIGTERM while waiting for the database
        return True

    beat = heartbeat(dsn, fake, lines, sleep=sleep, stop=stop)
    assert beat.beat()
    own_server.stop()
    fake.now += 5.0
    _wait([IdleQuery()], [object()], stop, beat.reconnect, None, beat)
    assert stop.is_set()
