"""Joins of two declared streams: the boundaries drawn as timelines, the exact answer on random
data, late records, idle inputs, concurrent writers, retention, and the read-time kinds (rows,
as-of) against a brute force.

A "batch" here is what the ingest does in its transaction: insert the rows (the streams'
joins_on_insert trigger pairs them), raise the stream's time (slidewin.ingest_advance), move the
joins' watermark (slidewin.joins_advance).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

import psycopg
import pytest

from slidewin.db import joins, streams
from slidewin.db.errors import ConfigError, ProcedureError
from slidewin.db.streams import Column
from tests.conftest import T0

S = timedelta(seconds=1)
MS = timedelta(milliseconds=1)
Row = tuple[str, str | None, datetime]  # (record id, join key, time)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def declare(conn: psycopg.Connection, history: timedelta | None = None) -> None:
    """orders (id, k, ts) and shipments (id, k, ts): k is the join key, nullable."""
    for name in ("orders", "shipments"):
        streams.define(conn, name, key="id", time="ts", history=history,
                       columns=[Column("id", "text"), Column("k", "text")])


def batch(conn: psycopg.Connection, stream: str, rows: Iterable[Row], now: datetime,
          advance: bool = True) -> None:
    """One ingest batch of ``stream``: insert (duplicates of a stored identity skipped), raise
    the stream time, move the joins."""
    rows = list(rows)
    with conn.transaction():
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO slidewin_streams.{stream} (id, k, ts) VALUES (%s, %s, %s) "
                "ON CONFLICT DO NOTHING", rows)
        if advance and rows:
            conn.execute("SELECT slidewin.ingest_advance(%s, %s, %s, '0s')",
                         (stream, max(r[2] for r in rows), now))
        conn.execute("SELECT slidewin.joins_advance(%s, %s)", (stream, now))


def pairs_of(conn: psycopg.Connection, name: str) -> set[tuple[str | None, str | None]]:
    """The results as (left id, right id)."""
    return {(r[1], r[3]) for r in joins.results(conn, name)}


def test_the_window_is_inclusive_at_both_ends_and_before_and_after_differ(
    conn: psycopg.Connection,
) -> None:
    # right records at l - before - 1 ms | l - before | l | l + after | l + after + 1 ms
    #                    ---------[=====================]--------
    declare(conn)
    joins.define(conn, "j", left="orders", right="shipments", on="k", before=10 * S,
                 after=3 * S, grace=60 * S, now=at(0))
    batch(conn, "orders", [("o", "a", at(100))], at(0))
    batch(conn, "shipments", [
        ("too_early", "a", at(90) - MS), ("first", "a", at(90)), ("same", "a", at(100)),
        ("last", "a", at(103)), ("too_late", "a", at(103) + MS), ("other_key", "b", at(100)),
    ], at(0))
    assert pairs_of(conn, "j") == {("o", "first"), ("o", "same"), ("o", "last")}


def test_within_is_symmetric_and_equal_times_pair(conn: psycopg.Connection) -> None:
    declare(conn)
    joins.define(conn, "j", left="orders", right="shipments", on="k", before=2 * S, after=2 * S,
                 grace=60 * S)
    batch(conn, "shipments", [("s0", "a", at(8) - MS), ("s1", "a", at(8)), ("s2", "a", at(10)),
                              ("s3", "a", at(12)), ("s4", "a", at(12) + MS)], at(0))
    batch(conn, "orders", [("o", "a", at(10))], at(0))
    assert pairs_of(conn, "j") == {("o", "s1"), ("o", "s2"), ("o", "s3")}


def test_null_keys_never_match_but_get_their_outer_row(conn: psycopg.Connection) -> None:
    declare(conn)
    joins.define(conn, "j", left="orders", right="shipments", on="k", join_type="full",
                 before=5 * S, after=5 * S)
    batch(conn, "orders", [("o", None, at(10))], at(0))
    batch(conn, "shipments", [("s", None, at(10))], at(0))
    assert pairs_of(conn, "j") == set()
    batch(conn, "orders", [("late_enough", "z", at(100))], at(0))
    batch(conn, "shipments", [("late_enough", "z", at(100))], at(0))
    assert pairs_of(conn, "j") == {("o", None), (None, "s"), ("late_enough", "late_enough")}


def test_duplicates_are_pairs_too_and_a_replayed_insert_adds_nothing(
    conn: psycopg.Connection,
) -> None:
    declare(conn)
    joins.define(conn, "j", left="orders", right="shipments", on="k", before=5 * S, after=5 * S)
    batch(conn, "orders", [("o1", "a", at(10)), ("o2", "a", at(11))], at(0))
    batch(conn, "shipments", [("s1", "a", at(12)), ("s2", "a", at(12.5))], at(0))
    batch(conn, "shipments", [("s1", "a", at(12))], at(0))  # the same record again
    assert pairs_of(conn, "j") == {("o1", "s1"), ("o1", "s2"), ("o2", "s1"), ("o2", "s2")}
    assert joins.status(conn, "j").pairs == 4


def test_an_outer_row_is_written_only_once_w_is_past_ts_plus_after(
    conn: psycopg.Connection,
) -> None:
    # left record at 10 s, after = 3 s, grace = 2 s: final once W > 13 s, W = min(times) - 2 s
    declare(conn)
    joins.define(conn, "j", left="orders", right="shipments", on="k", join_type="left",
                 before=1 * S, after=3 * S, grace=2 * S)
    batch(conn, "orders", [("o", "a", at(10))], at(0))
    batch(conn, "shipments", [("x", "b", at(14))], at(0))
    batch(conn, "orders", [("o2", "b", at(30))], at(0))
    st = joins.status(conn, "j")
    assert st.watermark == at(12)  # min(30, 14) - 2
    assert pairs_of(conn, "j") == set()
    batch(conn, "shipments", [("y", "b", at(15))], at(0))  # W = 13 = 10 + after: not yet
    assert joins.status(conn, "j").watermark == at(13)
    assert pairs_of(conn, "j") == set()
    batch(conn, "shipments", [("z", "b", at(15) + MS)], at(0))  # W = 13 s + 1 ms: final
    assert pairs_of(conn, "j") == {("o", None)}
    assert joins.status(conn, "j").complete_up_to == at(13) + MS - 3 * S


def test_a_record_that_would_contradict_an_outer_row_is_late_for_the_join(
    conn: psycopg.Connection,
) -> None:
    declare(conn)
    joins.define(conn, "j", left="orders", right="shipments", on="k", join_type="left",
                 before=5 * S, after=5 * S)
    batch(conn, "orders", [("o", "a", at(10)), ("o2", "z", at(40))], at(0))
    batch(conn, "shipments", [("s0", "z", at(40))], at(0))
    assert pairs_of(conn, "j") == {("o", None), ("o2", "s0")}
    # a shipment for o arriving now is older than W = 40 s: late, no pair, counted
    batch(conn, "shipments", [("s", "a", at(12))], at(0))
    st = joins.status(conn, "j")
    assert pairs_of(conn, "j") == {("o", None), ("o2", "s0")}
    assert (st.late_left, st.late_right) == (0, 1)
    # and a late record never pairs later either
    batch(conn, "orders", [("o3", "a", at(41))], at(0))
    assert ("o3", "s") not in pairs_of(conn, "j")


def test_two_backlogs_started_together_are_joined_whichever_commits_first(
    conn: psycopg.Connection,
) -> None:
    """An input with no data yet holds W back, so the second stream's first batch is not late
    (however long after the definition it comes: tests/test_join_watermark_rules.py)."""
    declare(conn)
    joins.define(conn, "j", left="orders", right="shipments", on="k", join_type="left",
                 before=S, after=S, idle=timedelta(minutes=1), now=at(0))
    batch(conn, "orders", [(f"o{i}", f"k{i}", at(i)) for i in range(300)], at(5))
    assert joins.status(conn, "j").watermark is None
    batch(conn, "shipments", [(f"s{i}", f"k{i}", at(i)) for i in range(300)], at(50))
    st = joins.status(conn, "j")
    assert (st.pairs, st.late_left, st.late_right) == (300, 0, 0)


def test_an_idle_input_stops_holding_w_back_on_the_schedulers_tick(
    conn: psycopg.Connection,
) -> None:
    declare(conn)
    joins.define(conn, "j", left="orders", right="shipments", on="k", join_type="left",
                 after=1 * S, idle=timedelta(minutes=1))
    batch(conn, "shipments", [("s", "b", at(5))], at(0))
    batch(conn, "orders", [("o", "a", at(10)), ("o2", "a", at(20))], at(0))
    assert joins.status(conn, "j").watermark == at(5)  # shipments hold it back
    joins.advance(conn, at(59))
    assert pairs_of(conn, "j") == set()
    joins.advance(conn, at(61))  # shipments silent for over a minute (wall clock)
    assert joins.status(conn, "j").watermark == at(20)
    assert pairs_of(conn, "j") == {("o", None)}


def test_w_never_goes_back(conn: psycopg.Connection) -> None:
    declare(conn)
    joins.define(conn, "j", left="orders", right="shipments", on="k", idle=timedelta(seconds=10),
                 now=at(0))
    batch(conn, "orders", [("o", "a", at(50))], at(0))
    batch(conn, "shipments", [("s", "b", at(60))], at(0))
    assert joins.status(conn, "j").watermark == at(50)
    joins.advance(conn, at(100))  # both silent for over 10 s: the newer one counts, W = 60
    assert joins.status(conn, "j").watermark == at(60)
    batch(conn, "orders", [("o2", "a", at(55))], at(100))  # late; only orders active: 55 < 60
    assert joins.status(conn, "j").watermark == at(60)
    assert joins.status(conn, "j").late_left == 1


def test_a_join_pairs_what_the_streams_hold_when_it_is_defined(conn: psycopg.Connection) -> None:
    declare(conn)
    batch(conn, "orders", [("o", "a", at(10)), ("lonely", "q", at(11))], at(0))
    batch(conn, "shipments", [("s", "a", at(12)), ("far", "z", at(90))], at(0))
    joins.define(conn, "j", left="orders", right="shipments", on="k", join_type="left",
                 before=5 * S, after=5 * S)
    assert pairs_of(conn, "j") == {("o", "s"), ("lonely", None)}


def test_two_writers_at_once_pair_each_record_exactly_once(store_dsn: str,
                                                         conn: psycopg.Connection) -> None:
    """Left and right batches in concurrent transactions: the later one to lock the join sees
    the earlier one's commit, so the pair is written once -- by whichever commits second."""
    declare(conn)
    joins.define(conn, "j", left="orders", right="shipments", on="k", before=5 * S, after=5 * S)
    with psycopg.connect(store_dsn, autocommit=True) as other:
        for first, second in (("orders", "shipments"), ("shipments", "orders")):
            key = f"k_{first}"
            tx = conn.transaction()
            tx.__enter__()
            conn.execute(f"INSERT INTO slidewin_streams.{first} (id, k, ts) VALUES (%s, %s, %s)",
                         (f"{first}1", key, at(10)))
            done = threading.Event()

            def write_second(stream: str = second, k: str = key,
                             done: threading.Event = done) -> None:
                other.execute(f"INSERT INTO slidewin_streams.{stream} (id, k, ts) "
                              "VALUES (%s, %s, %s)", (f"{stream}1", k, at(11)))
                done.set()

            worker = threading.Thread(target=write_second)
            worker.start()
            assert not done.wait(0.5)  # waits for the join's lock
            tx.__exit__(None, None, None)
            worker.join(10)
            assert done.is_set()
    assert pairs_of(conn, "j") == {("orders1", "shipments1")}
    assert joins.status(conn, "j").pairs == 2


