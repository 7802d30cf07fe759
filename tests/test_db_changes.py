"""The rollups signal their changes at commit (db.changes): inserts always; deletes only when a
second empties or loses an extreme; nothing for a rolled-back write. And the watchers built on
the signal -- max tracker, freshness poller -- query only after one.

    second T0:   a=10  b=20  c=30      delete b (not an extreme): counts change, no signal
                                       delete c (the max): signal; delete the rest: signal
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from slidewin.client.sim.freshness import FreshnessTracker
from slidewin.client.sim.generator import Batch
from slidewin.client.sim.maxtracker import MaxTracker
from slidewin.db.changes import DELETE, INSERT, RollupChanges
from slidewin.db.events import Event, insert_events
from slidewin.db.retention import nibble
from tests.conftest import T0
from tests.waiting import wait_until


def at(seconds: float):
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def listener(conn, store_dsn) -> Iterator[RollupChanges]:
    """A second session LISTENing; ``conn`` writes."""
    with psycopg.connect(store_dsn, autocommit=True) as c:
        yield RollupChanges(c)


def arrived(changes: RollupChanges, timeout_s: float = 5.0) -> set[str]:
    """What arrives within ``timeout_s`` of a commit (delivery is asynchronous: this blocks on
    the listening connection until the first notification, then takes any that came with it)."""
    return changes.wait(timeout_s)


def settle(changes: RollupChanges) -> None:
    """Nothing pending: a probe notification marks the end of what was sent before it."""
    changes.conn.execute("SELECT pg_notify('slidewin_rollups', 'probe')")
    wait_until(lambda: "probe" in arrived(changes, 1.0), 10, what="the probe notification")


def test_an_insert_signals_at_commit_and_a_rollback_does_not(conn, listener):
    with conn.transaction():
        insert_events(conn, [Event("a", 10, at(0.1))], 8)
        listener.conn.execute("SELECT 1")
        assert listener.take() == set()  # not before the commit
    assert arrived(listener) == {INSERT}
    with pytest.raises(psycopg.errors.RaiseException), conn.transaction():
        insert_events(conn, [Event("b", 20, at(0.2))], 8)
        conn.execute("DO $$ BEGIN RAISE EXCEPTION 'roll back'; END $$")
    settle(listener)
    assert listener.take() == set()


def test_deletes_signal_only_when_a_max_can_move(conn, listener):
    insert_events(conn, [Event("a", 10, at(0.1)), Event("b", 20, at(0.2)),
                         Event("c", 30, at(0.3))], 1)
    settle(listener)
    conn.execute("DELETE FROM slidewin.events WHERE uuid = 'b'")  # count and sum only
    settle(listener)
    assert listener.take() == set()
    conn.execute("DELETE FROM slidewin.events WHERE uuid = 'c'")  # the second's max
    assert arrived(listener) == {DELETE}
    assert nibble(conn, 0, at(1), None, 100) == 1  # the second empties
    assert arrived(listener) == {DELETE}
    insert_events(conn, [Event("d", 5, at(0.5))], 1)
    assert arrived(listener) == {INSERT}
    conn.execute("TRUNCATE slidewin.events")
    assert arrived(listener) == {DELETE}


def test_the_max_tracker_queries_only_after_a_change_or_a_new_second(conn, store_dsn):
    now = [at(0.5)]
    with psycopg.connect(store_dsn, autocommit=True) as tconn:
        tracker = MaxTracker(tconn, 30, clock=lambda: now[0])
        insert_events(conn, [Event("a", 300, at(0.1))], 8)
        tracker.poll()  # the first poll always queries
        assert tracker.current == 300 and tracker.queries == 1
        settle(tracker.signals)  # the insert's signal, if it came after that query, is taken
        tracker.poll()
        quiet = tracker.queries
        for _ in range(50):
            tracker.poll()
        assert tracker.queries == quiet and tracker.polls == 52  # quiet: no more queries
        insert_events(conn, [Event("b", 700, at(0.2))], 8)
        deadline = time.monotonic() + 5
        while tracker.current != 700 and time.monotonic() < deadline:
            tracker.poll()
            tracker.signals.conn.execute("SELECT 1")
        assert tracker.current == 700 and tracker.queries == quiet + 1
        now[0] = at(1.5)  # a new second: the window moved, one query
        tracker.poll()
        tracker.poll()
        assert tracker.queries == quiet + 2


def test_a_query_that_fails_after_a_signal_is_retried_at_the_next_poll(conn, store_dsn):
    now = [at(0.5)]
    with psycopg.connect(store_dsn, autocommit=True) as tconn:
        tracker = MaxTracker(tconn, 30, clock=lambda: now[0])
        insert_events(conn, [Event("a", 300, at(0.1))], 8)
        tracker.poll()
        settle(tracker.signals)
        tracker.cursor.close()  # the next query fails
        insert_events(conn, [Event("b", 700, at(0.2))], 8)
        failed, deadline = False, time.monotonic() + 5
        while not failed and time.monotonic() < deadline:
            try:
                tracker.poll()  # queries (and fails) once the insert's signal is taken
            except psycopg.Error:
                failed = True
            tconn.execute("SELECT 1")
        assert failed
        tracker.cursor = tconn.cursor()
        tracker.poll()  # same second, no new signal: still queries
        assert tracker.current == 700


def test_without_listen_the_tracker_queries_every_poll(conn):
    tracker = MaxTracker(conn, 30, clock=lambda: at(0.5), listen=False)
    for _ in range(3):
        tracker.poll()
    assert tracker.queries == 3


def test_the_freshness_poller_queries_only_after_an_insert(conn, store_dsn):
    fresh = FreshnessTracker(clock=lambda: at(3))
    fresh.add_batch(Batch(Path("f"), 2, at(0), at(1), {int(at(0).timestamp()): 2}))
    with psycopg.connect(store_dsn, autocommit=True) as fconn:
        step = fresh.poller(fconn)
        for _ in range(20):
            assert step() == 0
        assert fresh.queries == 0
        insert_events(conn, [Event("p", 1, at(0.2)), Event("q", 2, at(0.9))], 8)
        deadline = time.monotonic() + 5
        while fresh.pending_events and time.monotonic() < deadline:
            fconn.execute("SELECT 1")
            step()
        assert fresh.queries == 1 and fresh.samples[0].latency_s == pytest.approx(2.5)
