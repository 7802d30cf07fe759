"""``slidewin windows ... --follow`` against a live ``slidewin ingest``: both emit policies.

Three files land one after the other (grace 5 s; 10 s tumbling windows from T0):

    file 1   a@1  b@2              c@12                  newest 12 -> complete up to  7
    file 2             late d@8          e@16            newest 16 -> complete up to 11
    file 3                                         f@31  newest 31 -> complete up to 26
             [0 ............ 10)[10 .......... 20)[20..30)[30 .. 40)

``update`` prints [0,10) with 2 events, then again with 3 (d is late but within grace, so the
window changes and is re-emitted); ``final`` prints [0,10) once (3 events) after file 2 and
[10,20) once (2 events) after file 3 -- never an open window, never a window twice.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import T0
from tests.ingest_fixtures import event, write_jsonl

pytestmark = [pytest.mark.spark, pytest.mark.slow]
SLIDEWIN = str(Path(sys.executable).parent / "slidewin")
RANGE = ["--from", T0.isoformat(), "--to", (T0.replace(minute=1)).isoformat()]


class Lines:
    """A process's stdout lines, read by a thread so the test can wait with a timeout."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.seen, self._q = proc, [], queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._q.put(json.loads(line))

    def until(self, done: Callable[[list[dict]], bool], timeout_s: float = 120) -> list[dict]:
        deadline = time.monotonic() + timeout_s
        while not done(self.seen):
            try:
                self.seen.append(self._q.get(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"timed out; got {self.seen}") from None
        return self.seen


def summary(lines: list[dict]) -> list[tuple[str, int, bool]]:
    return [(w["start"][11:19], w["n"], w["final"]) for w in lines]


@pytest.fixture
def live(make_store, tmp_path):
    dsn = make_store(8)
    env = {**os.environ, "SLIDEWIN_DSN": dsn}
    (tmp_path / "landing").mkdir()
    procs = [subprocess.Popen(
        [SLIDEWIN, "--data-dir", str(tmp_path / "data"), "ingest", "--landing",
         str(tmp_path / "landing"), "--format", "json", "--processed", "keep", "--master",
         "local[1]", "--trigger", "300ms", "--grace", "5s", "--max-files-per-trigger", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]

    def follow(emit: str) -> Lines:
        proc = subprocess.Popen(
            [SLIDEWIN, "windows", "tumbling", "--size", "10s", *RANGE, "--follow", "--emit", emit,
             "--json"], env=env, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        return Lines(proc)

    yield tmp_path / "landing", follow, procs
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    for proc in procs:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_update_and_final_emission_follow_the_ingest(live):
    landing, follow, procs = live
    update, final = follow("update"), follow("final")
    write_jsonl(landing, "f1.jsonl", [event("a", 1, 1), event("b", 2, 2), event("c", 3, 12)])
    update.until(lambda s: len(s) >= 2)
    assert summary(update.seen) == [("12:00:00", 2, False), ("12:00:10", 1, False)]

    write_jsonl(landing, "f2.jsonl", [event("d", 4, 8), event("e", 5, 16)])
    update.until(lambda s: len(s) >= 4)
    # the late event within grace re-emits its window, now final (16 - 5 >= 10)
    assert summary(update.seen[2:]) == [("12:00:00", 3, True), ("12:00:10", 2, False)]
    final.until(lambda s: len(s) >= 1)
    assert summary(final.seen) == [("12:00:00", 3, True)]
    assert {w["emit"] for w in final.seen} == {"final"}

    write_jsonl(landing, "f3.jsonl", [event("f", 6, 31)])
    final.until(lambda s: len(s) >= 2)
    update.until(lambda s: len(s) >= 5)
    assert summary(final.seen) == [("12:00:00", 3, True), ("12:00:10", 2, True)]
    assert summary(update.seen[4:]) == [("12:00:30", 1, False)]

    for proc in procs[1:]:  # Ctrl-C ends a follower cleanly, with the shell's code for it
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
    # nothing more was emitted: each final window exactly once
    assert summary(final.seen) == [("12:00:00", 3, True), ("12:00:10", 2, True)]
