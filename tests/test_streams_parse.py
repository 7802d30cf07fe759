"""ingest.typed: a declared stream's records -> typed rows and dead letters, without Spark or a
database."""

from __future__ import annotations

import io
import json
import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from slidewin.db.streams import Column, Stream
from slidewin.ingest.typed import BadValue, Layout, Limits, convert, parse_files, parse_time

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=2)
SENSORS = Stream(
    name="sensors", key="sensor", time="ts",
    columns=(
        Column("sensor", "text", True), Column("ts", "timestamptz", True),
        Column("temp", "double precision"), Column("amount", "numeric(12,2)"),
        Column("n", "bigint"), Column("ok", "boolean"), Column("meta", "jsonb"),
        Column("site", "text", True),
    ),
    measures=("temp", "amount", "n"),
)


def parse(files, stream=SENSORS, limits=None):
    return parse_files(Layout(stream), files, limits or Limits(NOW))


def jsonl(*records) -> bytes:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records).encode()


def rec(**kw):
    return {"sensor": "a", "ts": "2026-01-01T12:00:00Z", "site": "x", **kw}


def test_jsonl_good_record_typed():
    p = parse([("a.jsonl", jsonl(rec(temp=1.5, amount=2.345, n=7, ok=True,
                                     meta={"k": [1, 2.50]})))])
    assert p.bad == [] and p.extra == 0
    assert p.rows == [("a", T0, 1.5, Decimal("2.35"), 7, True, '{"k": [1, 2.5]}', "x")]
    assert p.max_ts == T0


def test_each_bad_kind_has_its_reason_and_raw_line():
    lines = [
        "not json",
        "[1, 2]",
        json.dumps({"ts": "2026-01-01T12:00:00Z", "site": "x"}),
        json.dumps(rec(site=None)),
        json.dumps(rec(ts="yesterday")),
        json.dumps(rec(n=1.5)),
        json.dumps(rec(temp="warm")),
        json.dumps(rec(amount=12345678901.5)),
        json.dumps(rec(ok="maybe")),
    ]
    p = parse([("bad.jsonl", jsonl(*lines))])
    got = [(b.reason, b.raw) for b in p.bad]
    assert got == list(zip(
        ["malformed", "malformed", "missing_field", "missing_field", "bad_ts", "bad_type",
         "bad_type", "bad_type", "bad_type"], lines, strict=True))
    assert "sensor" in p.bad[2].detail and "site" in p.bad[3].detail
    assert "n (bigint)" in p.bad[5].detail and "1.5" in p.bad[5].detail
    assert all(b.source == "bad.jsonl" for b in p.bad)
    assert p.rows == []


def test_csv_by_header_with_quotes_and_line_breaks():
    data = (
        b'site,ts,sensor,temp,amount,meta,ok\r\n'
        b'x,2026-01-01T12:00:01,"a,1",NaN,"1.005","{""k"": 1}",true\r\n'
        b'"multi\nline",2026-01-01T12:00:02,b,-Infinity,,,\r\n'
        b'x,2026-01-01T12:00:03,c,oops,,,\r\n'
        b'x,2026-01-01T12:00:04,d,1,2,3,4,5,6\r\n'
    )
    p = parse([("s.CSV", data)])
    assert [r[0] for r in p.rows] == ["a,1", "b"]
    a, b = p.rows
    assert math.isnan(a[2]) and a[3] == Decimal("1.01") and a[6] == '{"k": 1}' and a[5] is True
    assert a[1] == T0 + timedelta(seconds=1)  # naive = UTC
    assert b[2] == -math.inf and b[7] == "multi\nline" and b[3] is None
    assert [(x.reason, x.raw) for x in p.bad] == [
        ("bad_type", "x,2026-01-01T12:00:03,c,oops,,,"),
        ("malformed", "x,2026-01-01T12:00:04,d,1,2,3,4,5,6"),
    ]


