"""Declared streams: typed tables, exact rollups for every measure type, windows, retention,
names that cannot inject, and streams that never see each other's events."""

from __future__ import annotations

import decimal
import json
import math
import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from slidewin.client.cli.root import cli
from slidewin.db import streams, windows
from slidewin.db.errors import ConfigError, ProcedureError
from slidewin.db.streams import Column
from slidewin.jobs.retention import nibble_streams
from tests.conftest import T0
from tests.waiting import wait_until

S = timedelta(seconds=1)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def define(conn: psycopg.Connection, name: str = "sensors", vtype: str = "double precision",
           **kw: Any) -> streams.Stream:
    return streams.define(
        conn, name, key="sensor", time="ts",
        columns=[Column("sensor", "text"), Column("v", vtype), Column("site", "text")],
        measures=["v"], **kw)


def insert(conn: psycopg.Connection, name: str, rows: list[tuple[str, datetime, Any]]) -> int:
    cur = conn.cursor()
    cur.executemany(
        sql.SQL("INSERT INTO {} (sensor, ts, v) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING")
        .format(sql.Identifier("slidewin_streams", name)), rows)
    return cur.rowcount


def raw(conn: psycopg.Connection, name: str) -> list[tuple[str, datetime, Any]]:
    # text, so that a double comes back as its shortest round-trip decimal, exactly
    conn.execute("SET extra_float_digits = 1")
    return conn.execute(
        sql.SQL("SELECT sensor, ts, v::text FROM {}").format(
            sql.Identifier("slidewin_streams", name))).fetchall()


def brute(rows: list[tuple[str, datetime, Any]]) -> dict[datetime, dict[str, Any]]:
    """Per second, from the raw rows: n, values, the exact sum of the finite values, min, max
    and the NaN/+Inf/-Inf counts -- what the rollups must hold."""
    out: dict[datetime, dict[str, Any]] = {}
    decimal.getcontext().prec = 2000  # exact: doubles span 10^-324 .. 10^308
    for _, ts, text in rows:
        sec = ts.replace(microsecond=0)
        b = out.setdefault(sec, {"n": 0, "cnt": 0, "sum": Decimal(0), "vals": [], "nan": 0,
                                 "pinf": 0, "ninf": 0})
        b["n"] += 1
        if text is None:
            continue
        b["cnt"] += 1
        d = Decimal(text)
        if d.is_nan():
            b["nan"] += 1
        elif d == Decimal("Infinity"):
            b["pinf"] += 1
            b["vals"].append(d)
        elif d == Decimal("-Infinity"):
            b["ninf"] += 1
            b["vals"].append(d)
        else:
            b["sum"] += d
            b["vals"].append(d)
    return out


def rollups(conn: psycopg.Connection, name: str, double: bool) -> dict[datetime, dict[str, Any]]:
    conn.execute("SET extra_float_digits = 1")
    odd = ", v_nan, v_pinf, v_ninf" if double else ", 0, 0, 0"
    rows = conn.execute(sql.SQL(
        "SELECT sec, n, v_n, v_sum, v_min::text, v_max::text" + odd + " FROM {}"
    ).format(sql.Identifier("slidewin_rollups", name))).fetchall()
    return {r[0]: {"n": r[1], "cnt": r[2], "sum": r[3],
                   "min": None if r[4] is None else Decimal(r[4]),
                   "max": None if r[5] is None else Decimal(r[5]),
                   "nan": r[6], "pinf": r[7], "ninf": r[8]} for r in rows}


def assert_minutes_exact(conn: psycopg.Connection, name: str, double: bool) -> None:
    """The minute grain equals the second rollups summed per minute."""
    odd = ", sum(v_nan), sum(v_pinf), sum(v_ninf)" if double else ""
    seconds = sql.Identifier("slidewin_rollups", name)
    minutes = sql.Identifier("slidewin_rollups", name + "#minute")
    want = conn.execute(sql.SQL(
        "SELECT date_trunc('minute', sec, 'UTC'), sum(n), sum(v_n), sum(v_sum), min(v_min), "
        "max(v_max)" + odd + " FROM {} GROUP BY 1 ORDER BY 1").format(seconds)).fetchall()
    odd_m = ", v_nan, v_pinf, v_ninf" if double else ""
    got = conn.execute(sql.SQL(
        "SELECT sec, n, v_n, v_sum, v_min, v_max" + odd_m + " FROM {} ORDER BY 1"
    ).format(minutes)).fetchall()
    assert got == want


def assert_exact(conn: psycopg.Connection, name: str, double: bool) -> None:
    assert_minutes_exact(conn, name, double)
    want = brute(raw(conn, name))
    got = rollups(conn, name, double)
    assert set(got) == set(want)
    for sec, b in want.items():
        g = got[sec]
        assert (g["n"], g["cnt"], g["sum"]) == (b["n"], b["cnt"], b["sum"]), sec
        assert (g["nan"], g["pinf"], g["ninf"]) == (b["nan"], b["pinf"], b["ninf"]), sec
        assert g["min"] == (min(b["vals"]) if b["vals"] else None), sec
        assert g["max"] == (max(b["vals"]) if b["vals"] else None), sec