@pytest.mark.slow
@pytest.mark.parametrize("join_type", ["inner", "left", "right", "full"])
@pytest.mark.parametrize("seed", [1, 2])
def test_results_equal_the_one_query_exact_join_on_random_data(
    conn: psycopg.Connection, join_type: str, seed: int,
) -> None:
    """Random records in random batches and arrival order (out of order within and beyond the
    grace, repeated keys, re-sent records, null keys), W moved on by batches and ticks: no result
    is ever withdrawn or contradicted, and once W is past every record the results are the one
    SQL join of the stored records, late ones left out."""
    rng = random.Random(seed)
    declare(conn)
    before, after = rng.choice([0, 1, 3]) * S, rng.choice([0, 2, 4]) * S
    joins.define(conn, "j", left="orders", right="shipments", on="k", join_type=join_type,
                 before=before, after=after, grace=2 * S, idle=timedelta(seconds=30))
    records = {s: [(f"{s[0]}{i}", rng.choice(["a", "b", "c", "d", None]),
                    at(rng.randrange(0, 60_000) / 1000)) for i in range(150)]
               for s in ("orders", "shipments")}
    for rows in records.values():
        rows.sort(key=lambda r: r[2] + timedelta(seconds=rng.uniform(-4, 4)))  # disorder
    seen: set[tuple] = set()
    wall = at(0)
    while any(records.values()):
        stream = rng.choice([s for s, rows in records.items() if rows])
        n = rng.randint(1, 12)
        chunk, records[stream] = records[stream][:n], records[stream][n:]
        if rng.random() < 0.2:
            chunk.append(chunk[0])  # re-sent in the same batch
        wall += timedelta(seconds=rng.uniform(0, 3))
        batch(conn, stream, chunk, wall)
        if rng.random() < 0.1:
            joins.advance(conn, wall)
        now = set(joins.results(conn, "j"))
        assert seen <= now  # nothing withdrawn
        seen = now
        _no_outer_row_beside_a_pair(now)
    batch(conn, "orders", [("end", "end", at(200))], wall)
    batch(conn, "shipments", [("end", "end", at(200))], wall)
    got = sorted(joins.results(conn, "j"), key=repr)
    want = sorted(joins.exact(conn, "j", at(-1000), at(1000)), key=repr)
    assert got == want
    assert len(got) == len(set(got))
    st = joins.status(conn, "j")
    assert st.pairs + st.left_only + st.right_only == len(got)
    late = conn.execute('SELECT count(*) FROM slidewin_joins."j#late"').fetchone()
    assert late is not None and late[0] == st.late_left + st.late_right