def test_csv_unclosed_quote_is_malformed():
    p = parse([("q.csv", b'sensor,ts,site\na,2026-01-01T12:00:00Z,x\n"b,1,2\nc,3,4\n')])
    assert len(p.rows) == 1
    assert [b.reason for b in p.bad] == ["malformed"]
    assert p.bad[0].raw.startswith('"b,1,2')


def test_parquet_by_name_and_raw_as_json():
    table = pa.table({
        "ts": pa.array([T0, T0 + timedelta(seconds=1)], pa.timestamp("us", tz="UTC")),
        "site": ["x", "y"], "sensor": ["p", "q"], "n": pa.array([1, None], pa.int64()),
        "amount": pa.array([Decimal("1.50"), Decimal("123456789012.00")], pa.decimal128(20, 2)),
    })
    buf = io.BytesIO()
    pq.write_table(table, buf)
    p = parse([("f.parquet", buf.getvalue())])
    assert p.rows == [("p", T0, None, Decimal("1.50"), 1, None, None, "x")]
    assert [b.reason for b in p.bad] == ["bad_type"]
    assert json.loads(p.bad[0].raw)["sensor"] == "q"
    bad = parse([("g.parquet", b"not parquet")])
    assert [b.reason for b in bad.bad] == ["malformed"]


def test_a_parquet_time_python_cannot_hold_is_a_dead_letter_not_a_failure():
    """-2**62 microseconds is 146,000 BC: Arrow holds it, Python's datetime cannot."""
    far = pa.array([-(2**62), int(T0.timestamp()) * 10**6], pa.timestamp("us", tz="UTC"))
    table = pa.table({"ts": far, "sensor": ["p", "q"], "site": ["x", "x"]})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    p = parse([("far.parquet", buf.getvalue())])
    assert p.rows == [("q", T0, None, None, None, None, None, "x")]
    assert [(b.reason, b.detail.startswith("ts is not a time")) for b in p.bad] == [
        ("bad_ts", True)]
    assert json.loads(p.bad[0].raw)["sensor"] == "p"


def test_duplicates_within_the_batch_kept_once():
    p = parse([("a.jsonl", jsonl(rec(n=1), rec(n=2))), ("b.jsonl", jsonl(rec(n=3)))])
    assert [r[4] for r in p.rows] == [1] and p.copies == 2 and p.rows_in == 3


def test_late_expired_future():
    limits = Limits(NOW, newest_before=T0 + timedelta(seconds=100), grace=timedelta(seconds=5),
                    history=timedelta(minutes=1, seconds=50), max_future=timedelta(minutes=1))
    times = [90, 96, 5, 300]
    p = parse([("a.jsonl", jsonl(*(rec(ts=(T0 + timedelta(seconds=s)).isoformat())
                                   for s in times)))], limits=limits)
    assert [r[1] for r in p.rows] == [T0 + timedelta(seconds=96)]
    assert [b.reason for b in p.bad] == ["late", "expired", "future"]
    assert p.bad[0].event_ts == T0 + timedelta(seconds=90)
    watermark = Limits(NOW, watermark=T0 + timedelta(seconds=50))
    assert [b.reason for b in parse([("a.jsonl", jsonl(rec()))], limits=watermark).bad] == [
        "late"]


def test_extra_fields_counted_or_kept():
    p = parse([("a.jsonl", jsonl(rec(color="red"), rec(ts=1767268801)))])
    assert p.extra == 1 and len(p.rows) == 2
    kept = Stream(**{**SENSORS.__dict__, "keep_extra": True})
    p = parse([("a.jsonl", jsonl(rec(color="red", deep={"x": 1.10})))], stream=kept)
    assert p.extra == 0 and json.loads(p.rows[0][-1]) == {"color": "red", "deep": {"x": 1.1}}


