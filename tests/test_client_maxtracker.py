"""The max tracker prints the initial maximum, then each change -- up, and down when the window
slides past the old maximum or retention deletes it. Clock pinned.

    -40 s       -2 s      0  0.2  0.4   now = T0 + 0.5; window 30 s
     |           |        |   |    |
    9000        300          700   50    9000 is outside the window: initial max 300;
                                         700 arrives later; a delete before 0.3 leaves 50
"""

from __future__ import annotations

from datetime import timedelta

from slidewin.client.sim.maxtracker import MaxTracker, window_max
from slidewin.db import windows
from slidewin.db.events import Event, insert_events
from slidewin.db.retention import nibble
from tests.conftest import T0


def at(seconds: float):
    return T0 + timedelta(seconds=seconds)


def test_prints_nothing_on_an_empty_window(conn):
    lines: list[str] = []
    tracker = MaxTracker(conn, 30, clock=lambda: at(0.5), emit=lines.append)
    assert tracker.poll() is None and lines == []


def test_initial_then_changes(conn):
    lines: list[str] = []
    now = [at(0.5)]
    tracker = MaxTracker(conn, 30, clock=lambda: now[0], emit=lines.append)
    insert_events(conn, [Event("x", 9000, at(-40)), Event("a", 300, at(-2)),
                         Event("b", 50, at(0.4))], 8)
    tracker.poll()
    assert lines == ["The initial maximum value for the dataset has been set to 300."]
    tracker.poll()  # unchanged: silent
    insert_events(conn, [Event("c", 700, at(0.2))], 8)
    tracker.poll()
    assert lines[-1] == "The maximum value for the dataset has changed from 300 to 700."
    # retention deletes everything older than T0 + 0.3, the 700 too: the maximum goes down
    for part in range(8):
        nibble(conn, part, at(0.3), None, 100)
    tracker.poll()
    assert lines[-1] == "The maximum value for the dataset has changed from 700 to 50."
    assert len(lines) == 3 and tracker.changes == 3
    # the window slides past the 50 as well: nothing left, nothing printed
    now[0] = at(40)
    assert tracker.poll() is None and len(lines) == 3


def test_window_max_agrees_with_the_window_summary(conn):
    insert_events(conn, [Event(f"k{i}", (i * 7919) % 5000 - 2500, at(-i * 0.37))
                         for i in range(200)], 8)
    for seconds in (1, 5, 10, 30, 60):
        for now in (at(0.5), at(-10.2), at(-70)):
            assert window_max(conn, seconds, now) == windows.window_max(conn, seconds, now)