def _no_outer_row_beside_a_pair(results: set[tuple]) -> None:
    paired_left = {(r[0], r[1]) for r in results if r[2] is not None and r[0] is not None}
    paired_right = {(r[2], r[3]) for r in results if r[0] is not None and r[2] is not None}
    for lt, lk, rt, rk in results:
        if rt is None:
            assert (lt, lk) not in paired_left
        if lt is None:
            assert (rt, rk) not in paired_right


def test_results_age_out_once_both_inputs_are_gone(conn: psycopg.Connection) -> None:
    declare(conn, history=timedelta(minutes=1))
    streams.set_retention(conn, "shipments", history=timedelta(minutes=5), grace=None)
    joins.define(conn, "j", left="orders", right="shipments", on="k", before=5 * S, after=5 * S)
    batch(conn, "orders", [("o", "a", at(0))], at(0))
    batch(conn, "shipments", [("s", "a", at(2))], at(0))
    assert joins.nibble(conn, "j", at(2) + timedelta(minutes=10)) == 0  # W has not passed them
    batch(conn, "orders", [("o9", "z", at(100))], at(0))
    batch(conn, "shipments", [("s9", "y", at(100))], at(0))
    assert joins.nibble(conn, "j", at(2) + timedelta(minutes=5)) == 0  # shipments keep s
    assert joins.nibble(conn, "j", at(2) + timedelta(minutes=5) + MS) == 1
    assert pairs_of(conn, "j") == set()