@pytest.mark.parametrize("value, expected", [
    ("2026-01-01T12:00:00Z", T0),
    ("2026-01-01T13:00:00+01:00", T0),
    ("2026-01-01 12:00:00", T0),
    (1767268800, T0),
    (1767268800000, T0),
    (1767268800000000, T0),
    (1767268800000000000, T0),
    (Decimal("1767268800.25"), T0 + timedelta(milliseconds=250)),
    ("1767268800", T0),
])
def test_times(value, expected):
    assert parse_time(value) == expected


@pytest.mark.parametrize("value", ["soon", "", True, "99999-01-01", 10**30, {"a": 1}])
def test_bad_times(value):
    with pytest.raises(BadValue):
        parse_time(value)


@pytest.mark.parametrize("value, type_, expected", [
    ("abc", "text", "abc"), (12, "text", "12"), (True, "text", "true"),
    (Decimal("2.0"), "bigint", 2), ("-42", "integer", -42), (2**63 - 1, "bigint", 2**63 - 1),
    ("Infinity", "double precision", math.inf), (Decimal("0.1"), "double precision", 0.1),
    ("1e3", "numeric", Decimal("1e3")), (Decimal("-1.005"), "numeric(12,2)", Decimal("-1.01")),
    (Decimal("9999999999.994"), "numeric(12,2)", Decimal("9999999999.99")),
    ("F", "boolean", False), (None, "jsonb", "null"), ([1, "a"], "jsonb", '[1, "a"]'),
])
def test_conversions(value, type_, expected):
    assert convert(value, type_) == expected


@pytest.mark.parametrize("value, type_", [
    ({"a": 1}, "text"), ("a\u0000b", "text"), (Decimal("1.5"), "bigint"), (True, "bigint"),
    (2**31, "integer"), ("1.0", "bigint"), (Decimal("1e400"), "double precision"),
    ("NaN", "numeric(5,2)"), (Decimal("9999999999.995"), "numeric(12,2)"), ("yes!", "boolean"),
    (2, "boolean"), ("\u0000", "jsonb"),
])
def test_bad_conversions(value, type_):
    with pytest.raises(BadValue):
        convert(value, type_)


def test_csv_jsonb_must_be_json():
    assert convert('{"a": 1}', "jsonb", from_text=True) == '{"a": 1}'
    with pytest.raises(BadValue):
        convert("{oops", "jsonb", from_text=True)


def test_invalid_utf8_line_keeps_its_bytes():
    p = parse([("a.jsonl", b'{"sensor": "\xff"}\n')])
    assert [b.reason for b in p.bad] == ["bad_encoding"]
    assert p.bad[0].raw_bytes == b'{"sensor": "\xff"}' and "\ufffd" in p.bad[0].raw


# -- records that would stop the stream: each one is a dead letter with a reason ------------

KEYED = Stream(name="s", key="k", time="ts",
               columns=(Column("k", "text", True), Column("ts", "timestamptz", True),
                        Column("v", "double precision"), Column("meta", "jsonb")),
               measures=("v",), grace=timedelta(days=36500))
KEPT = Stream(**{**KEYED.__dict__, "keep_extra": True})
TS = "2026-06-01T00:00:00Z"
NOW_S = datetime(2026, 6, 1, tzinfo=UTC)
POISON = [  # (line, reason): the three lines of issue 34 for a stream keeping extras
    ('{"k":"a\\ud800","ts":"2026-06-01T00:00:00Z"}', "bad_encoding"),
    ('{"k":"' + "k" * 3000 + '","ts":"2026-06-01T00:00:00Z"}', "bad_type"),
    ('{"k":"a","ts":"2026-06-01T00:00:00Z","x":"a\\u0000b"}', "bad_type"),
]


def parse_s(files, stream=KEPT, indexed=()):
    return parse_files(Layout(stream, indexed), files, Limits(NOW_S))


