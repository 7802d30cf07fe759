"""The Parquet fast path of declared streams decides exactly as the record path: the same good
rows and the same dead letters, only faster; files it cannot take go to the record path."""

from __future__ import annotations

import io
import math
import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from slidewin.db.streams import Column, Stream
from slidewin.ingest import typed
from slidewin.ingest.typed import Layout, Limits, Parsed, parse_files

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
STREAM = Stream(
    name="wide", key="device", time="ts",
    columns=(Column("device", "text", True), Column("ts", "timestamptz", True),
             Column("temp", "double precision"), Column("amount", "numeric(12,2)"),
             Column("n", "bigint"), Column("small", "integer"), Column("ok", "boolean"),
             Column("label", "text"), Column("seen", "timestamptz")),
    measures=("temp",), history=timedelta(hours=1),
)
LIMITS = Limits(NOW, newest_before=NOW - timedelta(minutes=10), grace=timedelta(minutes=5),
                history=timedelta(hours=1), max_future=timedelta(minutes=1))


def parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def both(table: pa.Table) -> tuple[Parsed, Parsed]:
    content = parquet(table)
    layout = Layout(STREAM)
    fast = parse_files(layout, [("f.parquet", content)], LIMITS)
    slow = Parsed()
    for row, bad, extra in typed._parquet_records(layout, "f.parquet", content, LIMITS):
        slow.extra += int(extra)
        if bad is not None:
            slow.bad.append(bad)
        else:
            assert row is not None
            slow.rows.append(row)
    return fast, slow


def rows_of(parsed: Parsed) -> list[tuple[Any, ...]]:
    rows = list(parsed.rows)
    for t in parsed.tables:
        rows += [tuple(r.values()) for r in t.to_pylist()]
    return sorted(rows, key=repr)


def random_table(seed: int, n: int = 300) -> pa.Table:
    rng = random.Random(seed)

    def ts() -> datetime | None:
        return rng.choice([NOW - timedelta(seconds=rng.randint(0, 300)),  # fine
                           NOW - timedelta(minutes=20), NOW - timedelta(hours=2),  # late, expired
                           NOW + timedelta(minutes=5), None])  # future, missing

    return pa.table({
        "device": pa.array([rng.choice(["a", "b", "", "x\x00y", None]) for _ in range(n)]),
        "ts": pa.array([ts() for _ in range(n)], pa.timestamp("us", tz="UTC")),
        "temp": pa.array([rng.choice([rng.uniform(-50, 50), math.nan, math.inf, None])
                          for _ in range(n)]),
        "amount": pa.array([rng.choice([Decimal(rng.randint(-10**6, 10**6)) / 100, None])
                            for _ in range(n)], pa.decimal128(12, 2)),
        "n": pa.array([rng.choice([rng.randint(-2**62, 2**62), None]) for _ in range(n)]),
        "small": pa.array([rng.randint(-100, 100) for _ in range(n)], pa.int16()),
        "ok": pa.array([rng.choice([True, False, None]) for _ in range(n)]),
        "label": pa.array([rng.choice(["run", "", None]) for _ in range(n)]),
        "seen": pa.array([rng.choice([NOW, None]) for _ in range(n)], pa.timestamp("ms")),
        "unknown": pa.array([1] * n),
    })


@pytest.mark.parametrize("seed", range(5))
def test_the_fast_path_keeps_and_rejects_exactly_what_the_record_path_does(seed: int) -> None:
    fast, slow = both(random_table(seed))
    assert fast.tables, "the file should have taken the fast path"
    assert _norm(rows_of(fast)) == _norm(slow.rows)
    assert sorted((b.reason, b.detail, b.raw) for b in fast.bad) == sorted(
        (b.reason, b.detail, b.raw) for b in slow.bad)
    assert fast.extra == slow.extra == fast.rows_in - 0  # every record carried `unknown`


def _norm(rows: list[tuple[Any, ...]]) -> list[str]:
    """Rows comparable: NaN as a marker (NaN != NaN), times in one tzinfo object."""
    def one(v: Any) -> Any:
        if isinstance(v, float) and math.isnan(v):
            return "NaN"
        if isinstance(v, datetime):
            return v.astimezone(UTC).isoformat()
        return v

    return sorted(repr(tuple(one(v) for v in r)) for r in rows)


def test_a_file_whose_types_would_lose_digits_takes_the_record_path() -> None:
    table = pa.table({
        "device": ["a", "b"],
        "ts": pa.array([NOW, NOW], pa.timestamp("us", tz="UTC")),
        "amount": pa.array([Decimal("1.005"), Decimal("2.5")], pa.decimal128(10, 3)),
    })
    fast, slow = both(table)
    assert not fast.tables  # 1.005 would be rounded: the record path rounds it as PostgreSQL
    assert _norm(rows_of(fast)) == _norm(slow.rows)


def test_a_required_column_missing_from_the_file_dead_letters_every_record() -> None:
    table = pa.table({"device": ["a", "b"], "temp": [1.0, 2.0]})
    fast, _ = both(table)
    assert [b.reason for b in fast.bad] == ["missing_field", "missing_field"]


def test_rows_read_whole_are_stored_as_the_record_path_stores_them(conn) -> None:
    """Through the sink into PostgreSQL: the fast path's CSV keeps NaN, infinities, empty
    strings (never NULL), quotes, commas, decimals and microseconds; duplicates count."""
    from slidewin.db import streams
    from slidewin.ingest.typed_sink import write_stream_batch

    streams.define(conn, "wide", key="device", time="ts", columns=STREAM.columns,
                   measures=["temp", "amount"], history=timedelta(hours=1))
    t = NOW - timedelta(seconds=30)
    table = pa.table({
        "device": ["a", "b,\"c\"", "", "a", "d\nline"],
        "ts": pa.array([t, t, t, t, t + timedelta(microseconds=7)], pa.timestamp("us", tz="UTC")),
        "temp": [math.nan, math.inf, -math.inf, 1.0, 0.1],
        "amount": pa.array([Decimal("1.25"), None, Decimal("-3.10"), Decimal("9"), Decimal("0")],
                           pa.decimal128(12, 2)),
        "label": ["", None, "x", "y", "z"],
    })
    result = write_stream_batch(conn, "wide", "q/stream-wide/x", 0,
                                [("f.parquet", parquet(table))], now=NOW)
    assert (result.rows_in, result.accepted, result.duplicates, result.rejected) == (5, 4, 1, 0)
    conn.execute("SET extra_float_digits = 1")
    got = conn.execute("SELECT device, ts, temp::text, amount, label FROM slidewin_streams.wide "
                       "ORDER BY device").fetchall()
    assert got == [("", t, "-Infinity", Decimal("-3.10"), "x"),
                   ("a", t, "NaN", Decimal("1.25"), ""),
                   ("b,\"c\"", t, "Infinity", None, None),
                   ("d\nline", t + timedelta(microseconds=7), "0.1", Decimal("0.00"), "z")]
    assert streams.summary(conn, "wide", NOW - timedelta(minutes=1), NOW, "amount")["total"] \
        == Decimal("-1.85")
