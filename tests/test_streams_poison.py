"""The hostile-input corpus of the built-in stream (tests/test_ingest_poison.py), fed to a
declared stream of the same shape (uuid text key, val bigint, ts) through the real ingest:
Spark, the record path for what Spark cannot vouch for, and PostgreSQL. Whatever the bytes,
every record of every file is stored or dead-lettered -- each file's counts and reasons those
the record path (``ingest.typed``, the rules' one statement) gives the same file alone -- the
dead letters give back the exact input, and the stream goes on to store a good file after it.
The landing hazards too: names Spark would take for patterns, and entries nobody may open."""

from __future__ import annotations

import os
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from slidewin.db import streams
from slidewin.db.streams import Column
from slidewin.ingest.config import DEFAULT_MAX_FUTURE
from slidewin.ingest.typed import Layout, Limits, clean_text, parse_files
from tests.ingest_fixtures import clean_ingest_state
from tests.test_ingest_poison import TEXT, batches_by_file, line, parquet_corpus, write_bytes
from tests.test_ingest_stream import NOW, ingest_once

pytestmark = [pytest.mark.spark, pytest.mark.slow]
NAME = "poison"


@pytest.fixture
def declared(conn):
    clean_ingest_state(conn)
    for s in streams.list_streams(conn, declared_only=True):
        streams.drop(conn, s.name)
    stream = streams.define(conn, NAME, key="uuid", time="ts",
                            columns=[Column("uuid", "text"), Column("val", "bigint")],
                            measures=["val"], grace=timedelta(hours=1))
    yield stream
    for s in streams.list_streams(conn, declared_only=True):
        streams.drop(conn, s.name)


def expected_of(stream, folder: Path) -> tuple[dict[str, tuple[int, Counter[str], set[str]]],
                                              Counter[tuple]]:
    """File -> (records, rejected reasons, stored keys) as the record path reads it alone, and
    its dead letters as the store keeps them: (source, reason, detail, the exact input)."""
    layout = Layout(stream)
    out, letters = {}, Counter()
    for path in folder.iterdir():
        if path.name.startswith("."):
            continue
        parsed = parse_files(layout, [(path.name, path.read_bytes())],
                             Limits(NOW, grace=stream.grace, max_future=DEFAULT_MAX_FUTURE))
        keys = {r[0] for r in parsed.rows} | {
            k for t in parsed.tables for k in t.column("uuid").to_pylist()}
        out[path.name] = (parsed.rows_in, Counter(b.reason for b in parsed.bad), keys)
        for b in parsed.bad:  # as ingest.typed_sink.copy_dead_letters stores it
            raw, exact = clean_text(b.raw)
            stored = b.raw_bytes if b.raw_bytes is not None else exact
            letters[(b.source, b.reason, clean_text(b.detail)[0],
                     stored if stored is not None else raw.encode())] += 1
    return out, letters


def test_the_poison_corpus_gives_a_declared_stream_the_record_paths_answers(
        spark, store_dsn, conn, declared, tmp_path):
    land = tmp_path / "landing" / NAME
    land.mkdir(parents=True)
    base = time.time() - 1000
    for i, (name, (lines, _, _)) in enumerate(TEXT.items()):
        write_bytes(land, name, lines, base + i)
    parquet_corpus(land)
    for i, path in enumerate(sorted(land.glob("*.parquet"))):
        os.utime(path, (base + 100 + i, base + 100 + i))
    expected, letters = expected_of(declared, land)

    ingest_once(spark, store_dsn, tmp_path, format="auto", max_files_per_trigger=1)

    by_file = batches_by_file(conn, tmp_path / "cp")
    assert set(by_file) == set(expected)
    stored = {u for (u,) in conn.execute("SELECT uuid FROM slidewin_streams.poison")}
    for name, (count, _reasons, keys) in expected.items():
        rows_in, accepted, duplicates, rejected = by_file[name]
        assert rows_in == count == accepted + duplicates + rejected, name
        assert keys <= stored, name
    assert stored == set().union(*(k for _c, _r, k in expected.values()))
    # every dead letter as the record path writes it, the exact input bytes included
    got = Counter((s, r, d, bytes(b)) for s, r, d, b in conn.execute(
        "SELECT source, reason, detail, coalesce(raw_bytes, convert_to(raw, 'UTF8')) "
        "FROM slidewin.dead_letters WHERE stream = %s", (NAME,)))
    assert got == letters

    write_bytes(land, "after.jsonl", [line(b"after")], time.time())
    ingest_once(spark, store_dsn, tmp_path, format="auto", max_files_per_trigger=1)
    assert conn.execute("SELECT 1 FROM slidewin_streams.poison WHERE uuid = 'after'").fetchone()


def test_names_spark_would_take_for_patterns_and_a_pipe(spark, store_dsn, conn, declared,
                                                         tmp_path):
    """Each file is read once, as itself, however its name looks to Hadoop's globbing; a named
    pipe is set aside, never opened (it would block the batch forever)."""
    land = tmp_path / "landing" / NAME
    land.mkdir(parents=True)
    names = ["a[1].jsonl", "{b,c}.jsonl", "star*.jsonl", "q?.jsonl", "plain.jsonl",
             "back\\slash.jsonl"]
    for i, name in enumerate(names):
        write_bytes(land, name, [line(f"k{i}".encode()), line(f"k{i}-2".encode())],
                    time.time() - 100)
    os.mkfifo(land / "pipe.jsonl")
    ingest_once(spark, store_dsn, tmp_path, format="auto", max_files_per_trigger=20)
    stored = Counter(u for (u,) in conn.execute("SELECT uuid FROM slidewin_streams.poison"))
    assert stored == Counter({f"k{i}{s}": 1 for i in range(len(names)) for s in ("", "-2")})
    batch = conn.execute("SELECT rows_in, accepted, duplicates, rejected FROM "
                         "slidewin.ingest_batches WHERE query_id LIKE %s",
                         (f"%/stream-{NAME}/%",)).fetchall()
    assert [tuple(b) for b in batch] == [(2 * len(names), 2 * len(names), 0, 0)]
    # the pipe was set aside by the landing sweep before Spark could list it, never opened
    assert not (land / "pipe.jsonl").exists()
    assert [p.name for p in (tmp_path / "landing-rejected").rglob("pipe.jsonl*")]