def test_the_three_poison_lines_are_dead_letters_with_their_exact_lines():
    lines = [line for line, _ in POISON] + ['{"k":"good","ts":"2026-06-01T00:00:00Z"}']
    p = parse_s([("x.jsonl", jsonl(*lines))])
    assert [(b.reason, b.raw, b.raw_bytes) for b in p.bad] == [
        (reason, line, None) for line, reason in POISON]
    assert [r[0] for r in p.rows] == ["good"]
    assert "lone surrogate" in p.bad[0].detail and "\\ud800" in p.bad[0].detail
    assert "3,000 characters" in p.bad[1].detail and "200" in p.bad[1].detail
    assert "attrs" in p.bad[2].detail and "NUL" in p.bad[2].detail
    for b in p.bad:  # every text of the dead letter is text PostgreSQL can store
        (b.source + b.detail + b.raw).encode("utf-8")


@pytest.mark.parametrize("value", [
    {"meta": {"a": "x\ud800"}}, {"meta": ["\udfff"]}, {"attr\udc80": 1}, {"x": {"y": "\ud83d"}},
])
def test_a_lone_surrogate_anywhere_stored_is_bad_encoding(value):
    line = json.dumps({"k": "a", "ts": TS, **value})  # ASCII: json escapes the surrogate
    p = parse_s([("x.jsonl", jsonl(line))])
    assert [(b.reason, b.raw) for b in p.bad] == [("bad_encoding", line)]


def test_a_surrogate_pair_is_a_character_and_a_dropped_field_is_not_checked():
    p = parse_s([("x.jsonl", jsonl('{"k":"\\ud83d\\ude00","ts":"' + TS + '"}',
                                   '{"k":"b","ts":"' + TS + '","x":"\\ud800\\u0000"}'))],
                stream=KEYED)
    assert p.bad == [] and [r[0] for r in p.rows] == ["\U0001f600", "b"] and p.extra == 1


def test_nul_kept_in_attrs_or_jsonb_is_bad_type_but_a_backslash_zero_is_text():
    lines = [
        '{"k":"a","ts":"' + TS + '","x\\u0000":1}',  # NUL in a member's name
        '{"k":"b","ts":"' + TS + '","meta":{"y":["\\u0000"]}}',
        '{"k":"c","ts":"' + TS + '","x":"\\\\u0000 is six characters"}',
    ]
    p = parse_s([("x.jsonl", jsonl(*lines))])
    assert [(b.reason, b.raw) for b in p.bad] == [("bad_type", lines[0]), ("bad_type", lines[1])]
    assert [json.loads(r[-1]) for r in p.rows] == [{"x": "\\u0000 is six characters"}]


def test_key_length_limit_is_the_built_in_streams():
    from slidewin.ingest.parse import MAX_UUID_CHARS
    from slidewin.ingest.typed import MAX_KEY_CHARS

    assert MAX_KEY_CHARS == MAX_UUID_CHARS == 200
    keys = ["é" * 200, "k" * 201]  # 400 bytes is fine: characters are counted
    p = parse_s([("x.jsonl", jsonl(*({"k": k, "ts": TS} for k in keys)))])
    assert [r[0] for r in p.rows] == keys[:1]
    assert [(b.reason, b.detail) for b in p.bad] == [
        ("bad_type", "k (text): 201 characters, more than the 200 a key may have (an index "
                     "entry must fit in a page)")]


