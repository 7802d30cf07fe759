"""As-of joins: the age bound (``within``), tables (streams declared ``is_table``), and what a
table on the right makes final.

- ``within D``: a version older than the left record's time - D is not paired (a left join
  answers NULL), against a brute force.
- A table keeps every version: no history can be given to it, and no nibble or retention job
  deletes a row of it.
- An as-of join of a table keeps W = the left stream's watermark - grace: an answer is final once
  W passed its left record, however seldom the table changes. A version arriving behind W is late
  for the join (recorded, counted, left out), so no final answer ever changes; a newer version
  never changes an older record's answer, since versions are looked up by the record's time.

A "batch" is what the ingest does in its transaction (tests/test_joins.py's ``batch``): insert,
raise the stream's time (slidewin.ingest_advance), move the joins (slidewin.joins_advance).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from datetime import datetime, timedelta

import psycopg
import pytest

from slidewin.db import joins, streams
from slidewin.db.errors import ConfigError, ProcedureError
from slidewin.db.streams import Column
from slidewin.jobs.retention import nibble_streams
from tests.test_joins import Row, S, at, batch

MIN = timedelta(minutes=1)
YEARS = timedelta(days=365 * 50)


def declare(conn: psycopg.Connection, table: bool = True) -> None:
    """orders (id, k, ts), the left stream; prices (id, k, ts), the right one: a table or not."""
    streams.define(conn, "orders", key="id", time="ts",
                   columns=[Column("id", "text"), Column("k", "text")])
    streams.define(conn, "prices", key="id", time="ts", is_table=table,
                   columns=[Column("id", "text"), Column("k", "text")])


def answers(conn: psycopg.Connection, name: str) -> dict[str, tuple[str | None, bool]]:
    """Each left record's answer: (the right version's id or None, final)."""
    return {a.l["id"]: (a.r["id"] if a.r else None, a.final)
            for a in joins.show(conn, name, at(-10_000), at(100_000), None) if a.l}


def valid_at(versions: Iterable[Row], k: str | None, t: datetime,
             within: timedelta | None = None) -> str | None:
    """The brute force: the newest version of key k at or before t (and at most within older),
    ties by id as the stream's primary key orders them."""
    found = sorted((vt, vid) for vid, vk, vt in versions
                   if vk == k and vt <= t and (within is None or vt >= t - within))
    return found[-1][1] if found else None


# -- within ---------------------------------------------------------------------------------------

def test_within_leaves_out_a_version_older_than_the_bound(conn: psycopg.Connection) -> None:
    # prices of a:  p_old@0 ........... p_new@11m
    # orders of a:              o_13m@13m  (p_old is 13 minutes old: not paired within 10m)
    #               o_20m@20m   (p_new is 9 minutes old: paired)
    declare(conn, table=False)
    batch(conn, "prices", [("p_old", "a", at(0)), ("p_new", "b", at(11 * 60))], at(0))
    batch(conn, "orders", [("o_13m", "a", at(13 * 60)), ("o_20m", "b", at(20 * 60)),
                           ("o_5m", "a", at(5 * 60))], at(0))
    joins.define(conn, "unbounded", left="orders", right="prices", on="k", kind="asof",
                 join_type="left")
    joins.define(conn, "fresh", left="orders", right="prices", on="k", kind="asof",
                 join_type="left", within=10 * MIN)
    joins.define(conn, "fresh_inner", left="orders", right="prices", on="k", kind="asof",
                 within=10 * MIN)
    assert {k: v for k, (v, _) in answers(conn, "unbounded").items()} == {
        "o_13m": "p_old", "o_20m": "p_new", "o_5m": "p_old"}
    assert {k: v for k, (v, _) in answers(conn, "fresh").items()} == {
        "o_13m": None, "o_20m": "p_new", "o_5m": "p_old"}
    assert set(answers(conn, "fresh_inner")) == {"o_20m", "o_5m"}
    assert joins.get_join(conn, "fresh").within == 10 * MIN
    assert joins.get_join(conn, "unbounded").within is None
    # the bound is inclusive: a version exactly within old is paired
    joins.define(conn, "edge", left="orders", right="prices", on="k", kind="asof",
                 join_type="left", within=13 * MIN)
    assert answers(conn, "edge")["o_13m"][0] == "p_old"


