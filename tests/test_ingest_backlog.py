"""Falling behind is said: the files waiting in the landing folders and the oldest one's age
(``ingest.backlog``), the warning the ingest prints while it is behind (at most every 30 s), the
lines the demo passes on, and the demo's non-zero exit when its ingest stored nothing. The clock
is pinned: file ages come from modification times set by the test. No Spark."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from slidewin.client.cli.context import AppContext
from slidewin.client.cli.demo import Demo, DemoError, behind_at_end, ingest_failure
from slidewin.ingest.backlog import (
    Backlog,
    BehindAlarm,
    Folder,
    behind_after,
    folders_under,
    measure,
)
from slidewin.ingest.config import IngestConfig
from slidewin.ingest.landing import LandingSweep
from slidewin.ingest.runner import _backlog_watch
from tests.conftest import T0


def put(folder: Path, name: str, age_s: float) -> Path:
    """A file in ``folder`` whose modification time is ``age_s`` before the pinned T0."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text('{"uuid":"k","val":1,"ts":"2026-01-01T00:00:00Z"}\n', encoding="utf-8")
    stamp = (T0 - timedelta(seconds=age_s)).timestamp()
    os.utime(path, (stamp, stamp))
    return path


def mtime_ms(path: Path) -> int:
    return int(path.stat().st_mtime * 1000)


# --- the measurement ----------------------------------------------------------------------------


def test_waiting_files_and_the_oldest_age_on_a_pinned_clock(tmp_path):
    land = tmp_path / "landing"
    put(land, "a.jsonl", 3)
    put(land, "b.csv", 42.4)
    put(land, "c.parquet", 7)
    put(land, ".d.jsonl.tmp", 500)  # a producer's file still being written
    put(land, "_e.jsonl", 500)  # hidden from Spark too
    put(land, "notes.txt", 500)  # no stream reads it
    (land / "s").mkdir()  # a folder is no file
    backlog = measure([Folder(land, (".jsonl", ".csv", ".parquet"))], T0)
    assert backlog == Backlog(files=3, oldest_age=timedelta(seconds=42.4), capped=False)
    assert backlog.describe() == "3 files waiting, the oldest 42s old"


def test_files_a_batch_picked_up_are_not_waiting(tmp_path):
    land = tmp_path / "landing"
    read = put(land, "read.jsonl", 100)
    put(land, "new.jsonl", 5)
    listed = {str(read): mtime_ms(read)}
    backlog = measure([Folder(land, (".jsonl",), lambda p, ms: listed.get(p) == ms)], T0)
    assert (backlog.files, backlog.oldest_age) == (1, timedelta(seconds=5))


def test_an_empty_or_missing_landing_directory_has_nothing_waiting(tmp_path):
    backlog = measure([Folder(tmp_path / "absent"), Folder(tmp_path)], T0)
    assert backlog == Backlog(0, None, False)
    assert backlog.describe() == "no file waiting"


def test_the_scan_is_bounded_and_says_at_least(tmp_path):
    land = tmp_path / "landing"
    for i in range(30):
        put(land, f"f{i:02d}.jsonl", i)
    backlog = measure([Folder(land)], T0, limit=10)
    assert backlog.capped and backlog.files == 10
    assert backlog.describe().startswith("at least 10 files waiting, the oldest at least ")


def test_a_demo_landing_counts_every_stream_folder(tmp_path):
    land = tmp_path / "landing"
    put(land, "events-1.jsonl", 2)
    put(land / "demo_sensors", "x.jsonl", 61)
    put(land / "demo_orders", "y.jsonl", 1)
    backlog = measure(folders_under(land), T0)
    assert (backlog.files, backlog.oldest_age) == (3, timedelta(seconds=61))


# --- the warning --------------------------------------------------------------------------------


def test_behind_means_twenty_triggers_and_at_least_ten_seconds():
    assert behind_after(timedelta(milliseconds=100)) == timedelta(seconds=10)
    assert behind_after(timedelta(milliseconds=100), timedelta(seconds=2)) == timedelta(seconds=40)