def assert_summary_exact(conn: psycopg.Connection, start: datetime, end: datetime) -> None:
    """stream_summary over [start, end) equals the raw rows' count, sum, min and max (of the
    seconds starting in the range: the rollups' grain)."""
    vals = [Decimal(text) for _, ts, text in raw(conn, "sensors")
            if text is not None and start <= ts.replace(microsecond=0) < end]
    got = streams.summary(conn, "sensors", start, end)
    assert got["cnt"] == len(vals)
    finite = [v for v in vals if v.is_finite()]
    if not vals:
        assert got["total"] is None
    elif any(v.is_nan() for v in vals) or {Decimal("Infinity"), Decimal("-Infinity")} <= set(vals):
        assert got["total"].is_nan()
    elif Decimal("Infinity") in vals or Decimal("-Infinity") in vals:
        assert got["total"] == next(v for v in vals if v.is_infinite())
    else:
        assert got["total"] == sum(finite)
    ordered = [v for v in vals if not v.is_nan()]
    assert got["vmin"] == (min(ordered) if ordered else None)
    assert got["vmax"] == (max(ordered) if ordered else None)


VALUES = {
    "bigint": lambda r: r.choice([r.randint(-2**62, 2**62), r.randint(-5, 5), None]),
    "integer": lambda r: r.choice([r.randint(-2**31, 2**31 - 1), r.randint(-5, 5), None]),
    "numeric(12,2)": lambda r: r.choice([Decimal(r.randint(-10**11, 10**11)) / 100, None]),
    "double precision": lambda r: r.choice(
        [r.uniform(-1e6, 1e6), r.choice([0.1, 0.2, -0.1, -0.3, 1e300, -1e300, 5e-324]),
         math.nan, math.inf, -math.inf, None, r.uniform(-1, 1) * 10 ** r.randint(-300, 300)]),
}


@pytest.mark.parametrize("vtype", sorted(VALUES))
def test_rollups_equal_a_brute_force_under_inserts_duplicates_deletes_and_nibbles(
    conn: psycopg.Connection, vtype: str
) -> None:
    rng = random.Random(vtype)
    define(conn, vtype=vtype, history=timedelta(seconds=40))
    double = vtype == "double precision"
    for step in range(30):
        rows = [(f"s{rng.randint(0, 5)}", at(rng.randint(0, 3000) / 10), VALUES[vtype](rng))
                for _ in range(rng.randint(1, 40))]
        insert(conn, "sensors", rows + rows[:3])  # duplicates are never stored twice
        if step % 4 == 1:  # deletes of random rows, one statement
            conn.execute("DELETE FROM slidewin_streams.sensors WHERE sensor = %s AND ts < %s",
                         (f"s{rng.randint(0, 5)}", at(rng.randint(0, 300))))
        if step % 5 == 2:  # an update takes values away (min and max must follow)
            conn.execute("UPDATE slidewin_streams.sensors SET v = NULL "
                         "WHERE sensor = %s AND ts > %s", (f"s{rng.randint(0, 5)}", at(150)))
        if step % 7 == 3:
            streams.nibble(conn, "sensors", at(rng.randint(40, 120)), chunk=7)
        assert_exact(conn, "sensors", double)
        lo, hi = sorted(rng.sample(range(0, 3000), 2))  # any range: minutes and seconds
        assert_summary_exact(conn, at(lo / 10), at(hi / 10))


def test_doubles_that_cancel_sum_to_exactly_zero_and_nan_leaves_with_its_row(
    conn: psycopg.Connection,
) -> None:
    define(conn)
    insert(conn, "sensors", [("a", at(0.1), 0.1), ("b", at(0.2), 0.2), ("c", at(0.3), -0.3)])
    whole = streams.summary(conn, "sensors", at(0), at(60))
    assert whole["total"] == 0 and whole["cnt"] == 3  # 0.1 + 0.2 - 0.3 is 5.55e-17 in floats
    insert(conn, "sensors", [("d", at(1.5), math.nan)])
    assert streams.summary(conn, "sensors", at(0), at(60))["total"].is_nan()
    conn.execute("DELETE FROM slidewin_streams.sensors WHERE sensor = 'd'")
    assert streams.summary(conn, "sensors", at(0), at(60))["total"] == 0
    insert(conn, "sensors", [("e", at(2), math.inf)])
    got = streams.summary(conn, "sensors", at(0), at(60))
    assert got["total"] == Decimal("Infinity") and got["avg"] == math.inf
    insert(conn, "sensors", [("f", at(3), -math.inf)])
    assert streams.summary(conn, "sensors", at(0), at(60))["total"].is_nan()


def test_an_empty_window_says_no_data_never_zero(conn: psycopg.Connection) -> None:
    define(conn)
    insert(conn, "sensors", [("a", at(1), None)])  # a row, no value
    got = streams.summary(conn, "sensors", at(0), at(60))
    assert (got["n"], got["cnt"], got["total"], got["vmin"], got["avg"]) == (1, 0, None, None,
                                                                             None)
    assert streams.summary(conn, "sensors", at(100), at(160))["total"] is None


