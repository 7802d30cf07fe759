"""Hostile input: a corpus of files a careless or broken producer might write, one class per
file. Whatever the bytes, every record is stored or dead-lettered with a reason, the dead
letter gives back the exact input (``coalesce(raw_bytes, convert_to(raw, 'UTF8'))``), and the
stream that ate the corpus goes on to store a good file dropped after it.

Each file is one micro-batch (``max_files_per_trigger=1``), so the batch marker's counts are
the file's: ``rows_in`` = the file's records = accepted + duplicates + rejected.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from slidewin.db.events import partition_of
from slidewin.ingest.errors import IngestError
from slidewin.ingest.tidy import batch_files
from tests.conftest import T0
from tests.ingest_fixtures import clean_ingest_state
from tests.invariants import assert_rollups_exact
from tests.test_ingest_stream import ingest_once

pytestmark = pytest.mark.spark

TS = b"2026-01-01T12:00:00Z"  # T0: every good event sits in one second, so none is late
YEAR_ONE = datetime(1, 1, 1, tzinfo=UTC)


def line(uuid: bytes, val: bytes = b"1", ts: bytes = TS) -> bytes:
    return b'{"uuid":"' + uuid + b'","val":' + val + b',"ts":"' + ts + b'"}'


# name -> (lines, stored uuids, rejected reasons); text files, in the order they arrive
TEXT: dict[str, tuple[list[bytes], set[str], Counter[str]]] = {
    # a stream's first batch: no newest time yet, so only the parse rules guard PostgreSQL
    "ts_range.jsonl": (
        [
            line(b"r1", ts=b"-290000-01-01T00:00:00Z"),
            line(b"r2", ts=b"+10000-01-01T00:00:00Z"),
            line(b"r3", ts=b"-99999999999999"),  # epoch ms: 1199 BC
            line(b"r4", ts=b"0001-01-01T00:00:00Z"),  # the earliest accepted second
            line(b"r5"),
        ],
        {"r4", "r5"},
        Counter(bad_ts=3),
    ),
    "nul.jsonl": (
        [
            line(b"n1", val=b'"1\\u00002"'),  # escaped NUL inside val
            line(b"n\\u0000k"),  # escaped NUL inside the key
            line(b"n3", ts=b"2026-01-01T12:00:00\\u0000Z"),  # Spark would parse the prefix
            b'{"uuid":"n4","val":1,"ts":"' + TS + b'"}\x00',  # a NUL byte after the object
            b"\x00\x00\x00",
            line(b"n6"),
        ],
        {"n6"},
        Counter(bad_type=1, bad_uuid=1, bad_ts=1, malformed=2),
    ),
    "latin1.jsonl": (
        [line("café".encode("latin-1")), line("café".encode()), line(b"l3")],
        {"café", "l3"},
        Counter(bad_encoding=1),
    ),
    "garbage.jsonl": (
        [bytes(random.Random(7).randrange(256) for _ in range(300)).replace(b"\n", b"")
         .replace(b"\r", b"") for _ in range(3)],
        set(),
        Counter(bad_encoding=3),
    ),
    "rfc4180.csv": (  # one element per record: some span lines
        [
            b"uuid,val,ts",
            b'"q1",1,' + TS,  # quoted key: stored unquoted
            b'"q""2",2,' + TS,  # doubled quote: one quote
            b'"multi\nline",3,' + TS,  # a field holding a line break: one record, one event
            # a line inside a quoted field that looks like a record is no record (no phantom)
            b'"note\nphantom,9,' + TS + b'\nend",10,' + TS,
            b'"ctl\x01x",4,' + TS,  # a control character inside a field is data
            b"q5,5,2026-01-01T12:00:00\x00Z",  # a NUL byte in a line
            "qé,6,".encode("latin-1") + TS,  # a Latin-1 line in a CSV file
            b'"never closed,7,' + TS + b"\nq8,8," + TS,  # the rest of the file: one record
        ],
        {"q1", 'q"2', "multi\nline", "note\nphantom,9," + TS.decode() + "\nend", "ctl\x01x"},
        Counter(malformed=2, bad_encoding=1),
    ),
    "issue34.jsonl": (  # lines that stopped a declared stream, and a byte-order mark
        [
            b"\xef\xbb\xbf" + line(b"bom"),  # the mark is no part of the first line
            line(b"a\\ud800"),  # a lone surrogate: Spark would store the key "a?"
            line(b"\\udc00z?"),  # a low half alone
            line(b"k" * 3000),  # over the key limit (200 characters)
            line(b"\\ud83d\\ude00"),  # a pair is one character
            line(b"back?\\\\ud800"),  # an escaped backslash, then the text "ud800"
            line(b"x1")[:-1] + b',"x":"a\\u0000b"}',  # NUL in a member not stored
        ],
        {"bom", "\U0001f600", "back?\\ud800", "x1"},
        Counter(bad_encoding=2, bad_uuid=1),
    ),
    "twice.csv": (  # a header other than uuid,val,ts; the records are read by position
        [b"uuid,val,uuid,ts", b"t1,1," + TS, b"ts,uuid,val", b'"uuid","uuid","ts"'],
        {"t1"},
        Counter(malformed=3),
    ),
    "SHOUTED.JSONL": ([line(b"u1")], {"u1"}, Counter()),
    "Mixed.Csv": ([b"m1,1," + TS, b"m1,1," + TS], {"m1"}, Counter()),  # a duplicate
}


def parquet_corpus(land: Path) -> dict[str, tuple[int, set[str], Counter[str]]]:
    """Parquet files: name -> (records, stored uuids, rejected reasons)."""
    ts = pa.array([T0, T0], pa.timestamp("us", tz="UTC"))
    pq.write_table(
        pa.table({"uuid": pa.array([b"\xff\xfe", b"p1"], pa.binary()), "val": [1, 2], "ts": ts}),
        land / "binary_uuid.parquet",
    )
    pq.write_table(  # a surrogate's UTF-8 bytes are no UTF-8
        pa.table({"uuid": pa.array([b"s\xed\xa0\x80", b"p6"], pa.binary()), "val": [1, 2],
                  "ts": ts}),
        land / "surrogate_uuid.parquet",
    )
    pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"]}), land / "no_columns.parquet")
    pq.write_table(
        pa.table({"uuid": ["p2", "p3"], "val": ["7", "x"], "ts": [TS.decode(), "noon"]}),
        land / "text_columns.parquet",
    )
    t0_us = int(T0.timestamp()) * 10**6
    far = pa.array([-(2**62), t0_us], pa.timestamp("us", tz="UTC"))  # 146,000 BC; T0
    pq.write_table(pa.table({"uuid": ["p4", "p5"], "val": [1, 2], "ts": far}),
                   land / "far_ts.parquet")
    (land / "torn.parquet").write_bytes(b"PAR1 and then nothing")
    return {
        "binary_uuid.parquet": (2, {"p1"}, Counter(bad_encoding=1)),
        "surrogate_uuid.parquet": (2, {"p6"}, Counter(bad_encoding=1)),
        "no_columns.parquet": (2, set(), Counter(missing_field=2)),
        "text_columns.parquet": (2, {"p2"}, Counter(bad_type=1)),
        "far_ts.parquet": (2, {"p5"}, Counter(bad_ts=1)),
        "torn.parquet": (1, set(), Counter(unreadable_file=1)),
    }


def write_bytes(folder: Path, name: str, lines: list[bytes], mtime: float) -> None:
    tmp = folder / f".{name}.tmp"
    tmp.write_bytes(b"".join(x + b"\n" for x in lines))
    os.replace(tmp, folder / name)
    os.utime(folder / name, (mtime, mtime))


def records(name: str, lines: list[bytes]) -> int:
    """What counts as a record: every element but a CSV header (an element of a CSV file may
    span lines, as a record whose quoted field holds a line break does)."""
    header = name.lower().endswith(".csv") and lines[0] == b"uuid,val,ts"
    return len(lines) - header


def batches_by_file(conn, checkpoints: Path) -> dict[str, tuple[int, int, int, int]]:
    """File name -> (rows_in, accepted, duplicates, rejected) of the batch that read it."""
    rows = conn.execute(
        "SELECT split_part(query_id, '/', 2), batch_id, rows_in, accepted, duplicates, rejected "
        "FROM slidewin.ingest_batches"
    ).fetchall()
    out = {}
    for stream, batch_id, *counts in rows:
        files = batch_files(checkpoints / stream, batch_id)
        assert len(files) == 1, (stream, batch_id, files)
        out[files[0].name] = tuple(counts)
    return out


def stored_uuids(conn) -> set[str]:
    return {u for (u,) in conn.execute("SELECT uuid FROM slidewin.events")}


@pytest.mark.slow
def test_no_input_stops_the_stream_and_every_record_is_accounted_for(
    spark, store_dsn, conn, tmp_path
):
    iconn = clean_ingest_state(conn)
    land = tmp_path / "landing"
    land.mkdir()
    base = time.time() - 1000
    for i, (name, (lines, _, _)) in enumerate(TEXT.items()):
        write_bytes(land, name, lines, base + i)
    expected = {name: (records(name, ls), want, why) for name, (ls, want, why) in TEXT.items()}
    # the text files first: ts_range.jsonl is then the store's very first batch
    ingest_once(spark, store_dsn, tmp_path, format="auto", max_files_per_trigger=1)
    expected |= parquet_corpus(land)
    ingest_once(spark, store_dsn, tmp_path, format="auto", max_files_per_trigger=1)

    by_file = batches_by_file(iconn, tmp_path / "cp")
    assert set(by_file) == set(expected), "every file was read, whatever its name's case"
    dead = iconn.execute("SELECT source, reason FROM slidewin.dead_letters").fetchall()
    stored = stored_uuids(iconn)
    for name, (count, want, reasons) in expected.items():
        rows_in, accepted, duplicates, rejected = by_file[name]
        assert rows_in == count == accepted + duplicates + rejected, name
        assert Counter(r for s, r in dead if s == name) == reasons, name
        assert accepted == len(want) and want <= stored, name
    assert len(stored) == sum(len(w) for _, w, _ in expected.values())
    year_one = iconn.execute("SELECT ts FROM slidewin.events WHERE uuid = 'r4'").fetchone()[0]
    assert year_one == YEAR_ONE

    # the stream goes on: a good file after the poison is stored
    write_bytes(land, "after.jsonl", [line(b"after")], time.time())
    ingest_once(spark, store_dsn, tmp_path, format="auto", max_files_per_trigger=1)
    assert "after" in stored_uuids(iconn)


def test_dead_letters_give_back_the_exact_input_bytes(spark, store_dsn, conn, tmp_path):
    iconn = clean_ingest_state(conn)
    land = tmp_path / "landing"
    land.mkdir()
    lines = [
        line("ключ-é".encode("latin-1", "replace")),  # not UTF-8
        b"\x00{}\x00",  # NUL
        b"not json \\0 but a literal backslash-zero",  # must not be mistaken for NUL
        bytes(range(1, 256)).replace(b"\n", b"").replace(b"\r", b""),
    ]
    write_bytes(land, "raw.jsonl", lines, time.time() - 10)
    pq.write_table(
        pa.table({"uuid": pa.array([b"k\xc3("], pa.binary()), "val": [1],
                  "ts": pa.array([T0], pa.timestamp("us", tz="UTC"))}),
        land / "raw.parquet",
    )
    ingest_once(spark, store_dsn, tmp_path, format="auto", max_files_per_trigger=5)
    got = iconn.execute(
        "SELECT source, coalesce(raw_bytes, convert_to(raw, 'UTF8')), raw_bytes IS NULL, raw "
        "FROM slidewin.dead_letters"
    ).fetchall()
    text = {bytes(exact) for source, exact, _, _ in got if source == "raw.jsonl"}
    assert text == set(lines)
    exact_text = {raw for source, _, is_text, raw in got if source == "raw.jsonl" and is_text}
    assert exact_text == {"not json \\0 but a literal backslash-zero"}
    parquet = [bytes(exact) for source, exact, _, _ in got if source == "raw.parquet"]
    assert parquet == [b"k\xc3("]


def events_file(land: Path, name: str, events: list[tuple[str, int]], mtime: float) -> None:
    write_bytes(land, name, [line(u.encode(), str(v).encode()) for u, v in events], mtime)


@pytest.mark.slow
def test_a_row_postgresql_refuses_is_narrowed_to_and_the_rest_commits(
    spark, make_store, tmp_path
):
    """Something validation did not foresee -- here a CHECK constraint a DBA added -- fails
    the batch; it is written again file by file and row by row, and only the refused rows
    become dead letters (one per input copy), with PostgreSQL's reason."""
    dsn = make_store(8)
    land = tmp_path / "landing"
    land.mkdir()
    base = time.time() - 100
    events_file(land, "a.jsonl", [("a1", 1), ("a2", 666), ("a3", 3)], base)
    events_file(land, "b.jsonl", [("b1", 666), ("b1", 666), ("b2", 2)], base + 1)
    events_file(land, "c.jsonl", [("c1", 1)], base + 2)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE slidewin.events ADD CONSTRAINT no_666 CHECK (val <> 666)")
        ingest_once(spark, dsn, tmp_path, max_files_per_trigger=10)
        assert stored_uuids(conn) == {"a1", "a3", "b2", "c1"}
        dead = conn.execute(
            "SELECT source, reason, detail, raw FROM slidewin.dead_letters ORDER BY source"
        ).fetchall()
        assert [(s, r) for s, r, _, _ in dead] == [("a.jsonl", "unstorable")] + [
            ("b.jsonl", "unstorable")
        ] * 2
        assert all('"no_666"' in detail for _, _, detail, _ in dead)
        assert json.loads(dead[0][3])["uuid"] == "a2"
        marker = conn.execute(
            "SELECT rows_in, accepted, duplicates, rejected FROM slidewin.ingest_batches"
        ).fetchall()
        assert marker == [(7, 4, 0, 3)]
        assert_rollups_exact(conn)


