"""slidewin.rollups_seconds (every partition's second in one row) stays exact when nibbles of
different partitions delete from the same seconds at once -- the retention job's "run
everywhere" -- each taking a second's minimum or maximum that the other one's rows held.

One deleter holds the second's row lock in an open transaction; the other, on another
partition, waits for it, then must recount the extremes from what the first committed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

from slidewin.db.limits import partition_table
from tests.invariants import assert_rollups_exact
from tests.store_fixtures import PARTS, at, keys_in, put

CLEAN = ("TRUNCATE slidewin.events, slidewin.dead_letters, slidewin.ingest_batches, "
         "slidewin.stream_state, slidewin.retention_state")


@pytest.fixture
def dsn(make_store) -> Iterator[str]:
    yield make_store(PARTS)


def seconds_row(conn: psycopg.Connection, second: int) -> tuple | None:
    return conn.execute("SELECT n, total, vmin, vmax FROM slidewin.rollups_seconds "
                        "WHERE sec = %s", (at(second),)).fetchone()


def _delete(dsn: str, part: int, where: str, started: threading.Event,
            errors: list[BaseException]) -> None:
    try:
        with psycopg.connect(dsn) as conn:
            started.set()
            conn.execute(f"DELETE FROM {partition_table(part)} WHERE {where}")
            conn.commit()
    except BaseException as exc:  # reported by the test
        errors.append(exc)


@pytest.mark.parametrize("first", [0, 1])
def test_parallel_deletes_of_two_partitions_keep_the_seconds_exact(dsn: str, first: int) -> None:
    a, b = keys_in(0, 3), keys_in(1, 3)
    with psycopg.connect(dsn, autocommit=True) as conn:
        # second 5: partition 0 holds the minimum (-100) and partition 1 the maximum (100);
        # each deleter takes its partition's extreme and one ordinary row
        put(conn, [(a[0], -100, at(5.1)), (a[1], 7, at(5.2)), (a[2], 9, at(5.3)),
                   (b[0], 100, at(5.4)), (b[1], 8, at(5.5)), (b[2], -3, at(5.6)),
                   (a[0], 1, at(6.1)), (b[0], 2, at(6.2))])
        assert seconds_row(conn, 5) == (6, 21, -100, 100)
    wheres = {0: "val IN (-100, 7)", 1: "val IN (100, -3)"}
    other = 1 - first
    with psycopg.connect(dsn) as holder:  # the first deleter, its transaction left open
        holder.execute(f"DELETE FROM {partition_table(first)} WHERE {wheres[first]}")
        started, errors = threading.Event(), []
        waiter = threading.Thread(target=_delete, args=(dsn, other, wheres[other], started,
                                                        errors))
        waiter.start()
        started.wait(10)
        waiter.join(0.5)
        assert waiter.is_alive()  # waits for the second's row, held by the first
        holder.commit()
    waiter.join(30)
    assert not waiter.is_alive() and errors == []
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert seconds_row(conn, 5) == (2, 17, 8, 9)
        assert seconds_row(conn, 6) == (2, 3, 1, 2)
        assert_rollups_exact(conn)
        conn.execute("DELETE FROM slidewin.events WHERE ts < %s", (at(6),))
        assert seconds_row(conn, 5) is None  # an emptied second has no row
        assert_rollups_exact(conn)


def test_a_partition_truncated_leaves_the_others_seconds(dsn: str) -> None:
    a, b = keys_in(0, 2), keys_in(2, 2)
    with psycopg.connect(dsn, autocommit=True) as conn:
        put(conn, [(a[0], 5, at(1.1)), (a[1], 50, at(2.1)), (b[0], 7, at(1.2)),
                   (b[1], -7, at(3.3))])
        conn.execute(f"TRUNCATE {partition_table(0)}")
        assert conn.execute("SELECT sec, n, total, vmin, vmax FROM slidewin.rollups_seconds "
                            "ORDER BY sec").fetchall() == [(at(1), 1, 7, 7, 7),
                                                           (at(3), 1, -7, -7, -7)]
        assert_rollups_exact(conn)
        conn.execute(CLEAN)
        assert conn.execute("SELECT count(*) FROM slidewin.rollups_seconds").fetchone() == (0,)
