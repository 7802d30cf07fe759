"""Declared streams ingested end to end: real Spark (the shared local session) and real
PostgreSQL. Each stream reads ``<landing>/<name>/``; files of every format go in, and every
record ends up either in ``slidewin_streams.<name>`` with its declared types or in the dead
letters naming the stream. The ingest's clock is pinned (NOW = T0 + 2 min)."""

from __future__ import annotations

import io
import json
import math
import threading
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from psycopg import sql

from slidewin.db import streams
from slidewin.db.streams import Column
from slidewin.ingest.config import IngestConfig
from slidewin.ingest.runner import preflight, run
from slidewin.ingest.typed_sink import write_stream_batch
from tests.conftest import T0
from tests.ingest_fixtures import clean_ingest_state, write_lines
from tests.waiting import wait_until

pytestmark = pytest.mark.spark
NOW = T0 + timedelta(minutes=2)
SENSOR_COLUMNS = [
    Column("sensor", "text"), Column("ts", "timestamptz"), Column("temp", "double precision"),
    Column("amount", "numeric(12,2)"), Column("n", "bigint"), Column("ok", "boolean"),
    Column("meta", "jsonb"),
]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def iso(seconds: float) -> str:
    return at(seconds).isoformat().replace("+00:00", "Z")


@pytest.fixture
def sconn(conn):
    """A clean store without declared streams (and dropped again afterwards)."""
    clean_ingest_state(conn)
    for s in streams.list_streams(conn, declared_only=True):
        streams.drop(conn, s.name)
    yield conn
    for s in streams.list_streams(conn, declared_only=True):
        streams.drop(conn, s.name)


def sensors(conn, name: str = "sensors", **kw) -> streams.Stream:
    return streams.define(conn, name, key="sensor", time="ts", columns=SENSOR_COLUMNS,
                          measures=["temp", "amount", "n"], **kw)


def config(tmp: Path, **kw) -> IngestConfig:
    (tmp / "landing").mkdir(exist_ok=True)
    base = {
        "landing": tmp / "landing", "checkpoint_dir": tmp / "cp",
        "archive_dir": tmp / "archive", "once": True, "format": "json",
        "processed": "keep", "query_id": "t",
    }
    return IngestConfig(**{**base, **kw})


def ingest_once(spark, dsn: str, tmp: Path, **kw) -> list[str]:
    lines: list[str] = []
    cfg = config(tmp, **kw)
    run(preflight(cfg, dsn), dsn, lines.append, spark=spark, clock=lambda: NOW)
    return lines


def folder(tmp: Path, name: str) -> Path:
    path = tmp / "landing" / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def rows_of(conn, name: str, order: str = "sensor, ts") -> list[tuple]:
    return conn.execute(
        sql.SQL("SELECT * FROM {} ORDER BY " + order).format(sql.Identifier("slidewin_streams",
                                                                           name))
    ).fetchall()


def dead(conn, stream: str) -> list[tuple]:
    return conn.execute(
        "SELECT source, reason, raw FROM slidewin.dead_letters WHERE stream = %s "
        "ORDER BY source, id", (stream,)
    ).fetchall()


def assert_rollups_brute_force(conn, stream: streams.Stream) -> None:
    """slidewin_rollups.<name> equals the aggregates computed here from the raw rows."""
    cols = [stream.time, *stream.measures]
    raw = conn.execute(
        sql.SQL("SELECT {} FROM {}").format(
            sql.SQL(", ").join(sql.Identifier(c) for c in cols), stream.table)
    ).fetchall()
    expected: dict = {}
    by_sec: dict = defaultdict(list)
    for row in raw:
        by_sec[row[0].astimezone(UTC).replace(microsecond=0)].append(row[1:])
    for sec, rows in by_sec.items():
        agg: dict = {"n": len(rows)}
        for i, m in enumerate(stream.measures):
            vals = [r[i] for r in rows if r[i] is not None]
            is_double = stream.column(m).type == "double precision"
            ordinary = [v for v in vals if not (is_double and math.isnan(v))]
            agg[f"{m}_n"] = len(vals)
            finite = [v for v in vals if not is_double or math.isfinite(v)]
            agg[f"{m}_sum"] = sum((Decimal(repr(v)) if is_double else Decimal(v)
                                   for v in finite), Decimal(0))
            agg[f"{m}_min"] = min(ordinary, default=None)
            agg[f"{m}_max"] = max(ordinary, default=None)
            if is_double:
                agg[f"{m}_nan"] = sum(math.isnan(v) for v in vals)
                agg[f"{m}_pinf"] = sum(v == math.inf for v in vals)
                agg[f"{m}_ninf"] = sum(v == -math.inf for v in vals)
        expected[sec] = agg
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        stored = cur.execute(
            sql.SQL("SELECT * FROM {}").format(sql.Identifier("slidewin_rollups", stream.name))
        ).fetchall()
    got = {r.pop("sec").astimezone(UTC): r for r in stored if r["n"]}
    assert got.keys() == expected.keys()
    for sec, agg in expected.items():
        for k, v in agg.items():
            assert got[sec][k] == v, (sec, k, got[sec][k], v)