@pytest.mark.slow
def test_a_failure_that_is_not_the_rows_fault_dead_letters_nothing(spark, make_store, tmp_path):
    """A missing partition is no fault of the events: the batch fails whole (nothing stored,
    nothing dead-lettered) and is written once the cause is mended."""
    dsn = make_store(8)
    land = tmp_path / "landing"
    land.mkdir()
    events_file(land, "a.jsonl", [("k1", 1), ("k2", 2)], time.time() - 10)
    part = partition_of("k1", 8)
    rename = "ALTER TABLE slidewin.events_p{0:03d}{1} RENAME TO events_p{0:03d}{2}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(rename.format(part, "", "_away"))
        with pytest.raises(IngestError, match="UndefinedTable.*events_p"):
            ingest_once(spark, dsn, tmp_path)
        counts = "SELECT (SELECT count(*) FROM slidewin.dead_letters), "
        counts += "(SELECT count(*) FROM slidewin.ingest_batches)"
        assert conn.execute(counts).fetchone() == (0, 0)
        conn.execute(rename.format(part, "_away", ""))
        ingest_once(spark, dsn, tmp_path)
        assert stored_uuids(conn) == {"k1", "k2"}
        assert conn.execute(counts).fetchone() == (0, 1)


@pytest.mark.slow
def test_a_name_used_before_is_read_again_and_a_restart_is_quiet(make_store, tmp_path):
    """``slidewin ingest --once`` twice, as a user runs it: the second run reads a file sent
    again under a name the first run archived (renamed, reported), and prints no warnings
    about the first run's files, which were archived on purpose."""
    dsn = make_store(8)
    land = tmp_path / "landing"
    land.mkdir()
    env = {**os.environ, "SLIDEWIN_DSN": dsn}
    argv = [sys.executable, "-c", "from slidewin.client.cli import main; main()",
            "--data-dir", str(tmp_path / "data"), "ingest", "--landing", str(land), "--once"]
    events_file(land, "a.jsonl", [("k1", 1), ("k2", 2)], time.time() - 5)
    first = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    events_file(land, "a.jsonl", [("k2", 2), ("k3", 3)], time.time())
    second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "a.jsonl was read before under that name" in second.stderr
    assert not [x for x in second.stderr.splitlines() if " WARN " in x], second.stderr
    assert list(land.iterdir()) == []
    with psycopg.connect(dsn) as conn:
        assert stored_uuids(conn) == {"k1", "k2", "k3"}
        assert conn.execute(
            "SELECT sum(rows_in), sum(accepted), sum(duplicates) FROM slidewin.ingest_batches"
        ).fetchone() == (4, 3, 1)


@pytest.mark.slow
def test_a_rewritten_file_and_an_old_file_are_read(spark, store_dsn, conn, tmp_path):
    """Spark skips a path it has read (whatever is there now) and files far older than the
    newest it has seen; the landing sweep hands both back."""
    iconn = clean_ingest_state(conn)
    land = tmp_path / "landing"
    land.mkdir()
    events_file(land, "a.jsonl", [("k1", 1)], time.time() - 60)
    ingest_once(spark, store_dsn, tmp_path)  # keep: a.jsonl stays where it is
    events_file(land, "a.jsonl", [("k1", 1), ("k2", 2)], time.time() - 30)  # rewritten
    events_file(land, "old.jsonl", [("k3", 3)], time.time() - 30 * 86400)  # a month old
    lines = ingest_once(spark, store_dsn, tmp_path)
    assert stored_uuids(iconn) == {"k1", "k2", "k3"}
    assert sum("renamed to a.resent-" in x for x in lines) == 1
    assert sum("old.jsonl is older than Spark reads" in x for x in lines) == 1
    lines = ingest_once(spark, store_dsn, tmp_path)  # nothing left to hand back
    assert not [x for x in lines if x.startswith("landing:")]