def test_retention_keeps_what_the_joins_watermark_has_not_passed(
    conn: psycopg.Connection,
) -> None:
    """Retention follows the wall clock, W the streams' times: an unmatched order older than
    its history is kept until W has passed it and its outer row is written."""
    declare(conn, history=35 * S)
    joins.define(conn, "j", left="orders", right="shipments", on="k", join_type="left",
                 after=30 * S, grace=5 * S, now=at(0))
    batch(conn, "orders", [("o1", "a", at(0))], at(1))
    batch(conn, "shipments", [("s0", "b", at(0))], at(1))
    assert streams.nibble(conn, "orders", at(100)) == 0  # W = -5 s: o1 may still pair
    assert streams.nibble(conn, "shipments", at(100)) == 0
    batch(conn, "orders", [("o2", "c", at(40))], at(41))
    batch(conn, "shipments", [("s2", "c", at(40))], at(41))  # W = 35 s: o1 is final
    assert ("o1", None) in pairs_of(conn, "j")
    assert streams.nibble(conn, "orders", at(100)) == 1  # now o1 may go (W - after = 5 s)
    assert streams.nibble(conn, "shipments", at(100)) == 1  # s0: W - before = 35 s is past it
    assert conn.execute("SELECT id FROM slidewin_streams.shipments").fetchall() == [("s2",)]


