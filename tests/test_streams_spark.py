"""ingest.typed_spark against ingest.typed: the same files give the same rows and the same dead
letters whether Spark parses them (clean records typed on Spark, suspects judged by the record
path) or the record path reads them whole. A corpus of awkward values for every column type, in
JSON Lines, CSV (two headers, quoted and not) and Parquet, under limits that make some records
future, late and expired. Real local Spark, no database."""

from __future__ import annotations

import csv
import io
import json
import math
import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from slidewin.db.streams import Column, Stream
from slidewin.ingest import typed
from slidewin.ingest.typed import Layout, Limits, parse_files
from slidewin.ingest.typed_spark import SpanningCsv, group_files, pieces

pytestmark = pytest.mark.spark
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=2)
STREAM = Stream(
    name="odd", key="k", time="ts",
    columns=(
        Column("k", "text", True), Column("ts", "timestamptz", True),
        Column("label", "text"), Column("n", "bigint"), Column("i", "integer"),
        Column("x", "double precision"), Column("amount", "numeric(12,2)"),
        Column("big", "numeric"), Column("ok", "boolean"), Column("meta", "jsonb"),
        Column("at", "timestamptz"), Column("need", "text", True),
    ),
    measures=("n", "x", "amount"),
)
LIMITS = Limits(NOW, newest_before=T0, watermark=T0 - timedelta(minutes=1),
                grace=timedelta(minutes=5), history=timedelta(hours=2),
                max_future=timedelta(minutes=10))
VALUES: dict[str, list[Any]] = {
    "label": ["a", "", " x ", "12", 12, 1.5, 1e2, True, None, {"a": 1}, [1], "{x", "[y",
              "a\u0000b", "é", "a,b", 'q"q', "t" * 201, "-0", 10**20],
    "n": [1, -5, "7", " 8 ", "+9", 3.0, 1.5, "1e2", 2**63, -(2**63), 2**63 - 1, "abc", True,
          None, "", "0x10", "-0"],
    "i": [1, 2**31, -(2**31), "12", 2**31 - 1, 1.0, "x"],
    "x": [1.5, "2.5", "NaN", "Infinity", "-inf", 1e308, "1e400", 0.1, 12345678901234567890,
          "1.", ".5", True, "abc", None, 5e-324, "1e-400", -0.0, "  3  "],
    "amount": [1.005, "1.005", 2.345, "12345678901", 12345678901.5, 0.1000000000000000001,
               1.2345678901234567, "1e2", "1,5", "NaN", 99999999.995, -0.005, None, True, 7,
               "0.125", 123456.78, 9999999999.99, "9999999999.995"],
    "big": [1, "3.14159265358979323846264338327950288", 0.5, "1e3", "abc", None,
            12345678901234567890.5, 2.82879384806159e17, 2.82879384806159e-3],
    "ok": [True, False, "t", "F", "yes", "NO", "1", "0", 1, 0, "maybe", None, " true"],
    "meta": [{"k": 1}, "s", 1, None, [1, 2.50]],
    "at": ["2026-01-01T12:00:00Z", "2026-01-01T12:00:00+05:30", "2026-01-01 12:00:00",
           "2026-01-01T12:00:00.123Z", "2026-01-01T12:00:00.123456789Z", "2026-01-01",
           1767268800, 1767268800000, 1767268800000000, 1767268800000000000, 1767268800.25,
           "1767268800", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59Z", "yesterday",
           None, "2026-01-01T12:00Z", "2026-13-01T00:00:00Z", "2026-01-01T12:00:00+0530"],
    "need": ["y", None, ""],
}
TIMES = [T0 + timedelta(seconds=s) for s in (0, 1.5, 30, 59.999999)] + [
    NOW + timedelta(hours=1),  # future
    T0 - timedelta(minutes=7),  # late (older than newest - grace)
    NOW - timedelta(hours=3),  # expired
]


def iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def records(rng: random.Random, count: int, prefix: str) -> list[dict[str, Any]]:
    out = []
    for index in range(count):
        rec: dict[str, Any] = {"k": f"{prefix}{index}", "ts": iso(rng.choice(TIMES)), "need": "y"}
        for name, choices in VALUES.items():
            if rng.random() < 0.35:
                rec[name] = rng.choice(choices)
        if rng.random() < 0.05:
            rec["zzz"] = 1  # a field the stream does not declare
        if rng.random() < 0.03:
            rec.pop(rng.choice(["k", "ts", "need"]))
        if rng.random() < 0.02:
            rec["ts"] = rng.choice(VALUES["at"])
        out.append(rec)
    return out


