"""Run-everywhere retention rounds (jobs.retention) against a real store, on a pinned clock.

Promise 3 (retention holds, up to one round of lag), promise 4 through the rounds (bounded,
every partition covered), single flight under the retention lock (slidewin.job_locks), and
exact accounting: every row inserted is either still there or counted once in some round's
``deleted``.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slidewin.db.events import Event, copy_events
from slidewin.db.retention import row_targets
from slidewin.jobs.config import RetentionPolicy
from slidewin.jobs.errors import ConnectionModeError
from slidewin.jobs.retention import (
    LOCK_NAME,
    NibblePool,
    RoundResult,
    run_round,
    run_until_caught_up,
)
from tests import jobs_fixtures
from tests.invariants import assert_rollups_exact
from tests.jobs_fixtures import at, events, load, oldest, rows_by_part, total_rows
from tests.store_fixtures import keys_in

jobs_store_dsn = jobs_fixtures.jobs_store_dsn
jconn = jobs_fixtures.jconn

PARTS = 4
S = timedelta(seconds=1)


def test_round_deletes_expired_rows_in_every_partition(jconn):
    """
    events 10/s:  |=========================|  t = 0 .. 10 s
    now = 20 s, history 15 s   -> cutoff 5 s:  rows with ts < 5 go (50 rows over 4 partitions)
    """
    load(jconn, events(0, 10, 10), PARTS)
    expect = rows_by_part_before(jconn, at(5))
    result = run_round(jconn, RetentionPolicy(history=15 * S, chunk=100), at(20))
    assert result.deleted == {p: expect.get(p, 0) for p in range(PARTS)}
    assert result.total == 50 and not result.filled and not result.skipped
    assert oldest(jconn) == at(5)
    assert set(result.nibble_ms) == set(range(PARTS))


def rows_by_part_before(conn: psycopg.Connection, cutoff: datetime) -> dict[int, int]:
    got = conn.execute(
        "SELECT part, count(*) FROM slidewin.events WHERE ts < %s GROUP BY part", (cutoff,)
    ).fetchall()
    return {int(p): int(n) for p, n in got}


def test_full_chunk_means_next_round_at_once_until_caught_up(jconn):
    load(jconn, events(0, 10, 10), PARTS)
    policy = RetentionPolicy(history=15 * S, chunk=4)
    first = run_round(jconn, policy, at(20))
    assert first.filled and all(n <= 4 for n in first.deleted.values())
    done = run_until_caught_up(jconn, policy, at(20))
    assert done.caught_up and done.rounds >= 2
    assert first.total + done.total == 50
    assert oldest(jconn) == at(5)


def test_global_row_limit_keeps_the_newest_rows_whatever_the_skew(jconn):
    """
    partition 0 (hot):  ..........|==========|  100 rows, t = 10 .. 20 s (the newest)
    partitions 1-3:     |=====|                   5 rows each, t = 0 .. 5 s (old)
    max-rows 100, split global -> the 15 old rows go; 'even' (25 each) would cut partition 0
    """
    hot = [Event(k, i, at(10 + i / 10)) for i, k in enumerate(keys_in(0, 100, "h", PARTS))]
    cold = [Event(k, i, at(i)) for p in (1, 2, 3) for i, k in enumerate(keys_in(p, 5, "c", PARTS))]
    load(jconn, hot + cold, PARTS)
    done = run_until_caught_up(jconn, RetentionPolicy(max_rows=100, chunk=7), at(30))
    assert done.caught_up and done.total == 15
    assert rows_by_part(jconn) == {0: 100}


def test_even_split_is_voltdbs_per_partition_share(jconn):
    hot = [Event(k, i, at(10 + i / 10)) for i, k in enumerate(keys_in(0, 100, "h", PARTS))]
    load(jconn, hot, PARTS)
    assert row_targets(jconn, 102, "even") == {0: 26, 1: 26, 2: 25, 3: 25}
    run_until_caught_up(jconn, RetentionPolicy(max_rows=102, split="even"), at(30))
    assert rows_by_part(jconn) == {0: 26}


@pytest.mark.slow
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    counts=st.lists(st.tuples(st.integers(0, PARTS - 1), st.integers(0, 6), st.integers(1, 9)),
                    min_size=1, max_size=12),
    max_rows=st.integers(1, 80),
)
def test_global_targets_sum_to_the_limit_and_keep_the_newest_seconds(jconn, counts, max_rows):
    """Targets sum to min(max_rows, rows); after the rounds no deleted row is in a newer second
    than a kept row (oldest first across the store, to within one second)."""
    jconn.execute(jobs_fixtures.JOBS_CLEAN_SQL)
    rows, n = [], 0
    for part, sec, count in counts:
        for k in keys_in(part, count, f"p{n}x", PARTS):
            rows.append(Event(k, n, at(sec + (n % 100) / 1000)))
            n += 1
    load(jconn, rows, PARTS)
    before = {(r[0], r[1]) for r in jconn.execute("SELECT uuid, ts FROM slidewin.events")}
    targets = row_targets(jconn, max_rows)
    assert sum(targets.values()) == min(max_rows, len(before))
    assert all(0 <= t <= rows_by_part(jconn).get(p, 0) for p, t in targets.items())
    run_until_caught_up(jconn, RetentionPolicy(max_rows=max_rows, chunk=3), at(100))
    kept = {(r[0], r[1]) for r in jconn.execute("SELECT uuid, ts FROM slidewin.events")}
    assert len(kept) == min(max_rows, len(before))
    gone = before - kept
    if gone and kept:
        second = lambda ts: ts.replace(microsecond=0)  # noqa: E731
        assert max(second(t) for _, t in gone) <= min(second(t) for _, t in kept)
    assert_rollups_exact(jconn)


def older_than(conn: psycopg.Connection, cutoff: datetime) -> int:
    row = conn.execute("SELECT count(*) FROM slidewin.events WHERE ts < %s", (cutoff,)).fetchone()
    assert row is not None
    return int(row[0])


class FakeClock:
    """A shared clock the test advances; never the wall clock."""

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, by: timedelta) -> datetime:
        with self._lock:
            self._now += by
            return self._now


def test_retention_holds_while_rows_are_inserted_concurrently(jconn, jobs_store_dsn):
    clock = FakeClock(at(0))
    inserted = [0]

    def insert() -> None:
        with psycopg.connect(jobs_store_dsn, autocommit=True) as c:
            for batch in range(150):
                start = clock.advance(timedelta(milliseconds=50))
                rows = [Event(f"b{batch:04d}-{i:02d}", i, start + timedelta(milliseconds=i))
                        for i in range(20)]
                inserted[0] += copy_events(c, rows, PARTS)

    writer = threading.Thread(target=insert)
    policy = RetentionPolicy(history=2 * S, chunk=10)
    deleted = 0
    writer.start()
    try:
        while writer.is_alive():
            done = run_until_caught_up(jconn, policy, clock.now)
            deleted += done.total
            if done.caught_up:  # every partition was nibbled to that round's cutoff
                assert older_than(jconn, done.last.now - policy.history) == 0
    finally:
        writer.join()
    final = run_until_caught_up(jconn, policy, clock.now)
    deleted += final.total
    assert older_than(jconn, final.last.now - policy.history) == 0
    assert inserted[0] == 3000 and deleted > 0
    assert total_rows(jconn) + deleted == inserted[0]  # each row counted once


@pytest.mark.parametrize(("wait", "workers"), [(True, 1), (False, 1), (True, 3)])
def test_concurrent_callers_never_double_delete_or_overshoot(
    jconn, jobs_store_dsn, wait, workers
):
    load(jconn, events(0, 20, 40), PARTS)  # 800 rows
    policy = RetentionPolicy(history=15 * S, max_rows=300, chunk=9, workers=workers)
    counts: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        pool = NibblePool(jobs_store_dsn, workers) if workers > 1 else None
        with psycopg.connect(jobs_store_dsn, autocommit=True) as c:
            try:
                caller(c, pool)
            finally:
                if pool is not None:
                    pool.close()

    def caller(c: psycopg.Connection, pool: NibblePool | None) -> None:
        for _ in range(60):
            got = run_until_caught_up(c, policy, at(20), wait=wait, pool=pool)
            with lock:
                counts.append(got.total)
            if got.caught_up:
                return

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counts.append(run_until_caught_up(jconn, policy, at(20), wait=True).total)
    assert sum(counts) == 800 - total_rows(jconn)  # nothing deleted twice or uncounted
    # history 15 s alone would keep 600 rows (t >= 5 s); max-rows is stricter: exactly 300,
    # not fewer -- an overshoot would show as fewer rows
    assert total_rows(jconn) == 300


def take_lock(conn: psycopg.Connection) -> bool:
    row = conn.execute("SELECT taken FROM slidewin.job_lock_take(%s)", (LOCK_NAME,)).fetchone()
    return bool(row and row[0])


def test_round_is_skipped_while_another_holds_the_lock_and_names_it(jconn, jobs_store_dsn):
    """A second jobs process holding the retention lock: the round deletes nothing and says
    which backend holds it; once released, the next round runs."""
    load(jconn, events(0, 10, 10), PARTS)
    with psycopg.connect(jobs_store_dsn, autocommit=True) as other:
        assert take_lock(other)
        result = run_round(jconn, RetentionPolicy(history=S), at(20))
        assert result.skipped and result.total == 0 and total_rows(jconn) == 100
        assert result.held_by == other.info.backend_pid
        caught = run_until_caught_up(jconn, RetentionPolicy(history=S), at(20))
        assert caught.skipped and caught.held_by == other.info.backend_pid
        other.execute("SELECT slidewin.job_lock_release(%s)", (LOCK_NAME,))
    assert run_round(jconn, RetentionPolicy(history=S), at(20)).total == 100


def test_a_holder_that_disconnected_holds_nothing(jconn, jobs_store_dsn):
    load(jconn, events(0, 10, 10), PARTS)
    with psycopg.connect(jobs_store_dsn, autocommit=True) as gone:
        assert take_lock(gone)  # and never released: the process died
    for _ in range(100):  # the backend of a closed connection ends a moment after
        if jconn.execute("SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = "
                         "(SELECT holder_pid FROM slidewin.job_locks WHERE name = %s))",
                         (LOCK_NAME,)).fetchone()[0]:
            break
        threading.Event().wait(0.05)
    result = run_round(jconn, RetentionPolicy(history=S), at(20))
    assert not result.skipped and result.total == 100


def test_an_advisory_lock_no_longer_stops_retention(jconn, jobs_store_dsn):
    """The advisory lock retention used to hold, taken by anyone: rounds run regardless."""
    load(jconn, events(0, 10, 10), PARTS)
    with psycopg.connect(jobs_store_dsn, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(hashtext('slidewin.retention'))")
        result = run_round(jconn, RetentionPolicy(history=S), at(20))
    assert not result.skipped and result.total == 100


def test_partition_added_during_a_run_is_covered(make_store):
    dsn = make_store(2)
    with psycopg.connect(dsn, autocommit=True) as conn:
        load(conn, events(0, 10, 20, "old"), 2)
        added: list[int] = []

        def grow(result: RoundResult) -> None:
            if not added:  # after the first round: two more partitions, with expired rows
                conn.execute("SELECT slidewin.ensure_partitions(4)")
                added.extend(
                    copy_events(conn, [Event(k, 1, at(1)) for k in keys_in(p, 30, "n", 4)], 4)
                    for p in (2, 3)
                )

        done = run_until_caught_up(
            conn, RetentionPolicy(history=5 * S, chunk=10), at(20), on_round=grow
        )
        assert added == [30, 30] and done.caught_up
        assert done.deleted[2] == 30 and done.deleted[3] == 30
        assert total_rows(conn) == 0
        assert_rollups_exact(conn)


def test_rounds_need_autocommit_and_an_aware_clock(jobs_store_dsn):
    with psycopg.connect(jobs_store_dsn) as conn:
        with pytest.raises(ConnectionModeError, match="autocommit"):
            run_round(conn, RetentionPolicy(history=S), at(0))
    with psycopg.connect(jobs_store_dsn, autocommit=True) as conn:
        with pytest.raises(ValueError, match="timezone-aware"):
            run_round(conn, RetentionPolicy(history=S), datetime(2026, 1, 1))