def test_the_warning_is_said_at_most_every_30s_and_once_caught_up():
    alarm = BehindAlarm(timedelta(seconds=10))
    behind = Backlog(1200, timedelta(seconds=45))
    line = alarm.check(behind, T0)
    assert line == (
        "warning: ingest falling behind: 1200 files waiting, the oldest 45s old in the landing "
        "directory (behind from 10s); the machine is short of CPU for this rate -- slow the "
        "producers or give the ingest more cores")
    assert alarm.check(behind, T0 + timedelta(seconds=29)) is None
    assert alarm.check(behind, T0 + timedelta(seconds=30)) is not None
    assert alarm.check(Backlog(3, timedelta(seconds=1)), T0 + timedelta(seconds=35)) == (
        "ingest caught up: 3 files waiting, the oldest 1s old")
    assert alarm.check(Backlog(), T0 + timedelta(seconds=40)) is None  # said once


def test_an_ingest_that_keeps_up_says_nothing():
    alarm = BehindAlarm(timedelta(seconds=10))
    assert alarm.check(Backlog(50, timedelta(seconds=9.9)), T0) is None
    assert alarm.check(Backlog(), T0 + timedelta(minutes=5)) is None


def test_the_running_ingest_warns_for_its_own_and_its_declared_streams_folders(tmp_path):
    land = tmp_path / "landing"
    land.mkdir()
    config = IngestConfig(landing=land, checkpoint_dir=tmp_path / "cp",
                          archive_dir=tmp_path / "arch")
    put(land, "a.jsonl", 3)
    put(land / "s", "old.jsonl", 3600)  # waiting in the declared stream s's folder
    picked = put(land / "s", "read.parquet", 7200)  # in its source log: picked up
    log = tmp_path / "cp" / "stream-s" / "sources" / "0"
    log.mkdir(parents=True)
    (log / "0").write_text("v1\n" + json.dumps(
        {"path": picked.as_uri(), "timestamp": mtime_ms(picked), "batchId": 0}) + "\n")
    warned: list[str] = []
    sweep = LandingSweep(config, lambda _line: None, lambda: T0)
    declared = SimpleNamespace(running={"s": None})
    watch = _backlog_watch(config, sweep, declared, warned.append, lambda: T0)
    watch()
    assert warned == [
        "warning: ingest falling behind: 2 files waiting, the oldest 60m old in the landing "
        "directory (behind from 10s); the machine is short of CPU for this rate -- slow the "
        "producers or give the ingest more cores"]
    watch()
    assert len(warned) == 1  # the clock did not move: not said again


# --- the demo -----------------------------------------------------------------------------------


def summary(written: int, ingested: int) -> SimpleNamespace:
    return SimpleNamespace(written=written, ingested=ingested, duration_s=60.2)


def test_a_demo_that_ingested_nothing_fails_saying_why(tmp_path):
    log = tmp_path / "ingest.log"
    failure = ingest_failure(summary(899_331, 0), Backlog(3100, timedelta(seconds=58)), log)
    assert isinstance(failure, DemoError)
    assert failure.exit_code != 0
    assert str(failure) == (
        "the ingest stored none of the 899331 events written in 60 s (3100 files waiting, the "
        "oldest 58s old): it fell behind, the machine short of CPU for this rate -- lower "
        f"--ratelimit (and --demo-stream-rate, --join-rate), or see the ingest's log {log}")


@pytest.mark.parametrize(("written", "ingested"), [(1000, 1), (0, 0)])
def test_a_demo_that_ingested_something_or_wrote_nothing_does_not_fail(tmp_path, written,
                                                                       ingested):
    assert ingest_failure(summary(written, ingested), Backlog(), tmp_path / "log") is None


def test_a_demo_that_ended_behind_says_so():
    assert behind_at_end(Backlog(40, timedelta(seconds=25)), timedelta(seconds=10)) == (
        "warning: ingest behind at the end: 40 files waiting, the oldest 25s old in the landing "
        "directory (behind from 10s); the machine is short of CPU for this rate -- slow the "
        "producers or give the ingest more cores")
    assert behind_at_end(Backlog(40, timedelta(seconds=2)), timedelta(seconds=10)) is None
    assert behind_at_end(None, timedelta(seconds=10)) is None


def test_the_demo_passes_the_ingests_warning_on_even_when_quiet(tmp_path, capsys):
    demo = Demo(AppContext(quiet=True), SimpleNamespace(), tmp_path, "dbname=x")
    line = ("warning: ingest falling behind: 9 files waiting, the oldest 12s old in the landing "
            "directory (behind from 10s); ...")
    demo._on_ingest_line(line)
    demo._on_ingest_line("[text] batch 7: in 10, accepted 10")
    err = capsys.readouterr().err
    assert err == line + "\n"
    assert demo.batches == 1