def json_lines(recs: list[dict[str, Any]], rng: random.Random) -> bytes:
    lines = []
    for rec in recs:
        line = json.dumps(rec, separators=(",", ":") if rng.random() < 0.5 else (", ", ": "))
        lines.append(line.encode())
    lines += lines[:3]  # records repeated: (key, time) kept once, the rest counted as copies
    lines += [b"", b"   ", b"{broken", b"[1, 2]", b'{"k": "dup", "k": "k-last", "ts": "'
              + iso(T0).encode() + b'", "need": "y"}', b'{"k": "\\ud800", "ts": "'
              + iso(T0).encode() + b'", "need": "y"}', b'{"k": "bad\xff", "ts": "x"}',
              b'{"k": "nul\x00", "ts": "x"}', b"\t"]
    # what Spark's JSON reader lets through and a JSON parser does not: text after the object,
    # a second object, single quotes, NaN as a value, a brace inside a string
    def good(i: int) -> str:
        return '"k": "g' + str(i) + '", "ts": "' + iso(T0) + '", "need": "y"'

    odd = ["{" + good(1) + "} x", "{" + good(2) + "}]", "{" + good(3) + "}}",
           "{" + good(4) + "}{}", "{" + good(5) + '} {"zzz": 1}',
           "{" + good(6) + ", 'label': 'q'}", "{" + good(7) + ', "label": NaN}',
           "{" + good(8) + ', "label": "a}b"}', "{" + good(9) + ', "label": null}  ']
    lines += [line.encode() for line in odd]
    return b"\n".join(lines) + b"\n"


def csv_text(recs: list[dict[str, Any]], header: list[str], quote_all: bool) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, quoting=csv.QUOTE_ALL if quote_all else csv.QUOTE_MINIMAL,
                        lineterminator="\n")
    writer.writerow(header)
    for rec in recs:
        writer.writerow(["" if rec.get(h) is None else _csv_value(rec.get(h)) for h in header])
    buf.write("\n")  # a blank line
    buf.write('k9,ts,"a"b\n')  # a quote inside a field
    buf.write("kk," + iso(T0) + ",1,2,3,4,5,6,7,8,9,10,11,12,13\n")  # more fields than the header
    buf.write("short\n")
    buf.write(",".join(header) + "\n")  # the header again: a record of names
    return buf.getvalue().encode()


