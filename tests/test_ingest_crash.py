"""Exactly once under crashes: ``slidewin ingest`` is killed with SIGKILL in the middle of its
first batch -- (a) after the COPY but before the commit, (b) after the commit but before Spark
records the batch -- then restarted without the fault. The store must end up holding exactly
the ground truth computed from the input files (raw rows and rollups), one marker per batch,
and no JVM may outlive its driver. The restarted run streams (no --once) and is stopped with
SIGTERM or SIGINT, which must exit 0."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import psycopg
import pytest

from tests.ingest_fixtures import (
    event,
    stored_rollups,
    stored_rows,
    truth_from_jsonl,
    truth_rollups,
    write_jsonl,
)
from tests.invariants import assert_rollups_exact
from tests.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]
SLIDEWIN = str(Path(sys.executable).parent / "slidewin")


def command(dsn: str, tmp: Path, *extra: str) -> list[str]:
    return [
        SLIDEWIN,
        "--dsn",
        dsn,
        "--data-dir",
        str(tmp / "data"),
        "ingest",
        "--landing",
        str(tmp / "landing"),
        "--format",
        "json",
        "--processed",
        "keep",
        "--max-files-per-trigger",
        "1",
        "--master",
        "local[1]",
        "--trigger",
        "500ms",
        *extra,
    ]


def env_with(tag: str, fault: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SLIDEWIN_INGEST_FAULT"}
    env["SLIDEWIN_TEST_RUN"] = tag
    if fault:
        env["SLIDEWIN_INGEST_FAULT"] = fault
    return env


def tagged_processes(tag: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("SLIDEWIN_TEST_RUN") == tag:
                found.append(proc)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found


def assert_no_process_left(tag: str, timeout_s: float = 60) -> None:
    with contextlib.suppress(AssertionError):  # the report below names what is left
        wait_until(lambda: not tagged_processes(tag), timeout_s, interval_s=0.2,
                   what="the ingest's processes to end")
    left = [(p.pid, p.name()) for p in tagged_processes(tag)]
    for p in tagged_processes(tag):
        p.kill()
    assert left == [], f"processes outlived the ingest: {left}"


def wait_for_batches(dsn: str, count: int, proc: subprocess.Popen, timeout_s: float = 180):
    with psycopg.connect(dsn, autocommit=True) as conn:

        def committed() -> bool:
            assert proc.poll() is None, f"ingest exited {proc.poll()} before {count} batches"
            done = conn.execute("SELECT count(*) FROM slidewin.ingest_batches").fetchone()[0]
            return done >= count

        wait_until(committed, timeout_s, interval_s=0.2, what=f"{count} committed batches")


@pytest.mark.parametrize("fault", ["before_commit", "after_commit"])
def test_killed_mid_batch_then_restarted_is_exactly_once(make_store, tmp_path, fault):
    dsn = make_store(8)
    land = tmp_path / "landing"
    land.mkdir()
    base = time.time() - 1000
    batches = [
        [event(f"u{i}", i, i * 0.3) for i in range(50)] + [event("u1", 1, 0.3)],
        [event(f"u{i}", i, i * 0.3) for i in range(40, 80)],  # 10 repeat the first file
        [event(f"v{i}", -i, 20 + i * 0.1) for i in range(30)],
    ]
    files = [write_jsonl(land, f"f{i}.jsonl", b, mtime=base + i) for i, b in enumerate(batches)]
    truth = truth_from_jsonl(files)
    tag = uuid.uuid4().hex

    crashed = subprocess.run(
        command(dsn, tmp_path, "--once"),
        env=env_with(tag, fault),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert_no_process_left(tag)
    with psycopg.connect(dsn, autocommit=True) as conn:
        committed = conn.execute("SELECT count(*) FROM slidewin.ingest_batches").fetchone()[0]
        assert committed == (0 if fault == "before_commit" else 1)

    proc = subprocess.Popen(
        command(dsn, tmp_path),
        env=env_with(tag, None),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_batches(dsn, 3, proc)
    finally:  # stop as a supervisor (SIGTERM) or a person at a terminal (Ctrl-C) would
        stop_with = signal.SIGTERM if fault == "before_commit" else signal.SIGINT
        proc.send_signal(stop_with)
        _out, err = proc.communicate(timeout=120)
    # a clean stop either way: 0 after SIGTERM, the shell's 130 after Ctrl-C
    assert proc.returncode == (0 if stop_with == signal.SIGTERM else 130), err[-2000:]
    assert_no_process_left(tag)
    if fault == "after_commit":
        assert "batch 0: already committed, skipped" in err

    with psycopg.connect(dsn, autocommit=True) as conn:
        assert stored_rows(conn) == truth
        assert stored_rollups(conn) == truth_rollups(truth, 8)
        assert_rollups_exact(conn)
        marks = conn.execute(
            "SELECT batch_id, rows_in, accepted, duplicates, rejected "
            "FROM slidewin.ingest_batches ORDER BY batch_id"
        ).fetchall()
    assert marks == [(0, 51, 50, 1, 0), (1, 40, 30, 10, 0), (2, 30, 30, 0, 0)]