def test_windows_equal_the_raw_rows_for_every_kind(conn: psycopg.Connection) -> None:
    define(conn, vtype="numeric(12,2)")
    rng = random.Random(7)
    rows = [(f"s{i % 4}", at(rng.randint(0, 1200) / 10), Decimal(rng.randint(-999, 999)) / 100)
            for i in range(300)]
    insert(conn, "sensors", rows)
    stored: dict[tuple[str, datetime], Decimal] = {}
    for k, t, v in rows:
        stored.setdefault((k, t), v)  # the first of duplicates is the one stored

    def expect(lo: datetime, hi: datetime) -> tuple[int, Decimal | None, Decimal | None]:
        vals = [v for (_, t), v in stored.items() if lo <= t < hi]
        return len(vals), (sum(vals) if vals else None), (max(vals) if vals else None)

    for w in streams.windows(conn, "sensors", "hopping", size=10 * S, advance=5 * S,
                             start=at(0), end=at(120)):
        assert (w.cnt, w.total, w.vmax) == expect(w.window_start, w.window_end)
    for w in streams.windows(conn, "sensors", "sliding", size=3 * S, start=at(0), end=at(120)):
        assert (w.cnt, w.total, w.vmax) == expect(w.window_start, w.window_end + S)
    tumbling = streams.windows(conn, "sensors", "tumbling", size=60 * S, start=at(0),
                               end=at(120))
    assert sum(w.cnt for w in tumbling) == len(stored)
    # whole minutes over a range of whole minutes: read from the minute grain
    for w in streams.windows(conn, "sensors", "hopping", size=120 * S, advance=60 * S,
                             start=at(-60), end=at(120)):
        assert (w.cnt, w.total, w.vmax) == expect(w.window_start, w.window_end)


def test_two_streams_with_the_same_keys_never_see_each_others_events(
    conn: psycopg.Connection,
) -> None:
    define(conn, "left_s", vtype="bigint")
    define(conn, "right_s", vtype="bigint")
    insert(conn, "left_s", [("a", at(1), 1), ("b", at(2), 2)])
    insert(conn, "right_s", [("a", at(1), 100)])
    assert streams.summary(conn, "left_s", at(0), at(60))["total"] == 3
    assert streams.summary(conn, "right_s", at(0), at(60))["total"] == 100
    conn.execute("DELETE FROM slidewin_streams.left_s")
    assert streams.summary(conn, "right_s", at(0), at(60))["total"] == 100
    assert conn.execute("SELECT count(*) FROM slidewin.events").fetchone() == (0,)


BAD_NAMES = ['x"; DROP TABLE slidewin.events; --', "Robert'); DROP", "a b", "1abc", "", "x" * 60,
             'a"b', "Upper"]


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_a_name_with_quotes_or_semicolons_is_refused_never_executed(
    conn: psycopg.Connection, bad: str
) -> None:
    tables = conn.execute("SELECT count(*) FROM pg_class").fetchone()
    for kind in ("stream", "key", "time", "column", "measure"):
        args: dict[str, Any] = {"key": "k", "time": "ts", "columns": [Column("k", "text"),
                                Column("v", "bigint")], "measures": ["v"]}
        name = "s"
        if kind == "stream":
            name = bad
        elif kind in ("key", "time"):
            args[kind] = bad
        elif kind == "column":
            args["columns"] = [*args["columns"], Column(bad, "text")]
        else:
            args["measures"] = [bad]
        with pytest.raises(ProcedureError):
            streams.define(conn, name, **args)
    with pytest.raises(ProcedureError):
        streams.define(conn, "s", key="k", time="ts",
                       columns=[Column("k", "text"), Column("v", "bigint); DROP TABLE x; --")])
    with pytest.raises(ProcedureError, match="exists already"):
        streams.define(conn, "events", key="k", time="ts", columns=[Column("k", "text")])
    assert conn.execute("SELECT count(*) FROM pg_class").fetchone() == tables
    assert conn.execute("SELECT count(*) FROM slidewin.streams WHERE NOT builtin").fetchone() \
        == (0,)