@pytest.mark.slow
def test_jsonl_csv_parquet_typed_dead_letters_and_replay(spark, store_dsn, sconn, tmp_path):
    stream = sensors(sconn)
    land = folder(tmp_path, "sensors")
    jsonl = [
        {"sensor": "a", "ts": iso(0), "temp": 20.5, "amount": 1.005, "n": 1, "ok": True,
         "meta": {"fw": "1.2", "tags": [1, 2]}},
        {"sensor": "a", "ts": iso(0.5), "temp": "NaN", "amount": "3", "n": "2", "ok": False},
        {"sensor": "a", "ts": iso(0), "temp": 99},  # same (key, time): a duplicate
        {"sensor": "b", "ts": 1767268801000, "temp": "Infinity"},  # epoch ms
        {"ts": iso(1)},  # missing_field
        {"sensor": "c", "ts": "not a time"},  # bad_ts
        {"sensor": "c", "ts": iso(2), "n": 1.5},  # bad_type
        {"sensor": "c", "ts": iso(2), "amount": 12345678901},  # bad_type: too many digits
        {"sensor": "c", "ts": iso(3600)},  # future (an hour ahead of NOW)
    ]
    lines = [json.dumps(r) for r in jsonl] + ["{broken"]
    write_lines(land, "a.jsonl", lines)
    write_lines(land, "b.CSV", [
        "ts,sensor,temp,amount,ok,meta",
        f'{iso(3)},"d,1",-1.25,7.5,t,"{{""k"": 1}}"',
        f"{iso(4)},d,oops,,,",
    ])
    (land / "c.parquet").write_bytes(parquet_bytes(pa.table({
        "sensor": ["e", "e"], "ts": pa.array([at(5), at(6)], pa.timestamp("us", tz="UTC")),
        "n": pa.array([2**40, 3], pa.int64()), "temp": [1.5, None],
        "amount": pa.array([Decimal("2.25"), Decimal("10000000000.00")], pa.decimal128(14, 2)),
    })))
    (land / "ignored.txt").write_text("not read\n")

    out = ingest_once(spark, store_dsn, tmp_path)
    assert any(line.startswith("[stream sensors] batch 0:") for line in out), out
    rows = rows_of(sconn, "sensors")
    assert [r[:2] for r in rows] == [
        ("a", at(0)), ("a", at(0.5)), ("b", at(1)), ("d,1", at(3)), ("e", at(5)),
    ]
    a0, a1, b, d, e = rows
    assert a0[2:] == (20.5, Decimal("1.01"), 1, True, {"fw": "1.2", "tags": [1, 2]})
    assert math.isnan(a1[2]) and a1[3:6] == (Decimal("3.00"), 2, False) and a1[6] is None
    assert b[2] == math.inf
    assert d[2:] == (-1.25, Decimal("7.50"), None, True, {"k": 1})
    assert e[2:5] == (1.5, Decimal("2.25"), 2**40)
    letters = dead(sconn, "sensors")
    assert [(s, r) for s, r, _raw in letters] == [
        ("a.jsonl", "missing_field"), ("a.jsonl", "bad_ts"), ("a.jsonl", "bad_type"),
        ("a.jsonl", "bad_type"), ("a.jsonl", "future"), ("a.jsonl", "malformed"),
        ("b.CSV", "bad_type"), ("c.parquet", "bad_type"),
    ]
    assert [raw for _s, _r, raw in letters[:6]] == lines[4:]
    assert letters[6][2] == f"{iso(4)},d,oops,,,"
    assert json.loads(letters[7][2])["sensor"] == "e"
    marker = sconn.execute(
        "SELECT query_id, rows_in, accepted, duplicates, rejected FROM slidewin.ingest_batches "
        "WHERE query_id LIKE 't/stream-sensors/%'"
    ).fetchall()
    assert [m[1:] for m in marker] == [(14, 5, 1, 8)]
    assert_rollups_brute_force(sconn, stream)

    # a replay: Spark lost its commit of batch 0 and runs it again -- the marker skips it
    commits = tmp_path / "cp" / "stream-sensors" / "commits"
    for name in ("0", ".0.crc"):
        (commits / name).unlink(missing_ok=True)
    out = ingest_once(spark, store_dsn, tmp_path)
    assert any("[stream sensors] batch 0: already committed, skipped" in x for x in out), out
    assert repr(rows_of(sconn, "sensors")) == repr(rows)  # repr: NaN is not equal to itself
    assert len(dead(sconn, "sensors")) == len(letters)

    # the next batch: older than the watermark is late; a stored (key, time) a duplicate
    write_lines(land, "d.jsonl", [json.dumps({"sensor": "z", "ts": iso(1)}),
                                  json.dumps({"sensor": "e", "ts": iso(5)}),
                                  json.dumps({"sensor": "z", "ts": iso(7)})])
    out = ingest_once(spark, store_dsn, tmp_path)
    line = next(x for x in out if x.startswith("[stream sensors] batch 1:"))
    assert "in 3, accepted 1, dup 1, rejected 1 (late 1)" in line, line
    assert [r[0] for r in dead(sconn, "sensors") if r[1] == "late"] == ["d.jsonl"]
    assert_rollups_brute_force(sconn, stream)