def _csv_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def parquet_file(rng: random.Random, count: int) -> bytes:
    keys = [f"p{i}" for i in range(count)]
    times = [rng.choice(TIMES) for _ in range(count)]
    n = [rng.choice([1, None, 2**40, -3]) for _ in range(count)]
    amount = [rng.choice([Decimal("2.25"), Decimal("10000000000.00"), None, Decimal("-0.01")])
              for _ in range(count)]
    label = [rng.choice(["a", None, "b\u0000c", "l" * 201, "é"]) for _ in range(count)]
    table = pa.table({
        "k": keys, "ts": pa.array(times, pa.timestamp("us", tz="UTC")),
        "n": pa.array(n, pa.int64()), "amount": pa.array(amount, pa.decimal128(14, 2)),
        "label": label, "i": pa.array([rng.choice([1, 2**40, None]) for _ in range(count)],
                                      pa.int64()),
        "x": pa.array([rng.choice([1.5, float("nan"), None, float("inf")])
                       for _ in range(count)]),
        "ok": pa.array([rng.choice([True, None]) for _ in range(count)]),
        "need": pa.array([rng.choice(["y", "y", None]) for _ in range(count)]),
        "extra_col": pa.array([1] * count),
    })
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def corpus(folder: Path, seed: int) -> dict[str, bytes]:
    rng = random.Random(seed)
    files = {
        "a.jsonl": json_lines(records(rng, 600, "j"), rng),
        "b.csv": csv_text(records(rng, 300, "c"), ["ts", "k", "label", "n", "i", "x", "amount",
                                              "big", "ok", "at", "need"], False),
        "c.CSV": csv_text(records(rng, 300, "C"), ["k", "ts", "need", "amount", "ok", "meta",
                                              "zzz"], True),
        "d.parquet": parquet_file(rng, 300),
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return files


def normal(row: tuple) -> tuple:
    """A row comparable across both paths: numbers by value, NaN by name, jsonb as JSON."""
    out = []
    for col, value in zip(STREAM.columns, row, strict=True):
        if value is None:
            out.append(None)
        elif col.type == "double precision":
            out.append("nan" if math.isnan(value) else float(value))
        elif col.type.startswith("numeric"):
            out.append(Decimal(str(value)).normalize())
        elif col.type == "jsonb":
            out.append(json.loads(value))
        else:
            out.append(value)
    return tuple(out)


def letters(bad: list[typed.DeadLetter]) -> list[tuple]:
    return sorted((b.source, b.reason, b.detail, b.raw, b.raw_bytes or b"", str(b.event_ts))
                  for b in bad)


def by_spark(spark, folder: Path, layout: Layout) -> typed.Parsed:
    paths = [str(p) for p in sorted(folder.iterdir())]
    whole: frozenset[str] = frozenset()
    while True:
        groups = group_files(layout, paths, whole)
        read = ((Path(p).name, Path(p).read_bytes()) for p in groups.whole)
        try:
            found = list(pieces(spark, layout, groups, LIMITS, read))
            break
        except SpanningCsv as spanning:
            whole |= {p for p in paths if Path(p).name in spanning.names}
    total, seen = typed.Parsed(), set()
    for piece in found:
        rows = [tuple(r.values()) for table in piece.tables for r in table.to_pylist()]
        # a piece holds a (key, time) among its tables or its rows, never both; across
        # pieces the first written stays, as the sink's ON CONFLICT DO NOTHING keeps it
        for row in rows + piece.rows:
            if (row[0], row[1]) in seen:
                total.copies += 1
            else:
                seen.add((row[0], row[1]))
                total.rows.append(row)
        total.bad += piece.bad
        total.extra += piece.extra
        total.copies += piece.copies
        total.newest(piece.max_ts)
    return total


@pytest.mark.slow  # three corpora through Spark and the record path each
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_spark_and_the_record_path_agree_on_every_record(spark, tmp_path, seed):
    files = corpus(tmp_path, seed)
    layout = Layout(STREAM)
    expected = parse_files(layout, sorted(files.items()), LIMITS)
    got = by_spark(spark, tmp_path, layout)
    assert sorted(map(normal, got.rows), key=repr) == sorted(map(normal, expected.rows), key=repr)
    assert letters(got.bad) == letters(expected.bad)
    assert (got.extra, got.copies, got.max_ts) == (expected.extra, expected.copies,
                                                   expected.max_ts)
    # the corpus is awkward enough: every path of the rules is taken
    reasons = {b.reason for b in expected.bad}
    assert {"malformed", "missing_field", "bad_ts", "bad_type", "bad_encoding", "future",
            "expired", "late"} <= reasons
    assert len(expected.rows) > 100


def test_a_csv_record_spanning_lines_sends_its_file_to_the_record_path(spark, tmp_path):
    layout = Layout(STREAM)
    data = f'k,ts,need,label\nk1,{iso(T0)},y,"two\nlines"\nk2,{iso(T0)},y,plain\n'.encode()
    (tmp_path / "s.csv").write_bytes(data)
    groups = group_files(layout, [str(tmp_path / "s.csv")])
    assert list(groups.groups) == [("csv", "k,ts,need,label")]
    with pytest.raises(SpanningCsv):
        list(pieces(spark, layout, groups, LIMITS, iter(())))
    got = by_spark(spark, tmp_path, layout)
    assert sorted(r[2] for r in got.rows) == ["plain", "two\nlines"]


def test_clean_rows_leave_spark_typed_and_only_suspects_reach_the_record_path(
        spark, tmp_path, monkeypatch):
    """A file of good records never calls the record path: its rows come as Arrow tables."""
    lines = [json.dumps({"k": f"k{i}", "ts": iso(T0), "need": "y", "n": i, "x": i / 4,
                         "amount": "1.25", "ok": "t", "label": "l"}) for i in range(500)]
    (tmp_path / "good.jsonl").write_text("\n".join(lines) + "\n")
    calls = []
    real = typed.Layout.record
    monkeypatch.setattr(typed.Layout, "record",
                        lambda self, *a, **kw: calls.append(1) or real(self, *a, **kw))
    got = by_spark(spark, tmp_path, Layout(STREAM))
    assert len(got.rows) == 500 and got.bad == [] and calls == []


def test_a_key_and_time_twice_keeps_the_first_whichever_path_typed_it(spark, tmp_path):
    """Duplicates within one partition, one record clean on Spark and the other one only the
    record path can type (a double "NaN"): the first in the file is stored either way, as the
    record path alone keeps it, and the other is a copy."""
    def rec(key: str, x: Any, label: str) -> str:
        return json.dumps({"k": key, "ts": iso(T0), "need": "y", "x": x, "label": label})

    (tmp_path / "a.jsonl").write_text("\n".join([
        rec("a", "NaN", "suspect first"), rec("a", 1.5, "clean second"),
        rec("b", 2.5, "clean first"), rec("b", "NaN", "suspect second")]) + "\n")
    layout = Layout(STREAM)
    expected = parse_files(layout, [("a.jsonl", (tmp_path / "a.jsonl").read_bytes())], LIMITS)
    assert sorted(r[2] for r in expected.rows) == ["clean first", "suspect first"]
    groups = group_files(layout, [str(tmp_path / "a.jsonl")])
    [piece] = list(pieces(spark, layout, groups, LIMITS, iter(())))
    stored = [r[2] for r in piece.rows] + [
        r["label"] for table in piece.tables for r in table.to_pylist()]
    assert sorted(stored) == ["clean first", "suspect first"]
    assert piece.copies == expected.copies == 2