def test_within_matches_a_brute_force(conn: psycopg.Connection) -> None:
    rng = random.Random(3)
    declare(conn, table=False)
    table = [(f"v{i:03d}", rng.choice("abc"), at(rng.randrange(0, 100))) for i in range(60)]
    stream = [(f"o{i}", rng.choice("abcd"), at(rng.randrange(0, 100))) for i in range(60)]
    batch(conn, "prices", table, at(0))
    batch(conn, "orders", stream, at(0))
    joins.define(conn, "j", left="orders", right="prices", on="k", kind="asof",
                 join_type="left", within=7 * S)
    got = {k: v for k, (v, _) in answers(conn, "j").items()}
    assert got == {oid: valid_at(table, k, t, 7 * S) for oid, k, t in stream}
    assert got != {oid: valid_at(table, k, t) for oid, k, t in stream}  # the bound matters


def test_within_is_bounded_like_every_duration_and_named(conn: psycopg.Connection) -> None:
    declare(conn, table=False)
    args = {"left": "orders", "right": "prices", "on": "k"}
    with pytest.raises(ConfigError, match=r"--within -1s must be 0 or more"):
        joins.define(conn, "j", kind="asof", within=-S, **args)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"--within 36501d is longer than the limit of 100 "
                                          r"years"):
        joins.define(conn, "j", kind="asof", within=timedelta(days=36_501),
                     **args)  # type: ignore[arg-type]
    refusals = [
        ("p_kind => 'asof', p_within => '-1 s'", "within must be 0 or more, got -1s"),
        ("p_kind => 'asof', p_within => '36501 days'",
         "within 36501d is longer than the limit of 100 years"),
        ("p_kind => 'interval', p_within => '1 min'",
         "within 1m bounds an asof join's versions, not an interval join's"),
        ("p_kind => 'rows', p_n_rows => 2, p_within => '1 min'",
         "within 1m bounds an asof join's versions, not a rows join's"),
    ]
    for call, words in refusals:
        with pytest.raises(psycopg.errors.InvalidParameterValue) as refused, conn.transaction():
            conn.execute(f"SELECT slidewin.join_define('j', 'orders', 'prices', 'k', {call})")
        assert words in str(refused.value), (call, str(refused.value))
    assert joins.list_joins(conn) == []
    # the SQL define takes it by name; left out it is NULL: any age
    conn.execute("SELECT slidewin.join_define('j', 'orders', 'prices', 'k', p_kind => 'asof', "
                 "p_within => '90 s')")
    conn.execute("SELECT slidewin.join_define('k', 'orders', 'prices', 'k', p_kind => 'asof')")
    assert [(j.name, j.within) for j in joins.list_joins(conn)] == [("j", 90 * S), ("k", None)]


# -- a table keeps every version ------------------------------------------------------------------

def test_a_table_has_no_history_and_no_retention_deletes_from_it(
    conn: psycopg.Connection,
) -> None:
    cols = [Column("id", "text"), Column("k", "text")]
    with pytest.raises(ConfigError, match=r"--history 1h: a table \(--table\) keeps every "
                                          r"version, with no retention; leave out --history"):
        streams.define(conn, "prices", key="id", time="ts", columns=cols, is_table=True,
                       history=timedelta(hours=1))
    with pytest.raises(psycopg.errors.InvalidParameterValue,
                       match="history 1h of stream prices: a table keeps every version"), \
            conn.transaction():
        conn.execute("SELECT slidewin.stream_define('prices', 'id', 'ts', "
                     "'[{\"name\": \"id\"}]', p_history => '1 hour', p_is_table => true)")
    declare(conn)
    prices = streams.get_stream(conn, "prices")
    assert (prices.is_table, prices.history) == (True, None)
    assert not streams.get_stream(conn, "orders").is_table
    with pytest.raises(ConfigError, match="a table .* keeps every version"):
        streams.set_retention(conn, "prices", history=timedelta(hours=1), grace=None)
    # whoever writes the registry: a psql UPDATE is refused with the fix too
    for change, words in (("history = '1 hour'", "history 1h of stream prices: a table keeps "
                                                 "every version"),
                          ("is_table = false", "stream prices is a table: that is fixed when "
                                               "it is declared")):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=words), \
                conn.transaction():
            conn.execute(f"UPDATE slidewin.streams SET {change} WHERE name = 'prices'")
    with pytest.raises(psycopg.errors.CheckViolation), conn.transaction():
        conn.execute("ALTER TABLE slidewin.streams DISABLE TRIGGER stream_check_retention")
        conn.execute("UPDATE slidewin.streams SET is_table = true WHERE name = 'events'")
    # versions decades old stay, whatever the clock; a stream with a history beside it goes
    streams.define(conn, "aged", key="id", time="ts", columns=cols, history=timedelta(hours=1))
    batch(conn, "prices", [("p1", "a", at(0)), ("p2", "a", at(10))], at(0))
    batch(conn, "aged", [("x", "a", at(0))], at(0))
    far = at(0) + YEARS
    assert streams.nibble(conn, "prices", far) == 0
    assert nibble_streams(conn, far, 10) == {"aged": 1}
    assert streams.row_count(conn, prices) == 2
    # the grace still applies (how late a version may arrive for the stream's windows)
    streams.set_retention(conn, "prices", history=None, grace=5 * S)
    assert streams.get_stream(conn, "prices").grace == 5 * S