def test_sink_replay_with_same_batch_id_changes_nothing(sconn):
    stream = sensors(sconn, "replayed")
    files = [("a.jsonl", b'{"sensor": "a", "ts": "2026-01-01T12:00:00Z", "n": 5}\n'
                         b'{"sensor": "a", "n": 5}\n')]
    first = write_stream_batch(sconn, "replayed", "q/stream-replayed/x", 0, files, now=NOW)
    second = write_stream_batch(sconn, "replayed", "q/stream-replayed/x", 0, files, now=NOW)
    assert (first.accepted, first.rejected, first.skipped) == (1, 1, False)
    assert second.skipped
    assert len(rows_of(sconn, "replayed")) == 1 and len(dead(sconn, "replayed")) == 1
    third = write_stream_batch(sconn, "replayed", "q/stream-replayed/x", 1, files, now=NOW)
    assert (third.accepted, third.duplicates, third.rejected) == (0, 1, 1)
    assert_rollups_brute_force(sconn, stream)


def test_streams_with_the_same_keys_stay_apart_and_keep_extra(spark, store_dsn, sconn, tmp_path):
    cols = [Column("id", "text"), Column("at", "timestamptz"), Column("v", "bigint")]
    alpha = streams.define(sconn, "alpha", key="id", time="at", columns=cols, measures=["v"])
    beta = streams.define(sconn, "beta", key="id", time="at", columns=cols, measures=["v"],
                          keep_extra=True, grace=timedelta(seconds=2))
    write_lines(folder(tmp_path, "alpha"), "x.jsonl",
                [json.dumps({"id": k, "at": iso(i), "v": i}) for i, k in enumerate("pqr")])
    write_lines(folder(tmp_path, "beta"), "x.jsonl",
                [json.dumps({"id": k, "at": iso(i), "v": 10 * i, "color": "red", "w": [1]})
                 for i, k in enumerate("pqr")])
    ingest_once(spark, store_dsn, tmp_path)
    assert [r[2] for r in rows_of(sconn, "alpha", "id")] == [0, 1, 2]
    beta_rows = rows_of(sconn, "beta", "id")
    assert [r[2] for r in beta_rows] == [0, 10, 20]
    assert all(r[3] == {"color": "red", "w": [1]} for r in beta_rows)
    state = dict(sconn.execute(
        "SELECT stream, watermark FROM slidewin.stream_state WHERE stream IN ('alpha', 'beta')"
    ).fetchall())
    assert state == {"alpha": at(2), "beta": at(0)}
    assert not sconn.execute("SELECT 1 FROM slidewin.events").fetchall()
    assert_rollups_brute_force(sconn, alpha)
    assert_rollups_brute_force(sconn, beta)