def test_refusals_name_the_parameter_the_value_and_the_fix(conn: psycopg.Connection) -> None:
    declare(conn, history=timedelta(minutes=1))
    cases: Sequence[tuple[dict, str]] = [
        ({"before": -S}, "--before -1s must be 0 or more"),
        ({"grace": -S}, "--grace -1s must be 0 or more"),
        ({"before": 40 * S, "after": 30 * S}, "less than before + after + grace"),
        ({"on": "nope"}, "on: stream orders has no column 'nope'"),
        ({"right": "events"}, "on: stream events has no column 'k' (its columns are uuid"),
        ({"right": "nope"}, "no stream named 'nope'"),
        ({"kind": "asof", "join_type": "full"}, "an asof join is inner or left"),
        ({"kind": "rows"}, "rows must be 1 to 100000"),
        ({"select_left": ["x"]}, "select: stream orders has no column 'x'"),
    ]
    for change, words in cases:
        args = {"left": "orders", "right": "shipments", "on": "k", **change}
        with pytest.raises((ProcedureError, ConfigError)) as refused:
            joins.define(conn, "j", **args)
        assert words in str(refused.value), (change, str(refused.value))
    joins.define(conn, "j", left="orders", right="shipments", on="k", before=20 * S, after=20 * S)
    with pytest.raises(ProcedureError, match="shorter than join j needs.*streams alter|drop"):
        streams.set_retention(conn, "orders", history=30 * S, grace=None)
    with pytest.raises(ProcedureError, match="stream orders is joined by j"):
        streams.drop(conn, "orders")
    with pytest.raises(ProcedureError, match="join j exists already"):
        joins.define(conn, "j", left="orders", right="shipments", on="k")
    assert joins.drop(conn, "j") == 0
    streams.drop(conn, "orders")
    left = conn.execute("SELECT count(*) FROM pg_trigger WHERE tgname = 'joins_on_insert'")
    assert left.fetchone() == (0,)


