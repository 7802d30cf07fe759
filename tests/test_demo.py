"""End to end: ``slidewin demo --duration 20`` with the real Spark ingest and the real scheduler.

Asserts that reports appear and the max tracker prints, that the rollups are exact at the end,
that the retention bounds hold (within one chunk per partition and one round of lag), and that
no process the demo started -- python children, the JVM, anything in their groups -- is left.
Needs Java 17+ (marked ``spark``) and takes a couple of minutes (``slow``); CI runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import psycopg
import pytest

from client.processes import slidewin_argv
from tests.invariants import assert_rollups_exact

PASSWORD = "Demo-pw-7731"
HISTORY_S = 6
MAX_ROWS = 20_000
RATE = 2000
CHUNK = 100
PARTITIONS = 8


def _with_password(dsn: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    return make_conninfo(**{**conninfo_to_dict(dsn), "password": PASSWORD})


def _children_of(pid: int) -> dict[int, float]:
    """Every descendant of ``pid``: {pid: start time}. psutil when present, else /proc."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - Linux fallback
        return _proc_children(pid)
    try:
        return {p.pid: p.create_time() for p in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return {}


def _proc_children(pid: int) -> dict[int, float]:
    parents: dict[int, list[int]] = {}
    starts: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry.name))
        starts[int(entry.name)] = float(fields[19])
    found, todo = {}, [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found[child] = starts[child]
            todo.append(child)
    return found


def _still_running(seen: dict[int, float]) -> list[int]:
    alive = []
    for pid, started in seen.items():
        now = _start_time(pid)
        if now is not None and abs(now - started) < 1e-3:  # same pid, same process
            alive.append(pid)
    return alive


def _start_time(pid: int) -> float | None:
    """The start time of ``pid`` if it still exists (and is not a zombie), else None."""
    try:
        import psutil
    except ImportError:  # pragma: no cover
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return None if fields[0] == "Z" else float(fields[19])
    try:
        proc = psutil.Process(pid)
        return None if proc.status() == psutil.STATUS_ZOMBIE else proc.create_time()
    except psutil.Error:
        return None


def _command_lines(pids: list[int]) -> dict[int, str]:
    """The command lines of ``pids`` as ``ps`` shows them to every user."""
    import psutil

    found = {}
    for pid in pids:
        try:
            found[pid] = " ".join(psutil.Process(pid).cmdline())
        except psutil.Error:
            continue
    return found


@pytest.mark.slow
@pytest.mark.spark
def test_demo_runs_everything_and_leaves_nothing_behind(make_store, tmp_path):
    # a password in the DSN (the test servers trust local connections, so any is accepted):
    # it must reach every child without showing on any command line
    dsn = _with_password(make_store(PARTITIONS))
    argv = slidewin_argv(
        "--data-dir", str(tmp_path), "demo", "--duration", "20", "--warmup", "3",
        "--displayinterval", "4", "--ratelimit", str(RATE), "--historyseconds", str(HISTORY_S),
        "--maxrows", str(MAX_ROWS), "--deletechunksize", str(CHUNK), "--seed", "1",
        "--view", "plain", "--json",
    )
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "SLIDEWIN_DSN": dsn})
    seen: dict[int, float] = {}
    command_lines: dict[int, str] = {}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            children = _children_of(proc.pid)
            seen.update(children)
            command_lines.update(_command_lines(list(children)))
            time.sleep(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        out, err = proc.communicate(timeout=900)
    finally:
        done.set()
        if proc.poll() is None:
            proc.kill()
    watcher.join(timeout=5)
    assert proc.returncode == 0, f"stdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}"

    # what the user sees: with --json, stdout is the summary's JSON object alone and the
    # reports, the max tracker and the summary's text are on stderr
    context = f"stdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}"
    assert err.count("Report:") >= 3, context
    assert "The initial maximum value for the dataset has been set to" in err, context
    assert "Final summary" in err and "Rows retained" in err
    assert len(out.strip().splitlines()) == 1, context
    summary = json.loads(out)
    assert summary["written"] > 10 * RATE and summary["failures"] == 0, summary
    assert summary["ingested"] > 0 and summary["freshness"]["events"] > 0, context

    # retention bounds, measured by the summary while the scheduler still ran
    parts = summary["partitions"]
    assert len(parts) == PARTITIONS
    assert max(p["oldest_age_s"] or 0 for p in parts) <= HISTORY_S + 2.0, parts
    lag_rows = RATE * 2 + CHUNK * PARTITIONS  # one ingest batch and one round of lag
    assert summary["retained"] <= MAX_ROWS + lag_rows, summary

    with psycopg.connect(dsn, autocommit=True) as conn:
        assert_rollups_exact(conn)

    # no child showed the password to `ps`: the ingest, the scheduler, the JVM, anything
    started = " | ".join(command_lines.values())
    assert " ingest " in started and " jobs run" in started and "java" in started, started
    leaked = [line for line in command_lines.values() if PASSWORD in line]
    assert not leaked, leaked

    # nothing left behind: every process seen under the demo is gone
    assert seen, "the demo started no child process?"
    assert _still_running(seen) == [], "processes left behind"
    assert not any((tmp_path / "demo").glob("*/landing")), "landing dir left behind"