def test_in_batch_duplicates_keep_the_first_on_every_stream(spark, store_dsn, sconn, tmp_path):
    """Two records of one identity in one batch: the first is stored, on the built-in stream
    and on a declared one alike, and the second is a duplicate -- though its value is the
    smaller (the built-in stream once kept the smallest ``val``)."""
    stream = sensors(sconn)
    declared = folder(tmp_path, "sensors")
    write_lines(tmp_path / "landing", "a.jsonl", [
        json.dumps({"uuid": "a", "val": v, "ts": iso(0)}) for v in (9, 1, 5)])
    write_lines(declared, "a.jsonl", [
        json.dumps({"sensor": "a", "ts": iso(0), "temp": t, "n": t}) for t in (9, 1, 5)])
    ingest_once(spark, store_dsn, tmp_path)
    assert sconn.execute("SELECT uuid, val FROM slidewin.events").fetchall() == [("a", 9)]
    assert [(r[0], r[2], r[4]) for r in rows_of(sconn, "sensors")] == [("a", 9.0, 9)]
    counts = sconn.execute(
        "SELECT rows_in, accepted, duplicates FROM slidewin.ingest_batches ORDER BY query_id"
    ).fetchall()
    assert counts == [(3, 1, 2), (3, 1, 2)]
    assert_rollups_brute_force(sconn, stream)


@pytest.mark.slow
def test_stream_declared_while_ingest_runs_is_picked_up(spark, store_dsn, sconn, tmp_path):
    cfg = config(tmp_path, once=False, trigger=timedelta(milliseconds=500))
    lines: list[str] = []
    stop = threading.Event()
    failure: list[BaseException] = []

    def target() -> None:
        try:
            run(preflight(cfg, store_dsn), store_dsn, lines.append, stop=stop, spark=spark,
                clock=lambda: NOW)
        except BaseException as exc:  # reported by the test
            failure.append(exc)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    def said(text: str) -> Callable[[], bool]:
        def check() -> bool:
            assert not failure, failure
            return any(text in x for x in lines)
        return check

    def late_rows() -> list[tuple]:
        assert not failure, failure
        return rows_of_or_none(sconn, "late_comer")

    try:
        wait_until(said("ingest t:"), 120, what="the ingest's first report")
        sensors(sconn, "late_comer")
        write_lines(folder(tmp_path, "late_comer"), "a.jsonl",
                    [json.dumps({"sensor": "s", "ts": iso(1), "n": 4})])
        wait_until(late_rows, 120, interval_s=0.2, what="the late stream's rows")
        assert [r[:2] for r in rows_of(sconn, "late_comer")] == [("s", at(1))]
        streams.drop(sconn, "late_comer")
        wait_until(said("late_comer] the stream was dropped"), 120, what="the drop noticed")
    finally:
        stop.set()
        worker.join(60)
    assert not failure, failure
    assert any(x.startswith("[stream late_comer] batch 0:") for x in lines), lines


def rows_of_or_none(conn, name: str) -> list[tuple]:
    try:
        return rows_of(conn, name)
    except psycopg.errors.UndefinedTable:
        return []


def test_a_pipe_in_a_streams_folder_is_dead_lettered_never_opened(spark, store_dsn, sconn,
                                                                    tmp_path):
    """A named pipe would block a batch that opened it: the batch lists its paths before it
    reads any content and never opens an entry that is no regular file (this Spark does not
    even list a pipe); the good file beside it is stored and nothing hangs."""
    import os
    import threading

    sensors(sconn, "piped")
    land = folder(tmp_path, "piped")
    os.mkfifo(land / "a.jsonl")
    write_lines(land, "b.jsonl", [json.dumps({"sensor": "s", "ts": "2026-01-01T11:59:00Z",
                                              "temp": 1.5})])
    done = threading.Event()
    threading.Thread(target=lambda: (ingest_once(spark, store_dsn, tmp_path), done.set()),
                     daemon=True).start()
    assert done.wait(120), "the ingest hung on the pipe"
    assert len(rows_of(sconn, "piped")) == 1
    assert [r for _s, r, _ in dead(sconn, "piped")] in ([], ["unreadable_file"])