# -- an as-of join of a table ---------------------------------------------------------------------

def test_an_answer_is_final_once_its_left_record_is(conn: psycopg.Connection) -> None:
    # the prices table changed once, long ago; orders keep coming. Read against a plain stream
    # of the same versions, every answer stays open (the right stream's time never moves); read
    # against the table, each is final once the orders' watermark passed it.
    declare(conn)
    streams.define(conn, "quotes", key="id", time="ts",
                   columns=[Column("id", "text"), Column("k", "text")])
    for stream in ("prices", "quotes"):
        batch(conn, stream, [("v1", "a", at(0))], at(0))
    for name, right in (("on_table", "prices"), ("on_stream", "quotes")):
        joins.define(conn, name, left="orders", right=right, on="k", kind="asof",
                     join_type="left")
    assert joins.get_join(conn, "on_table").right_table
    assert not joins.get_join(conn, "on_stream").right_table
    batch(conn, "orders", [("o1", "a", at(10)), ("o2", "b", at(20))], at(0))
    batch(conn, "orders", [("o3", "a", at(30))], at(0))  # the orders' watermark: 30 s
    assert answers(conn, "on_table") == {"o1": ("v1", True), "o2": (None, True),
                                         "o3": ("v1", False)}
    assert answers(conn, "on_stream") == {"o1": ("v1", False), "o2": (None, False),
                                          "o3": ("v1", False)}
    state = joins.status(conn, "on_table")
    assert (state.watermark, state.complete_up_to) == (at(30), at(30))
    # grace holds W back that much behind the left stream's watermark
    joins.define(conn, "graced", left="orders", right="prices", on="k", kind="asof",
                 grace=15 * S)
    assert joins.status(conn, "graced").complete_up_to == at(15)
    assert [a.final for a in joins.show(conn, "graced", at(0), at(100), None)] == [
        False, True]  # o3 @ 30, o1 @ 10


def test_w_waits_for_the_tables_first_version(conn: psycopg.Connection) -> None:
    """A table loaded after the join is defined is not late: W is unset while the table has
    never had data, so the versions of its first load all count."""
    declare(conn)
    joins.define(conn, "j", left="orders", right="prices", on="k", kind="asof",
                 join_type="left")
    batch(conn, "orders", [("o1", "a", at(100))], at(0))
    assert joins.status(conn, "j").watermark is None
    assert answers(conn, "j") == {"o1": (None, False)}
    batch(conn, "prices", [("v1", "a", at(0))], at(0))
    st = joins.status(conn, "j")
    assert (st.watermark, st.late_right) == (at(100), 0)
    assert answers(conn, "j") == {"o1": ("v1", False)}  # o1 is at W, not before it
    batch(conn, "orders", [("o2", "a", at(101))], at(0))
    assert answers(conn, "j") == {"o1": ("v1", True), "o2": ("v1", False)}


