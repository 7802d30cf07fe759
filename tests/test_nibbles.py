"""Contract tests for the nibble procedures (promise 4) and their inline variants.

Each procedure deletes at most ``chunk`` of the oldest rows of one partition in (ts, uuid) order,
makes progress whenever there is work, deletes the same rows given the same state and arguments,
and returns how many rows it deleted. Bad arguments raise errors naming the parameter and value.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

import psycopg
import pytest

from slidewin.db import retention, windows
from slidewin.db.connect import procedure_errors
from slidewin.db.errors import ProcedureError
from tests import store_fixtures
from tests.invariants import assert_rollups_exact
from tests.store_fixtures import PARTS, Row, at, keys_in, oldest_first, put, rows_of

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn

CUTOFF = at(100)  # later than every row below: age alone would delete everything

# Each nibble entry point, reduced to "delete from part with this chunk, everything qualifies".
Nibbler = Callable[[psycopg.Connection, int, int], int]
NIBBLERS: dict[str, Nibbler] = {
    "delete_after_date": lambda c, p, n: retention.delete_after_date(c, p, CUTOFF, n),
    "delete_oldest_to_target": lambda c, p, n: retention.delete_oldest_to_target(c, p, 0, n),
    "delete_to_limits": lambda c, p, n: retention.delete_to_limits(c, p, CUTOFF, 0, n),
    "nibble_age_only": lambda c, p, n: retention.nibble(c, p, CUTOFF, None, n),
    "nibble_rows_only": lambda c, p, n: retention.nibble(c, p, None, 0, n),
}


def _inline_after_date(c: psycopg.Connection, p: int, n: int) -> int:
    key = keys_in(p, 1, prefix="z")[0]  # a fresh, newer event: it never qualifies itself
    return _scalar(c, "SELECT slidewin.insert_and_delete_after_date(%s, 1, %s, %s, %s)",
                   (key, at(200), CUTOFF, n))


def _inline_to_target(c: psycopg.Connection, p: int, n: int) -> int:
    key = keys_in(p, 1, prefix="z")[0]
    return _scalar(c, "SELECT slidewin.insert_and_delete_oldest_to_target(%s, 1, %s, 1, %s)",
                   (key, at(200), n))


INLINE: dict[str, Nibbler] = {
    "insert_and_delete_after_date": _inline_after_date,
    "insert_and_delete_oldest_to_target": _inline_to_target,
}


def _scalar(conn: psycopg.Connection, query: str, args: tuple[object, ...] = ()) -> int:
    row = conn.execute(query, args).fetchone()
    assert row is not None
    return row[0]


def _without_inline_key(rows: list[Row]) -> list[Row]:
    return [r for r in rows if not r[0].startswith("z")]


# --- the cap ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [*NIBBLERS, *INLINE])
def test_chunk_is_a_hard_cap_when_many_rows_share_one_timestamp(sconn, name):
    # VoltDB deletes every row tied with the chunk's last timestamp; ours stops at the chunk,
    # taking the ties in uuid order.
    tied = [(k, i, at(0)) for i, k in enumerate(keys_in(0, 40))]
    other = [(k, 7, at(0)) for k in keys_in(1, 5)]
    put(sconn, tied + other)
    deleted = {**NIBBLERS, **INLINE}[name](sconn, 0, 7)
    assert deleted == 7
    assert _without_inline_key(rows_of(sconn, 0)) == oldest_first(tied)[7:]
    assert len(rows_of(sconn, 1)) == 5  # other partitions untouched


@pytest.mark.parametrize("name", list(NIBBLERS))
def test_returns_rows_deleted_and_progresses_until_done(sconn, name):
    rows = [(k, i, at(i % 6 + 0.25 * (i % 3))) for i, k in enumerate(keys_in(2, 23))]
    put(sconn, rows)
    calls = []
    while (got := NIBBLERS[name](sconn, 2, 5)) > 0:
        calls.append(got)
        assert len(calls) <= 5, "more calls than ceil(23 / 5): no progress"
        assert len(rows_of(sconn, 2)) == 23 - sum(calls)  # the count returned is the truth
    assert calls == [5, 5, 5, 5, 3]
    assert rows_of(sconn, 2) == []


def test_no_work_deletes_nothing(sconn):
    put(sconn, [(k, 1, at(5)) for k in keys_in(0, 4)])
    assert retention.delete_after_date(sconn, 0, at(5), 10) == 0  # ts == cutoff is kept
    assert retention.delete_oldest_to_target(sconn, 0, 4, 10) == 0
    assert retention.delete_to_limits(sconn, 0, at(0), 10, 10) == 0
    assert retention.delete_after_date(sconn, 1, CUTOFF, 10) == 0  # empty partition
    assert len(rows_of(sconn, 0)) == 4


# --- order and limits ---------------------------------------------------------------------------


def test_oldest_first_by_ts_then_uuid(sconn):
    keys = keys_in(0, 30)
    rng = random.Random(7)
    rows = [(k, rng.randrange(-50, 50), at(rng.choice([0, 0.5, 1, 1, 2]))) for k in keys]
    rng.shuffle(rows)
    put(sconn, rows)
    for chunk, left in [(4, 26), (9, 17), (1, 16)]:
        assert retention.delete_oldest_to_target(sconn, 0, 0, chunk) == chunk
        assert rows_of(sconn, 0) == oldest_first(rows)[30 - left:]


# Ten rows in partition 0, one per second:
#
#   ts:   T0  +1  +2  +3  +4  +5  +6  +7  +8  +9
#   row:   0   1   2   3   4   5   6   7   8   9
#
# A row goes if it is older than the cutoff OR beyond the newest `target` rows; at most `chunk`.
LIMIT_CASES = [
    # cutoff,   target, chunk, deleted  why
    (at(3), 8, 100, 3),  # age wins: rows 0-2 are older than T0+3; target alone would take 2
    (at(1), 5, 100, 5),  # target wins: 5 over target, only row 0 is old
    (at(6), 5, 4, 4),  # both want 6 and 5: the chunk caps at 4
    (at(0), 10, 100, 0),  # nothing older than T0, not over target
    (at(2.5), 10, 100, 3),  # a cutoff inside a second: rows 0, 1, 2
    (at(3), 10, 100, 3),  # a row exactly at the cutoff is kept
    (at(100), 0, 10, 10),  # everything
]


@pytest.mark.parametrize(("cutoff", "target", "chunk", "deleted"), LIMIT_CASES)
def test_combined_limits(sconn, cutoff, target, chunk, deleted):
    rows = [(k, i, at(i)) for i, k in enumerate(keys_in(0, 10))]
    put(sconn, rows)
    assert retention.delete_to_limits(sconn, 0, cutoff, target, chunk) == deleted
    assert rows_of(sconn, 0) == rows[deleted:]


def test_target_is_a_floor(sconn):
    put(sconn, [(k, 1, at(i)) for i, k in enumerate(keys_in(1, 12))])
    while retention.delete_oldest_to_target(sconn, 1, 4, 3):
        pass
    assert [r[2] for r in rows_of(sconn, 1)] == [at(i) for i in range(8, 12)]


# --- determinism --------------------------------------------------------------------------------


def test_same_state_and_arguments_delete_the_same_rows(make_store):
    rng = random.Random(11)
    rows = [(k, rng.randrange(100), at(rng.choice([0, 1, 1, 2, 3])))
            for k in keys_in(0, 60) + keys_in(1, 20)]
    survivors = []
    returned = []
    for order in (1, 2):
        dsn = make_store(PARTS)
        with psycopg.connect(dsn, autocommit=True) as conn:
            shuffled = rows[:]
            random.Random(order).shuffle(shuffled)  # another physical order: other ctids
            for i in range(0, len(shuffled), 7):
                put(conn, shuffled[i:i + 7])
            got = [
                retention.delete_after_date(conn, 0, at(2), 9),
                retention.delete_oldest_to_target(conn, 0, 30, 8),
                retention.delete_to_limits(conn, 1, at(1), 15, 4),
                retention.nibble(conn, 0, at(3), 25, 6),
            ]
            returned.append(got)
            survivors.append(rows_of(conn))
            assert_rollups_exact(conn)
    assert returned[0] == returned[1]
    assert survivors[0] == survivors[1]
    assert len(survivors[0]) == len(rows) - sum(returned[0])


# --- inline variants ----------------------------------------------------------------------------


def test_insert_and_delete_after_date_inserts_then_nibbles_that_partition(sconn):
    old = [(k, 5, at(0)) for k in keys_in(0, 6)]
    elsewhere = [(k, 5, at(0)) for k in keys_in(1, 3)]
    put(sconn, old + elsewhere)
    new_key = keys_in(0, 1, prefix="n")[0]
    deleted = _scalar(sconn, "SELECT slidewin.insert_and_delete_after_date(%s, 42, %s, %s, 4)",
                      (new_key, at(10), at(5)))
    assert deleted == 4
    assert rows_of(sconn, 0) == oldest_first(old)[4:] + [(new_key, 42, at(10))]
    assert len(rows_of(sconn, 1)) == 3
    assert windows.summary(sconn, 1, at(10)).vmax == 42  # the insert reached the rollups


def test_insert_and_delete_oldest_to_target_keeps_the_new_event(sconn):
    old = [(k, 5, at(i)) for i, k in enumerate(keys_in(2, 5))]
    put(sconn, old)
    new_key = keys_in(2, 1, prefix="n")[0]
    deleted = _scalar(
        sconn, "SELECT slidewin.insert_and_delete_oldest_to_target(%s, 9, %s, 5, 100)",
        (new_key, at(50)))
    assert deleted == 1
    assert rows_of(sconn, 2) == old[1:] + [(new_key, 9, at(50))]


def test_inline_duplicate_changes_nothing_but_still_nibbles(sconn):
    keys = keys_in(0, 3)
    put(sconn, [(k, 1, at(i)) for i, k in enumerate(keys)])
    deleted = _scalar(sconn, "SELECT slidewin.insert_and_delete_after_date(%s, 999, %s, %s, 10)",
                      (keys[2], at(2), at(1)))
    assert deleted == 1
    assert rows_of(sconn, 0) == [(keys[1], 1, at(1)), (keys[2], 1, at(2))]  # val not replaced


def test_inline_event_older_than_the_cutoff_is_inserted_and_retired_at_once(sconn):
    key = keys_in(1, 1)[0]
    deleted = _scalar(sconn, "SELECT slidewin.insert_and_delete_after_date(%s, 3, %s, %s, 10)",
                      (key, at(0), at(30)))
    assert deleted == 1
    assert rows_of(sconn, 1) == []


# --- bad arguments ------------------------------------------------------------------------------

BAD_CALLS = [
    # python call, the same call as a psql user types it, what the message must name
    (lambda c: retention.delete_after_date(c, 0, None, 10),
     "SELECT slidewin.delete_after_date(0, NULL, 10)", ("p_cutoff", "NULL")),
    (lambda c: retention.delete_after_date(c, 0, CUTOFF, 0),
     "SELECT slidewin.delete_after_date(0, now(), 0)", ("p_chunk", "0")),
    (lambda c: retention.delete_oldest_to_target(c, 0, 10, -5),
     "SELECT slidewin.delete_oldest_to_target(0, 10, -5)", ("p_chunk", "-5")),
    (lambda c: retention.delete_after_date(c, 0, CUTOFF, 1_000_001),
     "SELECT slidewin.delete_after_date(0, now(), 1000001)", ("p_chunk", "1000001")),
    (lambda c: retention.delete_oldest_to_target(c, 0, -1, 10),
     "SELECT slidewin.delete_oldest_to_target(0, -1, 10)", ("p_target_rows", "-1")),
    (lambda c: retention.delete_oldest_to_target(c, 0, None, 10),
     "SELECT slidewin.delete_oldest_to_target(0, NULL, 10)", ("p_target_rows", "NULL")),
    (lambda c: retention.delete_to_limits(c, 0, None, 5, 10),
     "SELECT slidewin.delete_to_limits(0, NULL, 5, 10)", ("p_cutoff", "NULL")),
    (lambda c: retention.delete_to_limits(c, 0, CUTOFF, -2, 10),
     "SELECT slidewin.delete_to_limits(0, now(), -2, 10)", ("p_target_rows", "-2")),
    (lambda c: retention.delete_after_date(c, 7, CUTOFF, 10),
     "SELECT slidewin.delete_after_date(7, now(), 10)", ("p_part", "7")),
    (lambda c: retention.delete_oldest_to_target(c, -1, 5, 10),
     "SELECT slidewin.delete_oldest_to_target(-1, 5, 10)", ("p_part", "-1")),
    (lambda c: retention.nibble(c, 0, None, None, 10),
     "SELECT slidewin.nibble(0, NULL, NULL, 10)", ("p_cutoff", "p_target_rows", "NULL")),
    (lambda c: windows.summary(c, 0, CUTOFF),
     "SELECT * FROM slidewin.window_summary(0)", ("p_seconds", "0")),
    (lambda c: windows.window_avg(c, -3, CUTOFF),
     "SELECT slidewin.window_avg(-3)", ("p_seconds", "-3")),
    (lambda c: windows.window_max(c, 86_401, CUTOFF),
     "SELECT slidewin.window_max(86401)", ("p_seconds", "86401")),
    (lambda c: c.execute("SELECT slidewin.insert_and_delete_after_date('k', 1, %s, NULL, 5)",
                         (at(0),)),
     "SELECT slidewin.insert_and_delete_after_date('k', 1, now(), NULL, 5)",
     ("p_cutoff", "NULL")),
    (lambda c: c.execute("SELECT slidewin.insert_and_delete_oldest_to_target('k', 1, %s, -4, 5)",
                         (at(0),)),
     "SELECT slidewin.insert_and_delete_oldest_to_target('k', 1, now(), -4, 5)",
     ("p_target_rows", "-4")),
    (lambda c: c.execute("SELECT slidewin.insert_event('k', NULL, %s)", (at(0),)),
     "SELECT slidewin.insert_event('k', NULL, now())", ("p_val", "NULL")),
]
BAD_IDS = [sql.split("(")[0].split(".")[-1] + ":" + "/".join(words)
           for _call, sql, words in BAD_CALLS]


@pytest.mark.parametrize(("call", "sql", "words"), BAD_CALLS, ids=BAD_IDS)
def test_bad_arguments_name_the_parameter_and_value(sconn, call, sql, words):
    with pytest.raises(ProcedureError) as via_library:
        with procedure_errors():
            call(sconn)
    with pytest.raises((psycopg.errors.InvalidParameterValue,
                        psycopg.errors.NullValueNotAllowed)) as via_sql:
        sconn.execute(sql)
    for text in (str(via_library.value), via_sql.value.diag.message_primary or ""):
        for word in words:
            assert word in text, f"{word!r} not named in {text!r}"
    assert rows_of(sconn) == []  # an inline call that fails inserts nothing either


# --- concurrency --------------------------------------------------------------------------------


def test_concurrent_inserter_and_nibbler_on_the_same_seconds_keep_rollups_exact(small_store_dsn):
    """One thread inserts into seconds T0..T0+2 of partition 0 (new extremes each time) while
    another nibbles the same seconds by age and by row count; bounded loops, then the check."""
    keys = keys_in(0, 2400, prefix="c")
    rounds = 120
    done = {"inserted": 0, "deleted": 0}
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def inserter() -> None:
        with psycopg.connect(small_store_dsn, autocommit=True) as c:
            start.wait()
            for i in range(rounds):
                batch = keys[i * 20:(i + 1) * 20]
                rows = [(k, (i * 37 + j * 101) % 1000 - (500 if j % 2 else 0),
                         at((i + j) % 3 + j / 20)) for j, k in enumerate(batch)]
                done["inserted"] += put(c, rows)

    def nibbler() -> None:
        with psycopg.connect(small_store_dsn, autocommit=True) as c:
            start.wait()
            for i in range(rounds):
                if i % 2:
                    done["deleted"] += retention.delete_after_date(c, 0, at(2), 7)
                else:
                    done["deleted"] += retention.delete_oldest_to_target(c, 0, 30, 9)

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # reported below, in the test's thread
                errors.append(exc)
        return run

    with psycopg.connect(small_store_dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE slidewin.events")
        threads = [threading.Thread(target=guarded(f)) for f in (inserter, nibbler)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "a thread is stuck"
        assert errors == []
        assert done["inserted"] == rounds * 20
        assert done["deleted"] > 0
        left = conn.execute("SELECT count(*) FROM slidewin.events").fetchone()[0]
        assert left == done["inserted"] - done["deleted"]
        assert_rollups_exact(conn)


# --- bounded plans ------------------------------------------------------------------------------


@pytest.mark.parametrize("analyzed", [True, False], ids=["analyzed", "never-analyzed"])
def test_nibble_never_scans_the_whole_partition(sconn, analyzed):
    """The victims are deleted by TID whatever the planner's costs say: with default costs a
    sequential scan (hashed ANY over a large chunk) or a bitmap scan of every row of the
    partition (no statistics yet) looks cheaper on paper, but grows with the partition."""
    keys = keys_in(0, 1000, prefix="b")
    rows = [(k, 1, at(s + i / 1000)) for s in range(20) for i, k in enumerate(keys)]
    put(sconn, rows)  # 20,000 rows: 20 whole seconds of 1,000
    if analyzed:
        sconn.execute("ANALYZE slidewin.events")
    scans_sql = ("SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables "
                 "WHERE relid = 'slidewin.events_p000'::regclass")
    with sconn.transaction():
        sconn.execute("SET LOCAL random_page_cost = 4")
        before = sconn.execute(scans_sql).fetchone()  # counts not yet flushed, e.g. the inserts
        # a chunk of two whole seconds: no min/max recompute reads the partition either
        assert retention.delete_after_date(sconn, 0, CUTOFF, 2000) == 2000
        after = sconn.execute(scans_sql).fetchone()
    # one ordered index scan for the oldest rows, then the delete by TID: no other scan
    assert (after[0] - before[0], after[1] - before[1]) == (0, 1)