def test_an_entry_nobody_may_open_is_a_dead_letter_and_the_rest_of_the_batch_flows(sconn):
    """What ``batch_files`` hands the sink for such an entry: its name and why, no content."""
    sensors(sconn, "odd")
    files = [("p.jsonl", "a named pipe"),
             ("g.jsonl", b'{"sensor": "s", "ts": "2026-01-01T11:59:00Z", "temp": 2.5}\n')]
    result = write_stream_batch(sconn, "odd", "q/stream-odd/x", 0, files, now=NOW)
    assert (result.accepted, result.rejected) == (1, 1)
    assert dead(sconn, "odd") == [("p.jsonl", "unreadable_file", "p.jsonl")]


POISON_TS = iso(0)  # the ingest's clock is pinned: an event time near it
POISON_LINES = [  # issue 34: each of these stopped the stream on every rerun
    '{"k":"a\\ud800","ts":"' + POISON_TS + '"}',
    '{"k":"' + "k" * 3000 + '","ts":"' + POISON_TS + '"}',
    '{"k":"a","ts":"' + POISON_TS + '","x":"a\\u0000b"}',
]


def poisoned(conn, name: str = "s") -> streams.Stream:
    """``slidewin streams add s --key k:text --time ts --column v:double --grace 36500d
    --keep-extra``, and a text column ``label`` an index holds (made in psql)."""
    stream = streams.define(
        conn, name, key="k", time="ts", keep_extra=True, grace=timedelta(days=36500),
        columns=[Column("k", "text"), Column("ts", "timestamptz"),
                 Column("v", "double precision"), Column("label", "text")], measures=["v"])
    conn.execute(sql.SQL("CREATE INDEX ON {} (label)").format(stream.table))
    return stream


def poison_dead(conn, name: str = "s") -> list[tuple]:
    return conn.execute(
        "SELECT reason, coalesce(raw_bytes, convert_to(raw, 'UTF8')) FROM slidewin.dead_letters "
        "WHERE stream = %s ORDER BY id", (name,)).fetchall()


def test_records_postgresql_cannot_store_are_dead_letters_and_the_batch_commits(sconn):
    """Through the sink, without Spark: the three lines, a label over the limit of the index
    a user made, and a good record in one batch -- the batch commits."""
    poisoned(sconn)
    long_label = json.dumps({"k": "b", "ts": POISON_TS, "label": "l" * 3000})
    good = json.dumps({"k": "good", "ts": POISON_TS, "label": "l" * 200, "v": 1})
    lines = [*POISON_LINES, long_label, good]
    data = "".join(x + "\n" for x in lines).encode()
    result = write_stream_batch(sconn, "s", "q/stream-s/x", 0, [("x.jsonl", data)], now=NOW)
    assert (result.rows_in, result.accepted, result.rejected) == (5, 1, 4)
    assert poison_dead(sconn) == [("bad_encoding", lines[0].encode()),
                                  ("bad_type", lines[1].encode()),
                                  ("bad_type", lines[2].encode()),
                                  ("bad_type", lines[3].encode())]
    assert [r[0] for r in rows_of(sconn, "s", order="k")] == ["good"]


@pytest.mark.slow
def test_the_poison_lines_do_not_stop_a_declared_stream(spark, store_dsn, sconn, tmp_path):
    """``slidewin ingest --once`` over the three lines of issue 34 (in a file that starts with
    a byte-order mark) and a CSV file whose header names a column twice: every record is a
    dead letter or stored, the run ends well, and a file after them is stored."""
    poisoned(sconn)
    land = folder(tmp_path, "s")
    good = json.dumps({"k": "first", "ts": POISON_TS})
    (land / "x.jsonl").write_bytes(
        b"\xef\xbb\xbf" + "".join(x + "\n" for x in [good, *POISON_LINES]).encode())
    twice = f"k,ts,k,v\na,{POISON_TS},b,1\n".encode()
    (land / "y.csv").write_bytes(twice)
    ingest_once(spark, store_dsn, tmp_path)
    assert [r[0] for r in rows_of(sconn, "s", order="k")] == ["first"]
    assert sorted(poison_dead(sconn)) == sorted([("bad_encoding", POISON_LINES[0].encode()),
                                                 ("bad_type", POISON_LINES[1].encode()),
                                                 ("bad_type", POISON_LINES[2].encode()),
                                                 ("malformed", twice)])
    write_lines(land, "z.jsonl", [json.dumps({"k": "after", "ts": POISON_TS})])
    ingest_once(spark, store_dsn, tmp_path)
    assert [r[0] for r in rows_of(sconn, "s", order="k")] == ["after", "first"]