def test_a_version_arriving_late_is_left_out_and_no_final_answer_changes(
    conn: psycopg.Connection,
) -> None:
    # prices of a:  v1@0                  v_late@40 (arrives after W = 50)    v3@60
    # orders of a:              o@50 (final at W 50: v1)               o2@70 (v3)
    declare(conn)
    batch(conn, "prices", [("v1", "a", at(0))], at(0))
    joins.define(conn, "j", left="orders", right="prices", on="k", kind="asof",
                 join_type="left")
    batch(conn, "orders", [("o", "a", at(50))], at(0))
    batch(conn, "orders", [("o_next", "b", at(51))], at(0))
    assert answers(conn, "j")["o"] == ("v1", True)
    batch(conn, "prices", [("v_late", "a", at(40))], at(0))  # behind W: late for the join
    assert answers(conn, "j")["o"] == ("v1", True)
    st = joins.status(conn, "j")
    assert (st.late_right, st.late_left) == (1, 0)
    assert conn.execute('SELECT side, ts, key FROM slidewin_joins."j#late"').fetchall() == [
        ("r", at(40), "v_late")]
    # a newer version changes no older record's answer: looked up by the record's time
    batch(conn, "prices", [("v3", "a", at(60))], at(0))
    assert answers(conn, "j")["o"] == ("v1", True)
    batch(conn, "orders", [("o2", "a", at(70))], at(0))
    assert answers(conn, "j")["o2"] == ("v3", False)
    assert joins.status(conn, "j").late_right == 1


@pytest.mark.parametrize("grace", [0, 3])
def test_final_answers_never_change_and_equal_the_as_of_of_the_versions_in_time(
    conn: psycopg.Connection, grace: int,
) -> None:
    """Random batches of orders (in time order, as the ingest admits them) and of versions of
    the table (any time: some behind W). Every answer once final keeps its version; the late
    versions are exactly those behind W when they arrived; and every answer is the brute-force
    as-of over the versions that were not late."""
    rng = random.Random(grace)
    declare(conn)
    joins.define(conn, "j", left="orders", right="prices", on="k", kind="asof",
                 join_type="left", grace=grace * S, within=20 * S)
    versions: list[Row] = []
    late: set[str] = set()
    orders: list[Row] = []
    final: dict[str, str | None] = {}
    clock = 0.0
    for i in range(60):
        if rng.random() < 0.5:
            clock += rng.uniform(0, 4)
            rows = [(f"o{i}_{n}", rng.choice("abc"), at(clock)) for n in range(rng.randint(1, 3))]
            batch(conn, "orders", rows, at(0))
            orders += rows
        else:
            w = joins.status(conn, "j").watermark
            rows = [(f"v{i}_{n}", rng.choice("abc"), at(rng.uniform(clock - 15, clock + 5)))
                    for n in range(rng.randint(1, 3))]
            batch(conn, "prices", rows, at(0))
            versions += rows
            late |= {vid for vid, _, t in rows if w is not None and t < w}
        got = answers(conn, "j")
        for oid, (vid, is_final) in got.items():
            if oid in final:
                assert is_final and vid == final[oid], (oid, vid, final[oid])
            elif is_final:
                final[oid] = vid
    recorded = {k for (k,) in conn.execute('SELECT key FROM slidewin_joins."j#late"')}
    assert recorded == late and joins.status(conn, "j").late_right == len(late)
    assert late and final  # the run had both
    kept = [v for v in versions if v[0] not in late]
    assert {k: v for k, (v, _) in answers(conn, "j").items()} == {
        oid: valid_at(kept, k, t, 20 * S) for oid, k, t in orders}


def test_a_joined_table_refuses_changes_by_hand_and_drop_takes_what_the_join_made(
    conn: psycopg.Connection,
) -> None:
    declare(conn)
    batch(conn, "prices", [("v1", "a", at(0))], at(0))
    joins.define(conn, "j", left="orders", right="prices", on="k", kind="asof")
    for change in ("UPDATE slidewin_streams.prices SET k = 'b'",
                   "DELETE FROM slidewin_streams.prices"):
        with pytest.raises(psycopg.errors.ObjectInUse, match="stream prices is joined by j"), \
                conn.transaction():
            conn.execute(change)
    conn.execute("UPDATE slidewin_streams.orders SET k = 'b'")  # the left side: read when asked
    assert joins.drop(conn, "j") == 0
    assert conn.execute("SELECT to_regclass('slidewin_joins.\"j#late\"')").fetchone() == (None,)
    assert conn.execute("SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'joins_%'"
                        ).fetchone() == (0,)
    conn.execute("DELETE FROM slidewin_streams.prices")  # no join: the table's own to change
    with pytest.raises(ProcedureError, match="no join named 'j'"):
        joins.status(conn, "j")