def test_an_indexed_text_column_has_the_key_limit_and_others_do_not():
    labelled = Stream(name="s", key="k", time="ts",
                      columns=(Column("k", "text", True), Column("ts", "timestamptz", True),
                               Column("label", "text"), Column("note", "text")),
                      measures=())
    line = json.dumps({"k": "a", "ts": TS, "label": "l" * 201, "note": "n" * 5000})
    assert [r[3] for r in parse_s([("x.jsonl", jsonl(line))], stream=labelled).rows] == [
        "n" * 5000]
    p = parse_s([("x.jsonl", jsonl(line))], stream=labelled, indexed=("label", "ts"))
    assert [(b.reason, b.detail) for b in p.bad] == [
        ("bad_type", "label (text): 201 characters, more than the 200 a text column an index "
                     "holds may have (an index entry must fit in a page)")]


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def test_the_poison_in_csv_and_parquet():
    """The same values in the other formats (a lone surrogate cannot be written in UTF-8
    text: CSV's and Parquet's are invalid bytes, bad_encoding as before)."""
    csv_data = (f"k,ts,x\n{'k' * 3000},{TS},\na,{TS},a\x00b\ngood,{TS},\n").encode()
    p = parse_s([("x.csv", csv_data)])
    assert [b.reason for b in p.bad] == ["bad_type", "bad_type"]
    assert p.bad[1].raw == f"a,{TS},a\\0b" and p.bad[1].raw_bytes == f"a,{TS},a\x00b".encode()
    ts = pa.array([NOW_S] * 4, pa.timestamp("us", tz="UTC"))
    table = pa.table({"k": ["k" * 3000, "ok", "a", "b"], "ts": ts})
    for stream in (KEYED, KEPT):  # the fast path, then the record path (extras kept)
        p = parse_s([("x.parquet", _parquet(table))], stream=stream)
        assert [b.reason for b in p.bad] == ["bad_type"] and p.good == 3
    with_x = table.append_column("x", pa.array([None, None, "a\x00b", None]))
    p = parse_s([("x.parquet", _parquet(with_x))])
    assert sorted(b.reason for b in p.bad) == ["bad_type", "bad_type"] and p.good == 2


def test_a_parquet_string_that_is_not_utf8_is_bad_encoding_not_a_failed_batch():
    bad = pa.array([b"a\xed\xa0\x80", b"ok", b"z\xff"], pa.binary()).view(pa.string())
    ts = pa.array([NOW_S] * 3, pa.timestamp("us", tz="UTC"))
    data = _parquet(pa.table({"k": bad, "ts": ts}))
    p = parse_s([("x.parquet", data)])
    assert [r[0] for r in p.rows] == ["ok"]
    assert [(b.reason, b.raw_bytes) for b in p.bad] == [
        ("bad_encoding", b"a\xed\xa0\x80"), ("bad_encoding", b"z\xff")]
    assert "\ufffd" in p.bad[0].raw
    dropped = _parquet(pa.table({"k": ["a", "b", "c"], "ts": ts, "junk": bad}))
    p = parse_s([("x.parquet", dropped)], stream=KEYED)  # not stored: no reason to refuse
    assert p.bad == [] and p.good == 3 and p.extra == 3
    # a row the fast path leaves to the record path, beside such a column
    one_missing = _parquet(pa.table({"k": ["a", None, "c"], "ts": ts, "junk": bad}))
    p = parse_s([("x.parquet", one_missing)], stream=KEYED)
    assert [b.reason for b in p.bad] == ["missing_field"] and p.good == 2


def test_a_jsonl_file_may_start_with_a_byte_order_mark():
    p = parse_s([("x.jsonl", b"\xef\xbb\xbf" + jsonl({"k": "a", "ts": TS}, {"k": "b", "ts": TS})),
                 ("y.csv", b"\xef\xbb\xbfk,ts\nc," + TS.encode() + b"\n")])
    assert p.bad == [] and [r[0] for r in p.rows] == ["a", "b", "c"]


def test_a_csv_header_naming_a_column_twice_refuses_the_whole_file():
    data = f"k,ts,k,v\na,{TS},b,1\nc,{TS},d,2\n".encode()
    p = parse_s([("x.csv", data), ("y.csv", f"k, ts ,ts\na,{TS},{TS}\n".encode())])
    assert p.rows == []
    assert [(b.source, b.reason, b.raw) for b in p.bad] == [
        ("x.csv", "malformed", data.decode()),
        ("y.csv", "malformed", f"k, ts ,ts\na,{TS},{TS}\n")]
    assert "column 'k' more than once" in p.bad[0].detail
    assert "column 'ts' more than once" in p.bad[1].detail