def test_types_are_real_columns_a_psql_user_can_select(conn: psycopg.Connection) -> None:
    streams.define(conn, "orders", key="customer", time="ordered_at", columns=[
        Column("customer", "bigint"), Column("amount", "numeric(12,2)"), Column("n", "integer"),
        Column("paid", "bool"), Column("shipped_at", "timestamp"), Column("meta", "jsonb"),
        Column("note", "string"), Column("weight", "float8")],
        measures=["amount", "weight"], keep_extra=True)
    types = dict(conn.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'slidewin_streams.orders'::regclass AND attnum > 0").fetchall())
    assert types == {"customer": "bigint", "amount": "numeric(12,2)", "n": "integer",
                     "paid": "boolean", "shipped_at": "timestamp with time zone",
                     "meta": "jsonb", "note": "text", "weight": "double precision",
                     "ordered_at": "timestamp with time zone", "attrs": "jsonb"}
    parts = conn.execute("SELECT count(*) FROM pg_inherits "
                         "WHERE inhparent = 'slidewin_streams.orders'::regclass").fetchone()
    assert parts == (4,)


def test_alter_adds_a_column_without_rewriting_and_a_measure_aggregated_again(
    conn: psycopg.Connection,
) -> None:
    define(conn)
    conn.execute("ALTER TABLE slidewin_streams.sensors ADD COLUMN w bigint")  # a user's column
    conn.execute("UPDATE slidewin.streams SET columns = columns || "
                 "'[{\"name\": \"w\", \"type\": \"bigint\", \"required\": false}]' "
                 "WHERE name = 'sensors'")
    conn.execute("INSERT INTO slidewin_streams.sensors (sensor, ts, v, w) VALUES "
                 "('a', %s, 1.5, 7), ('b', %s, 2.5, 8)", (at(1), at(1.5)))
    filenode = "SELECT pg_relation_filenode('slidewin_streams.\"sensors#0\"')"
    before = conn.execute(filenode).fetchone()
    stream = streams.add_column(conn, "sensors", "hum", "double", measure=True)
    assert stream.measures == ("v", "hum")
    assert conn.execute(filenode).fetchone() == before
    streams.add_measure(conn, "sensors", "w")
    assert streams.summary(conn, "sensors", at(0), at(60), "w")["total"] == 15
    assert streams.summary(conn, "sensors", at(0), at(60), "hum")["cnt"] == 0
    with pytest.raises(ProcedureError, match="cannot be a measure"):
        streams.add_measure(conn, "sensors", "site")
    with pytest.raises(ProcedureError, match="more than one measure"):
        streams.summary(conn, "sensors", at(0), at(60))


def test_drop_removes_tables_rollups_state_and_dead_letters_together(
    conn: psycopg.Connection,
) -> None:
    define(conn)
    insert(conn, "sensors", [("a", at(1), 1.0)])
    conn.execute("SELECT slidewin.ingest_advance('sensors', %s, %s, %s)", (at(1), at(1), S))
    conn.execute("INSERT INTO slidewin.dead_letters (source, reason, raw, stream) "
                 "VALUES ('x', 'malformed', '{', 'sensors')")
    assert streams.drop(conn, "sensors") == 1
    left = conn.execute(
        "SELECT (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "        WHERE n.nspname IN ('slidewin_streams', 'slidewin_rollups')), "
        "(SELECT count(*) FROM slidewin.stream_state WHERE stream = 'sensors'), "
        "(SELECT count(*) FROM slidewin.dead_letters WHERE stream = 'sensors')").fetchone()
    assert left == (0, 0, 0)
    with pytest.raises(ProcedureError, match="no stream named"):
        streams.drop(conn, "sensors")
    with pytest.raises(ProcedureError, match="built in"):
        streams.drop(conn, "events")


def test_the_nibble_is_bounded_and_marks_windows_partial(conn: psycopg.Connection) -> None:
    define(conn, history=timedelta(seconds=30))
    insert(conn, "sensors", [(f"s{i}", at(i / 10), float(i)) for i in range(100)])
    assert streams.nibble(conn, "sensors", at(31.5), chunk=7) == 7
    deleted = 7
    while (n := streams.nibble(conn, "sensors", at(31.5), chunk=7)) > 0:
        assert n <= 7
        deleted += n
    assert deleted == 15  # events before at(1.5) are older than at(31.5) - 30 s
    windows = streams.windows(conn, "sensors", "tumbling", size=S, start=at(0), end=at(3))
    assert [(w.window_start, w.partial) for w in windows] == [(at(1), True), (at(2), False)]
    with pytest.raises(ProcedureError, match="longer than its history"):
        streams.windows(conn, "sensors", "tumbling", size=60 * S, start=at(0), end=at(60))


def newest(conn: psycopg.Connection, name: str, n: int) -> list[tuple[str, datetime, Any]]:
    """The newest ``n`` rows of a stream in (time, key) order -- what a row limit of n keeps."""
    rows = sorted(raw(conn, name), key=lambda r: (r[1], r[0]))
    return sorted(rows[len(rows) - n:])