def _versions(conn: psycopg.Connection, rng: random.Random) -> tuple[list[Row], list[Row]]:
    """A table of prices per key (shipments, updated over time) and a stream of orders."""
    table = [(f"v{i:03d}", rng.choice("abc"), at(rng.randrange(0, 100))) for i in range(60)]
    stream = [(f"o{i}", rng.choice("abcd"), at(rng.randrange(0, 100))) for i in range(60)]
    batch(conn, "shipments", table, at(0))
    batch(conn, "orders", stream, at(0))
    return table, stream


def test_an_asof_join_returns_the_version_valid_at_the_records_time(
    conn: psycopg.Connection,
) -> None:
    rng = random.Random(7)
    declare(conn)
    joins.define(conn, "asof", left="orders", right="shipments", on="k", kind="asof",
                 join_type="left")
    table, stream = _versions(conn, rng)
    got = {(a.l["id"], a.r["id"] if a.r else None)
           for a in joins.show(conn, "asof", at(0), at(1000), None)}
    valid_then, latest = set(), set()
    for oid, k, ts in stream:
        versions = sorted((t, vid) for vid, vk, t in table if vk == k and t <= ts)
        valid_then.add((oid, versions[-1][1] if versions else None))
        newest = sorted((t, vid) for vid, vk, t in table if vk == k)
        latest.add((oid, newest[-1][1] if newest else None))
    assert got == valid_then
    assert got != latest  # joining with the latest version (Kafka before 3.5) differs


def test_a_rows_join_matches_within_the_n_newest_right_records(conn: psycopg.Connection) -> None:
    rng = random.Random(11)
    declare(conn)
    joins.define(conn, "last3", left="orders", right="shipments", on="k", kind="rows", rows=3)
    table, stream = _versions(conn, rng)
    got = sorted((a.l["id"], a.r["id"]) for a in joins.show(conn, "last3", at(0), at(1000), None))
    want = []
    for oid, k, ts in stream:
        # the n newest by time, then by the stream's key (the order of its primary key)
        window = sorted(((t, vid, vk) for vid, vk, t in table if t <= ts), reverse=True)[:3]
        want += [(oid, vid) for _, vid, vk in window if vk == k]
    assert got == sorted(want)


def test_show_is_newest_first_and_says_what_is_final(conn: psycopg.Connection) -> None:
    declare(conn)
    joins.define(conn, "j", left="orders", right="shipments", on="k", before=2 * S, after=2 * S)
    for i in range(5):
        batch(conn, "orders", [(f"o{i}", "a", at(i * 10))], at(0))
        batch(conn, "shipments", [(f"s{i}", "a", at(i * 10 + 1))], at(0))
    answers = joins.show(conn, "j", at(0), at(100), 3)
    assert [a.l["id"] for a in answers if a.l] == ["o4", "o3", "o2"]
    assert [a.final for a in answers] == [False, True, True]  # W = 40 s
    assert [a.seq for a in joins.since(conn, "j", answers[-1].seq or 0)] == sorted(
        a.seq for a in answers[:2] if a.seq)


def test_the_retention_jobs_tick_finalizes_an_idle_join_and_ages_its_results(
    conn: psycopg.Connection,
) -> None:
    from slidewin.jobs.retention import tick_joins

    declare(conn, history=timedelta(minutes=1))
    joins.define(conn, "j", left="orders", right="shipments", on="k", join_type="left",
                 after=1 * S, idle=timedelta(seconds=30))
    batch(conn, "shipments", [("s", "b", at(0))], at(0))
    batch(conn, "orders", [("o", "a", at(10)), ("o2", "a", at(20))], at(0))
    assert tick_joins(conn, at(10), chunk=1) == {}
    assert pairs_of(conn, "j") == set()
    assert tick_joins(conn, at(31), chunk=1) == {}  # shipments idle: W = 20 s
    assert pairs_of(conn, "j") == {("o", None)}
    assert tick_joins(conn, at(10) + timedelta(minutes=1, seconds=1), chunk=1) == {"j": 1}
    assert pairs_of(conn, "j") == set()
