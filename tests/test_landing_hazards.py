"""A producer's landing directory is hostile; the rest of it must still flow.

A corpus of hazards is dropped together with good files -- a symbolic link that loops and one
that leads nowhere, named pipes (FIFOs) under the names of a Parquet and a JSON Lines file,
names Hadoop takes for URIs (``:``) or glob patterns (``[ ] { } ? * \\``), names that need
URI escaping -- and the ingest must store every good event exactly once, account for every bad
entry (moved to ``<landing>-rejected/`` with a ``landing:`` line, or a dead letter with a
reason), and neither stop nor hang. Then each hazard of a *running* stream: a pipe Spark lists
before the sweep sees it, a file appended to in place while its batch runs, and the files a
killed run leaves behind.

Runs that could hang (a pipe opened for reading blocks until a writer comes) are bounded: the
command-line runs by their subprocess timeout, the in-process ones by a watchdog that opens
the pipe for writing, which frees any reader, and records that it had to.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from slidewin.ingest.config import IngestConfig
from slidewin.ingest.landing import LandingSweep
from tests.conftest import T0
from tests.ingest_fixtures import (
    clean_ingest_state,
    event,
    stored_rows,
    write_jsonl,
    write_lines,
)
from tests.invariants import assert_rollups_exact
from tests.test_ingest_stream import ingest_once
from tests.waiting import wait_until

pytestmark = pytest.mark.spark
SLIDEWIN = str(Path(sys.executable).parent / "slidewin")
RUN_TIMEOUT_S = 300  # a hang fails the test instead of holding it forever
# names Hadoop reads as a URI (the colon) or a glob pattern, and names that need escaping in one
ODD_NAMES = ["a:b", "d[1]", "e{x,y}", "f?", "g*", "h\\i", "c:[2]", "sp ace", "pct%41", "q#r"]


@pytest.fixture
def iconn(conn):
    return clean_ingest_state(conn)


def ts(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def parquet(folder: Path, name: str, uuids: list[str], seconds: float = 0) -> Path:
    table = pa.table({
        "uuid": uuids,
        "val": pa.array(range(len(uuids)), pa.int64()),
        "ts": pa.array([ts(seconds)] * len(uuids), pa.timestamp("us", tz="UTC")),
    })
    pq.write_table(table, folder / f".{name}.tmp")
    os.replace(folder / f".{name}.tmp", folder / name)
    return folder / name


def good_corpus(land: Path) -> set[str]:
    """Good files in all three formats, and one good event under each odd name; returns the
    uuids the store must hold."""
    write_jsonl(land, "good.jsonl", [event("good-j", 1, 0)])
    write_lines(land, "good.csv", ["uuid,val,ts", "good-c,2,2026-01-01T12:00:00Z"])
    parquet(land, "good.parquet", ["good-p"])
    uuids = {"good-j", "good-c", "good-p"}
    for i, name in enumerate(ODD_NAMES):
        if i % 3 == 2:
            parquet(land, f"{name}.parquet", [f"odd-{name}"], seconds=1)
        else:
            write_jsonl(land, f"{name}.jsonl", [event(f"odd-{name}", i, 1)])
        uuids.add(f"odd-{name}")
    return uuids


def bad_corpus(land: Path) -> list[str]:
    """Entries nothing may open, under names the streams read; returns their names."""
    os.symlink("loop.jsonl", land / "loop.jsonl")  # ln -s loop.jsonl loop.jsonl
    os.symlink("nowhere.csv", land / "dangling.csv")
    os.mkfifo(land / "x.parquet")
    os.mkfifo(land / "y.jsonl")
    bad = ["loop.jsonl", "dangling.csv", "x.parquet", "y.jsonl"]
    if os.geteuid() != 0:  # root reads every file
        locked = write_jsonl(land, "locked.jsonl", [event("locked", 1, 0)])
        locked.chmod(0)
        bad.append("locked.jsonl")
    return bad


def batch_sums(conn: psycopg.Connection) -> tuple[int, int, int, int]:
    row = conn.execute(
        "SELECT coalesce(sum(rows_in), 0), coalesce(sum(accepted), 0), "
        "coalesce(sum(duplicates), 0), coalesce(sum(rejected), 0) FROM slidewin.ingest_batches"
    ).fetchone()
    assert row is not None
    return (int(row[0]), int(row[1]), int(row[2]), int(row[3]))


def cli(dsn: str, tmp: Path, *args: str) -> list[str]:
    return [SLIDEWIN, "--dsn", dsn, "--data-dir", str(tmp / "data"), "ingest",
            "--landing", str(tmp / "landing"), "--master", "local[1]", "--grace", "1h", *args]


@pytest.mark.slow
def test_the_corpus_dropped_with_good_files(make_store, tmp_path):
    """``slidewin ingest --once`` over the whole corpus: every good event stored once, every
    hazard moved aside with a line saying why, exit 0, nothing left in the landing dir."""
    dsn = make_store(4)
    land = tmp_path / "landing"
    land.mkdir()
    uuids = good_corpus(land)
    bad = bad_corpus(land)

    run = subprocess.run(cli(dsn, tmp_path, "--once"), capture_output=True, text=True,
                         timeout=RUN_TIMEOUT_S, check=False)

    assert run.returncode == 0, run.stderr[-3000:]
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert {u for u, _v, _t in stored_rows(conn)} == uuids
        # each file read once: no line counted twice, nothing rejected
        assert batch_sums(conn) == (len(uuids), len(uuids), 0, 0)
        assert conn.execute("SELECT count(*) FROM slidewin.dead_letters").fetchone() == (0,)
        assert_rollups_exact(conn)
    rejected = tmp_path / "landing-rejected"
    assert sorted(p.name for p in rejected.iterdir()) == sorted(bad)
    said = [line for line in run.stderr.splitlines() if line.startswith("landing: ")]
    for name in bad:
        assert any(line.startswith(f"landing: {name} is ") for line in said), said
    assert list(land.iterdir()) == []  # the good files are archived, the bad ones aside


@pytest.mark.slow
def test_odd_names_are_read_as_themselves(spark, store_dsn, iconn, tmp_path):
    """A colon failed every read (Hadoop's checksum layer cannot name ``.a:b.jsonl.crc``) and a
    glob character made Spark read the batch's other files again, once per such name."""
    land = tmp_path / "landing"
    land.mkdir()
    uuids = good_corpus(land)
    ingest_once(spark, store_dsn, tmp_path, format="auto", max_files_per_trigger=50)
    assert {u for u, _v, _t in stored_rows(iconn)} == uuids
    assert batch_sums(iconn) == (len(uuids), len(uuids), 0, 0)
    assert iconn.execute("SELECT count(*) FROM slidewin.dead_letters").fetchone() == (0,)


def test_links_that_lead_nowhere_do_not_stop_the_start(spark, store_dsn, iconn, tmp_path):
    """``ln -s a.jsonl a.jsonl`` made every start fail (the sweep's own listing raised), and the
    good file beside it was never read."""
    land = tmp_path / "landing"
    land.mkdir()
    write_jsonl(land, "good.jsonl", [event("g", 1, 0)])
    os.symlink("a.jsonl", land / "a.jsonl")
    os.symlink("gone.jsonl", land / "b.jsonl")
    lines = ingest_once(spark, store_dsn, tmp_path)
    assert {u for u, _v, _t in stored_rows(iconn)} == {"g"}
    assert sorted(p.name for p in (tmp_path / "landing-rejected").iterdir()) == [
        "a.jsonl", "b.jsonl"
    ]
    assert sum(line.startswith("landing: a.jsonl is a symbolic link") for line in lines) == 1


@contextmanager
def pipe_watchdog(pipes: list[Path], after_s: float) -> Iterator[list[Path]]:
    """Yields the list of pipes it had to open for writing because a reader was still blocked
    on them ``after_s`` seconds in (which frees the reader: the test then fails, not hangs)."""
    freed: list[Path] = []
    done = threading.Event()

    def watch() -> None:
        if done.wait(after_s):
            return
        while not done.wait(1.0):
            for pipe in pipes:
                try:  # non-blocking: succeeds only if a reader has the pipe open (blocked)
                    fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
                except OSError:
                    continue
                freed.append(pipe)
                os.close(fd)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield freed
    finally:
        done.set()
        thread.join(5)


def test_a_pipe_spark_lists_first_is_a_dead_letter_never_opened(
    spark, store_dsn, iconn, tmp_path, monkeypatch
):
    """A pipe dropped between two sweeps is listed by Spark before the sweep can move it aside
    (here: the sweep never moves anything). Its batch must not open it -- ``--once`` hung
    forever on a pipe named ``x.parquet`` -- and dead-letters it instead, the good file beside
    it stored."""
    monkeypatch.setattr(LandingSweep, "_set_aside", lambda _self, _entries: 0, raising=False)
    land = tmp_path / "landing"
    land.mkdir()
    parquet(land, "good.parquet", ["p1", "p2"])
    write_jsonl(land, "good.jsonl", [event("j1", 1, 0)])
    pipes = [land / "x.parquet", land / "y.jsonl"]
    for pipe in pipes:
        os.mkfifo(pipe)
    with pipe_watchdog(pipes, after_s=60) as freed:
        ingest_once(spark, store_dsn, tmp_path, format="auto", max_files_per_trigger=10)
    assert freed == [], "the batch opened a named pipe and blocked on it"
    assert {u for u, _v, _t in stored_rows(iconn)} == {"p1", "p2", "j1"}
    dead = iconn.execute(
        "SELECT source, reason, detail FROM slidewin.dead_letters ORDER BY source"
    ).fetchall()
    assert [(s, r) for s, r, _d in dead] == [
        ("x.parquet", "unreadable_file"), ("y.jsonl", "unreadable_file")
    ]
    assert all("named pipe" in detail for _s, _r, detail in dead)


def sweep_for(tmp_path: Path, **kw) -> tuple[LandingSweep, list[str], IngestConfig]:
    land = tmp_path / "landing"
    land.mkdir(exist_ok=True)
    config = IngestConfig(landing=land, checkpoint_dir=tmp_path / "cp",
                          archive_dir=tmp_path / "archive", format="json", **kw)
    lines: list[str] = []
    return LandingSweep(config, lines.append, clock=lambda: T0), lines, config


def log_batch(config: IngestConfig, batch_id: int, files: dict[Path, int]) -> None:
    """Write the file source's log entry for ``batch_id`` as Spark does (path -> mtime ms)."""
    log = config.checkpoint_for("text") / "sources" / "0"
    log.mkdir(parents=True, exist_ok=True)
    records = [json.dumps({"path": path.as_uri(), "timestamp": ms, "batchId": batch_id})
               for path, ms in files.items()]
    (log / str(batch_id)).write_text("\n".join(["v1", *records]) + "\n", encoding="utf-8")


def commit(config: IngestConfig, batch_id: int) -> None:
    commits = config.checkpoint_for("text") / "commits"
    commits.mkdir(parents=True, exist_ok=True)
    (commits / str(batch_id)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')


def mtime_ms(path: Path) -> int:
    return int(path.stat().st_mtime * 1000)


def test_a_file_appended_to_is_handed_back_only_once_its_batch_committed(tmp_path):
    """The sweep renamed a file appended to in place while the batch that listed it was still
    reading it; the read failed and left an ``unreadable_file`` dead letter. Timeline::

        write app.jsonl | batch 0 lists it (mtime m0) | append (m1) | sweep | commit 0 | sweep
                                                                     keep             rename
    """
    sweep, lines, config = sweep_for(tmp_path)
    app = write_jsonl(config.landing, "app.jsonl", [event("a", 1, 0)])
    log_batch(config, 0, {app: mtime_ms(app)})
    with app.open("a", encoding="utf-8") as f:
        f.write(json.dumps(event("b", 2, 1)) + "\n")
    os.utime(app, (time.time() + 5, time.time() + 5))  # a later modification time, surely

    assert sweep.sweep() == 0
    assert app.is_file() and lines == []  # batch 0 has not committed: it may be reading it

    commit(config, 0)
    assert sweep.sweep() == 1
    [resent] = [p.name for p in config.landing.iterdir()]
    assert resent.startswith("app.resent-") and resent.endswith(".jsonl")
    assert lines[0].startswith("landing: app.jsonl was read before")


def test_a_batch_s_files_appended_to_since_it_read_them_are_handed_back_as_it_commits(tmp_path):
    """Spark archives a batch's files when it plans the next batch, lines appended since unread;
    ``after_batch`` (called as the batch commits) renames them first, so they are read again."""
    sweep, _lines, config = sweep_for(tmp_path, processed="archive")
    same = write_jsonl(config.landing, "same.jsonl", [event("s", 1, 0)])
    grown = write_jsonl(config.landing, "grown.jsonl", [event("g", 1, 0)])
    log_batch(config, 0, {same: mtime_ms(same), grown: mtime_ms(grown) - 1000})
    assert sweep.after_batch("text", 0) == 1
    names = sorted(p.name for p in config.landing.iterdir())
    assert names[0].startswith("grown.resent-") and names[1] == "same.jsonl"


@pytest.mark.slow
def test_files_a_killed_run_left_are_archived_at_the_next_start(spark, store_dsn, iconn, tmp_path):
    """Spark archives a batch's files when it plans the next batch, and ``ingest.tidy`` the last
    batch's at a clean stop; a SIGKILL in between leaves stored files in the landing dir for
    good. The state such a kill leaves -- committed batches whose files are back in the landing
    dir, unchanged -- is made here by moving archived files back."""
    land = tmp_path / "landing"
    land.mkdir()
    base = time.time() - 100
    files = [write_jsonl(land, f"f{i}.jsonl", [event(f"k{i}", i, i)], mtime=base + i)
             for i in range(3)]
    ingest_once(spark, store_dsn, tmp_path, processed="archive")
    archived = [tmp_path / "archive" / str(f).lstrip("/") for f in files]
    assert all(a.is_file() for a in archived) and list(land.iterdir()) == []
    for path, copy in zip(files[:2], archived[:2], strict=True):
        shutil.move(copy, path)  # as if the run had been killed before moving them

    lines = ingest_once(spark, store_dsn, tmp_path, processed="archive")

    assert list(land.iterdir()) == []
    assert all(a.is_file() for a in archived)
    assert "landing: archived 2 file(s) already stored by a run that ended" in "\n".join(lines)
    assert batch_sums(iconn) == (3, 3, 0, 0)  # nothing read twice


# -- a running stream ----------------------------------------------------------------------------


def wait_for(condition, proc: subprocess.Popen, timeout_s: float, what: str) -> None:
    """Wait until ``condition()`` while the ingest runs (its exit ends the wait at once)."""

    def check() -> bool:
        assert proc.poll() is None, f"waiting for {what}, the ingest exited {proc.poll()}"
        return condition()

    wait_until(check, timeout_s, interval_s=0.3, what=what)


def stored_uuids(dsn: str) -> set[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {row[0] for row in conn.execute("SELECT uuid FROM slidewin.events")}


@pytest.mark.slow
def test_a_running_stream_with_a_pipe_dropped_in_stops_at_once(make_store, tmp_path):
    """A pipe named ``x.parquet`` dropped into a running stream held it: SIGTERM was ignored for
    minutes. Now the pipe is moved aside (or dead-lettered, if Spark lists it first), the good
    files keep flowing, and SIGTERM stops the ingest cleanly."""
    dsn = make_store(4)
    land = tmp_path / "landing"
    land.mkdir()
    proc = subprocess.Popen(cli(dsn, tmp_path, "--trigger", "200ms"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        parquet(land, "first.parquet", ["first"])
        wait_for(lambda: "first" in stored_uuids(dsn), proc, 180, "the first file stored")
        os.mkfifo(land / "x.parquet")
        os.mkfifo(land / "y.jsonl")
        parquet(land, "after.parquet", ["after"])
        write_jsonl(land, "after.jsonl", [event("after-j", 1, 0)])
        wait_for(lambda: {"after", "after-j"} <= stored_uuids(dsn), proc, 60,
                 "the good files beside the pipes stored")
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
            pytest.fail("the ingest did not stop within 60 s of SIGTERM")
    assert proc.returncode == 0, err[-3000:]
    with psycopg.connect(dsn, autocommit=True) as conn:
        dead = {row[0] for row in conn.execute("SELECT source FROM slidewin.dead_letters")}
    rejected = tmp_path / "landing-rejected"
    aside = {p.name for p in rejected.iterdir()} if rejected.is_dir() else set()
    assert {"x.parquet", "y.jsonl"} <= dead | aside  # each accounted for, one way or the other


@pytest.mark.slow
def test_a_file_appended_to_while_streaming_leaves_no_dead_letter(make_store, tmp_path):
    """A producer appending to one file in place: every event is stored exactly once, and no
    ``unreadable_file`` dead letter appears (the sweep no longer renames a file from under the
    batch reading it)."""
    dsn = make_store(4)
    land = tmp_path / "landing"
    land.mkdir()
    proc = subprocess.Popen(cli(dsn, tmp_path, "--trigger", "200ms", "--format", "json"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        app = land / "app.jsonl"
        for i in range(60):
            with app.open("a", encoding="utf-8") as f:
                f.write(json.dumps(event(f"a{i}", i, i * 0.1)) + "\n")
            time.sleep(0.1)  # the producer's pace (the behaviour under test), not a wait
        wanted = {f"a{i}" for i in range(60)}
        wait_for(lambda: wanted <= stored_uuids(dsn), proc, 180, "the appended events")
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-3000:]
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert stored_uuids(dsn) == wanted
        dead = conn.execute("SELECT reason, detail FROM slidewin.dead_letters").fetchall()
    assert [r for r in dead if r[0] == "unreadable_file"] == []