def test_a_row_limit_keeps_the_newest_rows_in_bounded_chunks_with_exact_rollups(
    conn: psycopg.Connection,
) -> None:
    """100 rows of 4 keys, three to a second (at the same time: the key breaks the tie), a row
    limit of 20: the nibbles delete 7 rows a call at most, the 80 oldest in (time, key) order --
    second 26 split between them -- and the rollups are the rows' after every call."""
    define(conn, max_rows=20)
    rng = random.Random(5)
    insert(conn, "sensors", [(f"s{i % 4}", at(i // 3), rng.uniform(-50, 50))
                             for i in range(100)])
    want = newest(conn, "sensors", 20)
    deleted = []
    while (n := streams.nibble(conn, "sensors", at(1000), chunk=7)) > 0:
        deleted.append(n)
        assert_exact(conn, "sensors", True)
    assert deleted == [7] * 11 + [3] and sorted(raw(conn, "sensors")) == want
    assert streams.row_count(conn, streams.get_stream(conn, "sensors")) == 20
    # s0 and s2 of second 26 went, s3 stayed: that second is partial, the next one whole
    found = streams.windows(conn, "sensors", "tumbling", size=S, start=at(25), end=at(28))
    assert [(w.window_start, w.n, w.partial) for w in found] == [(at(26), 1, True),
                                                                  (at(27), 3, False)]
    # new rows: the retention job's call takes as many of the oldest, and no more
    insert(conn, "sensors", [(f"n{i}", at(40), 1.0) for i in range(5)])
    want = newest(conn, "sensors", 20)
    assert nibble_streams(conn, at(1000), chunk=2) == {"sensors": 5}
    assert sorted(raw(conn, "sensors")) == want
    assert_exact(conn, "sensors", True)


def stream_reads(conn: psycopg.Connection, name: str) -> tuple[int, int]:
    """(times a partition of the stream was read whole, rows fetched through its indexes): the
    server's counters, flushed to be read at once (PostgreSQL 15+)."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute("SELECT sum(seq_scan), sum(idx_tup_fetch) FROM pg_stat_user_tables "
                       "WHERE schemaname = 'slidewin_streams' AND relname LIKE %s",
                       (f"{name}#%",)).fetchone()
    return int(row[0]), int(row[1])


@pytest.mark.parametrize("limit", ["history", "max_rows"])
def test_a_large_chunk_reads_its_victims_by_the_primary_key_never_a_partition_whole(
    conn: psycopg.Connection, limit: str
) -> None:
    """40,000 rows in 4 partitions, a chunk of 10,000: on paper a hash join over every partition
    read whole is the cheaper delete; the nibble finds each victim by its primary key instead,
    so its cost follows the chunk, not the table."""
    define(conn, vtype="bigint", partitions=4,
           **({"history": 10 * S} if limit == "history" else {"max_rows": 1000}))
    conn.execute("INSERT INTO slidewin_streams.sensors (sensor, ts, v) SELECT 's' || (g %% 500), "
                 "%s + g * interval '10 ms', g FROM generate_series(1, 40000) g", (at(0),))
    conn.execute("VACUUM ANALYZE slidewin_streams.sensors")
    before = stream_reads(conn, "sensors")
    assert streams.nibble(conn, "sensors", at(1000), chunk=10_000) == 10_000
    after = stream_reads(conn, "sensors")
    assert after[0] == before[0], "a partition was read whole"
    assert after[1] - before[1] <= 2 * 10_000 + 100
    assert conn.execute("SHOW enable_seqscan").fetchone() == ("on",)


def test_a_row_limit_and_a_history_both_hold(conn: psycopg.Connection) -> None:
    """Rows every half second over 50 s, history 30 s and at most 50 rows: at 40 s the row limit
    is the tighter (50 rows stay, not 60), at 60 s the history (40 rows stay, not 50)."""
    define(conn, vtype="bigint", history=30 * S, max_rows=50)
    insert(conn, "sensors", [("s", at(i / 2), i) for i in range(100)])
    assert nibble_streams(conn, at(40), chunk=1000) == {"sensors": 50}
    assert sorted(t for _, t, _ in raw(conn, "sensors"))[0] == at(25)
    assert nibble_streams(conn, at(60), chunk=1000) == {"sensors": 10}
    assert sorted(t for _, t, _ in raw(conn, "sensors"))[0] == at(30)
    assert nibble_streams(conn, at(60), chunk=1000) == {}
    assert_exact(conn, "sensors", False)


def test_a_row_limit_is_refused_below_one_on_a_table_and_on_events(
    conn: psycopg.Connection,
) -> None:
    with pytest.raises(ConfigError, match="--max-rows must be 1 or more"):
        define(conn, max_rows=0)
    with pytest.raises(ConfigError, match="a table .* keeps every version"):
        define(conn, is_table=True, max_rows=10)
    define(conn)
    assert streams.set_retention(conn, "sensors", history=None, grace=None,
                                 max_rows=1000).max_rows == 1000
    assert streams.set_retention(conn, "sensors", history=30 * S, grace=None).max_rows == 1000
    assert streams.set_retention(conn, "sensors", history=None, grace=None,
                                 no_row_limit=True).max_rows is None
    # whoever writes the registry: psql too
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="1 or more"):
        conn.execute("UPDATE slidewin.streams SET max_rows = 0 WHERE name = 'sensors'")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="retention policy"):
        conn.execute("UPDATE slidewin.streams SET max_rows = 10 WHERE name = 'events'")
    define(conn, "prices", is_table=True)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="a table keeps every"):
        conn.execute("UPDATE slidewin.streams SET max_rows = 10 WHERE name = 'prices'")
    assert streams.nibble(conn, "prices", at(0)) == 0


def test_final_follows_the_streams_own_watermark(conn: psycopg.Connection) -> None:
    define(conn, grace=2 * S)
    insert(conn, "sensors", [("a", at(1), 1.0), ("a", at(12), 2.0)])
    conn.execute("SELECT slidewin.ingest_advance('sensors', %s, %s, %s)", (at(12), at(12), 2 * S))
    windows = streams.windows(conn, "sensors", "tumbling", size=5 * S, start=at(0), end=at(20))
    assert [(w.window_start, w.final) for w in windows] == [(at(0), True), (at(10), False)]


@pytest.fixture
def runner_env(store_dsn: str, conn: psycopg.Connection) -> Iterator[dict[str, str]]:
    yield {"SLIDEWIN_DSN": store_dsn}


def run(env: dict[str, str], *args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(cli, list(args), env=env, input=input, catch_exceptions=False)


def test_the_cli_declares_lists_shows_alters_queries_and_drops(
    runner_env: dict[str, str], conn: psycopg.Connection
) -> None:
    added = run(runner_env, "streams", "add", "sensors", "--key", "sensor", "--time", "ts",
                "--column", "temp:double", "--column", "amount:numeric(12,2)",
                "--measure", "temp", "--measure", "amount", "--history", "1h", "--json")
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["measures"] == ["temp", "amount"]
    for what, want in (("count", 0), ("sum", None), ("max", None)):  # none yet: as for events
        for stream in ("events", "sensors"):
            got = run(runner_env, "query", what, "--stream", stream, "--measure",
                      "val" if stream == "events" else "amount", "--seconds", "60",
                      "--relative-to", "stream", "--json")
            assert json.loads(got.stdout)["value"] == want, (what, stream, got.output)
    conn.execute("INSERT INTO slidewin_streams.sensors (sensor, ts, temp, amount) VALUES "
                 "('a', %s, 1.5, 2.25), ('b', %s, 2.5, 1.00)", (at(1), at(2)))
    listed = json.loads(run(runner_env, "streams", "list", "--json").stdout)
    assert {s["name"]: s["rows"] for s in listed["streams"]} == {"events": None, "sensors": 2}
    assert "amount" in run(runner_env, "streams", "show", "sensors").stdout
    got = run(runner_env, "windows", "tumbling", "--stream", "sensors", "--measure", "amount",
              "--size", "10s", "--from", at(0).isoformat(), "--to", at(60).isoformat(), "--json")
    assert got.exit_code == 0, got.output
    body = json.loads(got.stdout)
    assert body["stream"] == "sensors"
    assert [(w["n"], w["sum"], w["max"]) for w in body["windows"]] == [(2, 3.25, 2.25)]
    keyed = run(runner_env, "windows", "tumbling", "--stream", "sensors", "--measure", "amount",
                "--key", "b", "--size", "10s", "--from", at(0).isoformat(), "--to",
                at(60).isoformat(), "--json")
    assert [(w["n"], w["sum"]) for w in json.loads(keyed.stdout)["windows"]] == [(1, 1)]
    refused = run(runner_env, "windows", "tumbling", "--stream", "sensors", "--size", "10s",
                  "--last", "1m")
    assert refused.exit_code == 2 and "--measure" in refused.output
    for what, want in (("sum", 3.25), ("max", 2.25), ("min", 1), ("count", 2), ("avg", 1.625)):
        got = run(runner_env, "query", what, "--stream", "sensors", "--measure", "amount",
                  "--seconds", "60", "--relative-to", "stream", "--json")
        assert json.loads(got.stdout)["value"] == want, (what, got.output)
    status = json.loads(run(runner_env, "db", "status", "--stream", "sensors", "--json").stdout)
    assert (status["rows"], status["seconds"], status["history_s"]) == (2, 2, 3600)
    whole = json.loads(run(runner_env, "db", "status", "--json").stdout)
    assert [s["stream"] for s in whole["streams"]] == ["sensors"]
    altered = run(runner_env, "streams", "alter", "sensors", "--add-column", "hum:double",
                  "--as-measure", "--history", "forever")
    assert altered.exit_code == 0, altered.output
    assert streams.get_stream(conn, "sensors").history is None
    no = run(runner_env, "streams", "drop", "sensors")
    assert no.exit_code == 2 and "--yes" in no.output
    assert run(runner_env, "streams", "drop", "sensors", "--yes").exit_code == 0
    bad = run(runner_env, "streams", "add", "x;drop", "--key", "k", "--time", "ts")
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1


def test_the_cli_sets_shows_and_removes_a_row_limit(
    runner_env: dict[str, str], conn: psycopg.Connection
) -> None:
    added = run(runner_env, "streams", "add", "sensors", "--key", "sensor", "--time", "ts",
                "--column", "temp:double", "--measure", "temp", "--history", "1h",
                "--max-rows", "1k", "--json")
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["max_rows"] == 1000
    assert "history 3600s, max 1000 rows" in run(runner_env, "streams", "show", "sensors").stdout
    status = json.loads(run(runner_env, "db", "status", "--stream", "sensors", "--json").stdout)
    assert (status["history_s"], status["max_rows"]) == (3600, 1000)
    assert "max rows 1000" in run(runner_env, "db", "status", "--stream", "sensors").stdout
    altered = run(runner_env, "streams", "alter", "sensors", "--max-rows", "2M", "--json")
    assert json.loads(altered.stdout)["max_rows"] == 2_000_000
    bad = run(runner_env, "streams", "alter", "sensors", "--max-rows", "0")
    assert bad.exit_code == 2 and "--max-rows must be 1 or more" in bad.output
    removed = run(runner_env, "streams", "alter", "sensors", "--max-rows", "none", "--json")
    assert json.loads(removed.stdout)["max_rows"] is None
    assert streams.get_stream(conn, "sensors").history == timedelta(hours=1)


def test_infer_prints_the_declaration_and_asks(
    runner_env: dict[str, str], conn: psycopg.Connection, tmp_path: Path
) -> None:
    sample = tmp_path / "views.jsonl"
    sample.write_text('{"user_id": "u1", "ts": "2026-01-01T12:00:00Z", "ms": 12, "path": "/a", '
                      '"score": 0.5, "tags": ["x"]}\n'
                      '{"user_id": "u2", "ts": "2026-01-01T12:00:01Z", "ms": 7, "path": "/b", '
                      '"score": 1, "tags": []}\n')
    declined = run(runner_env, "streams", "add", "views", "--infer", str(sample), input="n\n")
    assert declined.exit_code == 1
    assert "--key user_id:text --time ts" in declined.output
    assert streams.list_streams(conn, declared_only=True) == []
    accepted = run(runner_env, "streams", "add", "views", "--infer", str(sample), "--yes")
    assert accepted.exit_code == 0, accepted.output
    stream = streams.get_stream(conn, "views")
    assert {c.name: c.type for c in stream.columns} == {
        "user_id": "text", "ts": "timestamptz", "ms": "bigint", "path": "text",
        "score": "double precision", "tags": "jsonb"}
    assert stream.measures == ("ms", "score")


@pytest.mark.parametrize("key_type", ["text", "bigint"])
def test_a_keys_windows_are_its_own_events_alone(conn: psycopg.Connection, key_type: str) -> None:
    streams.define(conn, "orders", key="customer", time="ts", measures=["amount", "w"],
                   columns=[Column("customer", key_type), Column("amount", "numeric(12,2)"),
                            Column("w", "double precision")])
    rng = random.Random(key_type)
    rows = [(str(rng.randint(1, 4)) if key_type == "text" else rng.randint(1, 4),
             at(rng.randint(0, 600) / 10), Decimal(rng.randint(0, 9999)) / 100,
             rng.choice([1.5, -0.25, math.nan, None])) for _ in range(200)]
    conn.cursor().executemany("INSERT INTO slidewin_streams.orders (customer, ts, amount, w) "
                              "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING", rows)
    stored: dict[tuple[Any, datetime], tuple[Decimal, Any]] = {}
    for k, t, a, w in rows:
        stored.setdefault((k, t), (a, w))
    for key in ("1", "3"):
        mine = {t: v for (k, t), v in stored.items() if str(k) == key}
        for w in streams.windows(conn, "orders", "tumbling", size=10 * S, start=at(0),
                                 end=at(60), measure="amount", key=key):
            vals = [a for t, (a, _) in mine.items() if w.window_start <= t < w.window_end]
            assert (w.cnt, w.total, w.vmax) == (len(vals), sum(vals), max(vals))
        got = streams.summary(conn, "orders", at(0), at(60), "w", key=key)
        doubles = [d for t, (_, d) in mine.items() if d is not None and t < at(60)]
        assert got["cnt"] == len(doubles)
        assert (got["total"].is_nan() if any(math.isnan(d) for d in doubles)
                else got["total"] == sum(Decimal(repr(d)) for d in doubles))
    assert streams.windows(conn, "orders", "sliding", size=S, start=at(0), end=at(60),
                           measure="amount", key="9") == []


def test_follow_final_emits_each_window_of_a_declared_stream_once(
    store_dsn: str, conn: psycopg.Connection
) -> None:
    import threading
    import time

    from slidewin.db import window_follow

    define(conn, grace=S)

    def series(c: psycopg.Connection, s: datetime, e: datetime) -> list[Any]:
        return [streams.as_window(w) for w in
                streams.windows(c, "sensors", "tumbling", size=10 * S, start=s, end=e)]

    follower = window_follow.Follower(
        series, lambda c: at(100), at(0), 10 * S, window_follow.FINAL,
        watermark=lambda c: streams.status(c, "sensors", at(0), at(0)).complete_up_to)
    emitted: list[datetime] = []
    deadline = time.monotonic() + 30

    def consume() -> None:
        with psycopg.connect(store_dsn, autocommit=True) as listener:
            for e in window_follow.follow(listener, follower, lambda: len(emitted) >= 2
                                          or time.monotonic() > deadline, wait_s=0.1,
                                          stream="sensors"):
                emitted.append(e.window.start)

    # each batch only once the follower's last look has ended, having shown what was final by
    # then: a batch that commits between a look's read of the windows and its read of the
    # watermark moves the follower past a window it has not shown (a race of Follower.poll)
    looks: list[int] = []  # per finished look: the windows it emitted
    look = follower.poll

    def counted(c: psycopg.Connection) -> list[window_follow.Emission]:
        out = look(c)
        looks.append(len(out))
        return out

    follower.poll = counted  # type: ignore[method-assign]
    thread = threading.Thread(target=consume)
    thread.start()
    for shown, rows, newest in ((0, [("a", at(1), 1.0), ("a", at(12), 2.0)], at(12)),
                                (1, [("a", at(25), 3.0)], at(25))):
        wait_until(lambda n=shown: looks and sum(looks) >= n, 30,
                   what=f"a look that showed {shown} window(s) to end")
        with conn.transaction():  # as a batch of the ingest: rows and watermark together
            insert(conn, "sensors", rows)
            conn.execute("SELECT slidewin.ingest_advance('sensors', %s, %s, %s)",
                         (newest, newest, S))
    thread.join(timeout=40)
    assert emitted == [at(0), at(10)]


def test_count_windows_and_lookups_of_a_declared_stream(
    runner_env: dict[str, str], conn: psycopg.Connection
) -> None:
    define(conn, vtype="bigint")
    insert(conn, "sensors", [(f"s{i % 2}", at(i), i) for i in range(1, 11)])
    found = streams.count_windows(conn, "sensors", 3, 2, 8)
    assert [(w.number, w.n, w.total, w.vmin, w.vmax) for w in found] == [
        (1, 3, 27, 8, 10), (2, 3, 21, 6, 8), (3, 3, 15, 4, 6)]
    keyed = streams.count_windows(conn, "sensors", 2, key="s1")
    assert [(w.n, w.total) for w in keyed] == [(2, 16)]  # 9 and 7
    looked = streams.windows_at(conn, "sensors", 10 * S, 5 * S, at(7))
    assert [(w.start, w.n, w.total) for w in looked] == [(at(0), 9, 45), (at(5), 6, 45)]
    empty = streams.windows_at(conn, "sensors", 10 * S, 10 * S, at(100))
    assert [(w.start, w.n, w.total) for w in empty] == [(at(100), 0, None)]
    rows = run(runner_env, "windows", "rows", "--stream", "sensors", "--size", "3", "--json")
    assert json.loads(rows.stdout)["windows"][0]["sum"] == 27
    current = run(runner_env, "windows", "current", "--stream", "sensors", "--size", "10s",
                  "--relative-to", at(7).isoformat(), "--json")
    assert [w["sum"] for w in json.loads(current.stdout)["windows"]] == [45]


def test_count_windows_of_a_stream_holding_fewer_events_than_rows_are_the_events_ones(
    conn: psycopg.Connection,
) -> None:
    """Every window that fits in the newest ``rows`` and holds an event, the last ones short, as
    slidewin.count_windows gives them for events -- not only the whole windows, and not one
    short window or none depending on how the shortfall divides by the advance."""
    define(conn, vtype="bigint")
    insert(conn, "sensors", [("s", at(i), i) for i in range(1, 6)])  # 5 events: 5, 4, ... 1
    for i in range(1, 6):
        conn.execute("SELECT slidewin.insert_event('s', %s, %s)", (i, at(i)))
    for size, advance, rows in ((3, 1, 10), (3, 2, 10), (4, 4, 12), (6, 2, 8), (7, 1, 7)):
        got = streams.count_windows(conn, "sensors", size, advance, rows)
        want = windows.count_windows(conn, size, advance, rows)
        assert [(w.number, w.n, w.total, w.vmin, w.vmax) for w in got] == \
            [(w.number, w.n, w.total, w.vmin, w.vmax) for w in want], (size, advance, rows)
    assert [(w.number, w.n, w.total) for w in streams.count_windows(conn, "sensors", 3, 2, 10)
            ] == [(1, 3, 12), (2, 3, 6), (3, 1, 1)]  # 5+4+3, 3+2+1, 1
    keyed = streams.count_windows(conn, "sensors", 4, 4, 12, key="s")
    assert [(w.number, w.n, w.total) for w in keyed] == [(1, 4, 14), (2, 1, 1)]


def waiting_for_a_lock(conn: psycopg.Connection) -> int:
    """Sessions of this database blocked on a lock (a heavyweight one: a row, a table)."""
    return conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock'"
    ).fetchone()[0]


def test_a_nibble_and_a_batch_of_the_same_minute_wait_for_each_other_never_deadlock(
    store_dsn: str, conn: psycopg.Connection
) -> None:
    """The batch holds its stream's registry row (FOR SHARE) from its start; the nibble takes
    that row before any rollup row, so it waits for the batch instead of locking the minute
    the batch then inserts into (which deadlocked)."""
    import threading

    define(conn, history=30 * S)
    insert(conn, "sensors", [(f"old{i}", at(i), float(i)) for i in range(10)])
    failures: list[BaseException] = []
    with psycopg.connect(store_dsn) as batch:
        batch.execute("SELECT 1 FROM slidewin.streams WHERE name = 'sensors' FOR SHARE")

        def nibble() -> None:
            try:
                with psycopg.connect(store_dsn, autocommit=True) as c:
                    streams.nibble(c, "sensors", at(45), chunk=100)
            except BaseException as exc:  # reported below
                failures.append(exc)

        worker = threading.Thread(target=nibble)
        worker.start()
        wait_until(lambda: waiting_for_a_lock(conn) or not worker.is_alive(), 30,
                   what="the nibble to wait for the batch's lock")
        insert(batch, "sensors", [("new", at(40), 1.0)])  # the same minute as the old rows
        batch.commit()
        worker.join(timeout=30)
    assert not failures, failures
    assert conn.execute("SELECT count(*) FROM slidewin_streams.sensors").fetchone() == (1,)
    assert_exact(conn, "sensors", True)
