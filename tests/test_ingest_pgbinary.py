"""Binary COPY data built with numpy (ingest.pgbinary) reads back in PostgreSQL exactly as the
same rows sent as CSV: one and many uuid lengths, multi-byte text, timestamps before and after
PostgreSQL's 2000-01-01 epoch, negative and extreme vals, slices and multi-chunk columns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from slidewin.ingest.pgbinary import encode_events
from slidewin.ingest.sink import to_csv

TS = pa.timestamp("us", tz="UTC")
COLUMNS = "part smallint, uuid text, val bigint, ts timestamptz"


def events(uuids: list[str], start: datetime = datetime(2026, 1, 1, tzinfo=UTC)) -> pa.Table:
    n = len(uuids)
    return pa.table({
        "part": pa.array([i % 7 for i in range(n)], pa.int16()),
        "uuid": pa.array(uuids, pa.string()),
        "val": pa.array([(-1) ** i * (i * 7919) for i in range(n)], pa.int64()),
        "ts": pa.array([start + timedelta(microseconds=i * 333_333) for i in range(n)], TS),
    })


def roundtrip(conn, table: pa.Table) -> tuple[list, list]:
    """(rows read back from binary, rows read back from CSV), both in insertion order."""
    got = []
    for fmt, data in (("binary", encode_events(table)), ("csv", to_csv(table))):
        conn.execute(f"CREATE TEMP TABLE rt_{fmt} (n serial, {COLUMNS})")
        with conn.cursor().copy(
            f"COPY rt_{fmt} (part, uuid, val, ts) FROM STDIN (FORMAT {fmt})"
        ) as copy:
            copy.write(data)
        got.append(conn.execute(f"SELECT part, uuid, val, ts FROM rt_{fmt} ORDER BY n").fetchall())
        conn.execute(f"DROP TABLE rt_{fmt}")
    return got[0], got[1]


@pytest.mark.parametrize(
    "table",
    [
        events([f"{i:036d}" for i in range(1000)]),  # one length: the 2-D fast path
        events(["a", "ééé", "x" * 200, "", "日本語", "b"]),  # many lengths
        events([f"u{i}" * (i % 5 + 1) for i in range(50)], datetime(1999, 12, 31, 23, 59, 59,
                                                                      tzinfo=UTC)),
        events([f"{i:036d}" for i in range(100)]).slice(37, 40),  # offsets not at zero
        pa.concat_tables([events(["p", "qq"]), events(["rrr", "s"])]),  # two chunks
    ],
    ids=["one-length", "many-lengths", "around-2000", "slice", "chunks"],
)
def test_binary_reads_back_as_csv_does(conn, table):
    binary, csv = roundtrip(conn, table)
    assert binary == csv and len(binary) == table.num_rows


def test_extreme_values_and_an_empty_table(conn):
    table = pa.table({
        "part": pa.array([0, 999], pa.int16()),
        "uuid": ["min", "max"],
        "val": pa.array([-(2**63), 2**63 - 1], pa.int64()),
        "ts": pa.array([datetime(1970, 1, 1, tzinfo=UTC), datetime(2262, 1, 1, tzinfo=UTC)], TS),
    })
    binary, csv = roundtrip(conn, table)
    assert binary == csv and binary[0][2] == -(2**63)
    assert roundtrip(conn, table.slice(0, 0)) == ([], [])


def test_a_null_is_refused_before_anything_is_sent():
    table = events(["a", "b"]).set_column(2, "val", pa.array([1, None], pa.int64()))
    with pytest.raises(ValueError, match="NULL in part, uuid, val or ts"):
        encode_events(table)


# -- a declared stream's columns (encode_table) ----------------------------------------------

WIDE = [("k", "text"), ("ts", "timestamptz"), ("x", "double precision"), ("n", "bigint"),
        ("i", "integer"), ("ok", "boolean"), ("amount", "numeric(12,2)"),
        ("tiny", "numeric(5,5)"), ("whole", "numeric(14,0)"), ("meta", "jsonb")]


def wide_table(n: int, offset: int = 0) -> pa.Table:
    from decimal import Decimal

    def some(values):
        return [None if (i + offset) % 5 == 3 else v for i, v in enumerate(values)]

    base = datetime(2026, 1, 1, tzinfo=UTC)
    return pa.table({
        "k": pa.array([f"k{i}" + "é" * (i % 3) for i in range(n)]),
        "ts": pa.array([base - timedelta(days=i * 3000, microseconds=i) for i in range(n)], TS),
        "x": pa.array(some([(-1.5) ** i * 1e-3 if i % 7 else float("nan") for i in range(n)])),
        "n": pa.array(some([(-1) ** i * 2**62 // (i + 1) for i in range(n)]), pa.int64()),
        "i": pa.array(some([(-1) ** i * (2**31 - 1) // (i + 1) for i in range(n)]), pa.int32()),
        "ok": pa.array(some([i % 2 == 0 for i in range(n)])),
        "amount": pa.array(some([Decimal((-1) ** i * (i * 1234567 % 10**12)) / 100
                                 for i in range(n)]), pa.decimal128(12, 2)),
        "tiny": pa.array(some([Decimal(i % 100000) / 100000 * (-1) ** i for i in range(n)]),
                         pa.decimal128(5, 5)),
        "whole": pa.array(some([Decimal(10**13 - i) for i in range(n)]), pa.decimal128(14, 0)),
        "meta": pa.array([None] * n, pa.string()),
    })


@pytest.mark.parametrize("n", [0, 1, 2, 97])
def test_a_declared_streams_rows_read_back_as_sent(conn, n):
    from psycopg import sql

    from slidewin.ingest.pgbinary import encode_table
    from slidewin.ingest.typed_arrow import csv_bytes

    table = wide_table(n).slice(0, n)
    payload = encode_table(table, [t for _c, t in WIDE])
    assert payload is not None
    defs = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t))
                              for c, t in WIDE)
    got = []
    for form, data in (("binary", payload), ("csv", csv_bytes(table))):
        conn.execute(sql.SQL("CREATE TEMP TABLE t (seq serial, {})").format(defs))
        cols = sql.SQL(", ").join(sql.Identifier(c) for c, _t in WIDE)
        with conn.cursor() as cur, cur.copy(
                sql.SQL("COPY t ({}) FROM STDIN (FORMAT {})").format(cols, sql.SQL(form))) as cp:
            cp.write(data)
        got.append([repr(r) for r in conn.execute("SELECT * FROM t ORDER BY seq")])
        conn.execute("DROP TABLE t")
    assert got[0] == got[1]
    assert len(got[0]) == n


def test_a_type_sent_otherwise_is_no_binary_payload():
    from slidewin.ingest.pgbinary import encode_table

    table = pa.table({"m": pa.array(['{"a": 1}']), "big": pa.array([1], pa.decimal128(30, 2))})
    assert encode_table(table.select(["m"]), ["jsonb"]) is None
    assert encode_table(table.select(["big"]), ["numeric(30,2)"]) is None
