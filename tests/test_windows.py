"""Window queries over the rollups: bounds, stream time, empty windows, late events, nibbles.

A window of N seconds ending at ``now`` is the N whole seconds ending with the second ``now``
falls in: [trunc(now) - (N-1) s, trunc(now) + 1 s). The events below, drawn on a timeline
(one column per second; the fraction is where in its second an event falls):

    second:   T0-4    T0-3    T0-2          T0-1    T0        T0+1
    p0        a=10            c=30@.1                g=70@.999999
                              d=50@.9
    p1                b=20@.5               f=40
    p2                        e=-5@.9
                                                     ^ stream time = T0

    1 s at T0+0.5      [------]                              -> g           avg 70
    2 s at T0          [--------------]                      -> f g          avg 55
    3 s at T0   [----------------------------]               -> c d e f g    avg 37
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from slidewin.db import retention, windows
from tests import store_fixtures
from tests.store_fixtures import at, keys_in, put

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn

P0, P1, P2 = keys_in(0, 5, "w"), keys_in(1, 5, "w"), keys_in(2, 5, "w")
EVENTS = {
    "a": (P0[0], 10, at(-4)),
    "b": (P1[0], 20, at(-3 + 0.5)),
    "c": (P0[1], 30, at(-2 + 0.1)),
    "d": (P0[2], 50, at(-2 + 0.9)),
    "e": (P2[0], -5, at(-2 + 0.9)),
    "f": (P1[1], 40, at(-1)),
    "g": (P0[3], 70, at(0.999999)),
}


def expect(names: str) -> tuple[int, float | None, int | None]:
    """(n, avg, max) of the named events, computed from the table above."""
    picked = [EVENTS[x][1] for x in names]
    if not picked:
        return 0, None, None
    return len(picked), sum(picked) / len(picked), max(picked)


WINDOW_CASES = [
    # seconds, now,            events in the window
    (1, at(0.5), "g"),  # the current second only
    (1, at(0), "g"),  # now at the start of its second still covers all of it
    (1, at(0.999999), "g"),
    (2, at(0.5), "fg"),
    (3, at(0), "cdefg"),  # two events with one timestamp, in two partitions
    (5, at(0), "abcdefg"),
    (60, at(0), "abcdefg"),  # longer than the data
    (1, at(-0.000001), "f"),  # a microsecond earlier: the previous second
    (2, at(-3 + 0.2), "ab"),
    (1, at(-2.5), "b"),
    (1, at(1), ""),  # after the data
    (3, at(-5), ""),  # before the data
]


@pytest.fixture
def timeline(sconn):
    put(sconn, EVENTS.values())
    return sconn


@pytest.mark.parametrize(("seconds", "now", "names"), WINDOW_CASES,
                         ids=[f"{s}s@{n:%S.%f}->{e or 'empty'}" for s, n, e in WINDOW_CASES])
def test_window_bounds(timeline, seconds, now, names):
    n, avg, vmax = expect(names)
    got = windows.summary(timeline, seconds, now)
    assert (got.n, got.vmax) == (n, vmax)
    assert got.avg == pytest.approx(avg) if avg is not None else got.avg is None
    assert windows.window_avg(timeline, seconds, now) == got.avg
    assert windows.window_max(timeline, seconds, now) == vmax


def test_relative_to_stream_time(timeline):
    stream = windows.stream_time(timeline)
    assert stream == at(0)  # the newest second holding events
    assert windows.summary(timeline, 2, stream).n == 2  # f, g
    assert windows.window_avg(timeline, 2, stream) == pytest.approx(55.0)
    # the same windows relative to the wall clock: the pinned data is long gone
    assert windows.summary(timeline, 60, datetime.now(UTC)).n == 0
    assert timeline.execute("SELECT slidewin.window_avg(60)").fetchone() == (None,)
    stream_sql = "SELECT slidewin.window_avg(2, slidewin.stream_time())"
    assert timeline.execute(stream_sql).fetchone()[0] == pytest.approx(55.0)


def test_empty_window_is_null_not_zero(sconn):
    # no events at all: stream time is NULL, and so is every aggregate
    assert windows.stream_time(sconn) is None
    got = windows.summary(sconn, 5, windows.stream_time(sconn))
    assert (got.n, got.total, got.vmin, got.vmax, got.avg) == (0, None, None, None, None)
    assert sconn.execute("SELECT * FROM slidewin.window_summary(5, NULL)").fetchone() == (
        0, None, None, None, None)


def test_late_event_into_a_past_second_changes_the_answer(timeline):
    before_2s = windows.summary(timeline, 2, at(0))
    late = (P2[1], 1000, at(-3 + 0.25))  # arrives last, belongs to T0-3
    put(timeline, [late])
    assert windows.stream_time(timeline) == at(0)  # stream time does not move back
    assert windows.summary(timeline, 2, at(0)) == before_2s  # T0-3 is outside 2 s
    n, _avg, _max = expect("abcdefg")
    got = windows.summary(timeline, 5, at(0))
    assert (got.n, got.vmax) == (n + 1, 1000)
    assert got.total == Decimal(215 + 1000)


def test_window_after_nibbles_and_a_manual_delete(timeline):
    # p0 loses a, c, d (older than T0-1); the window shrinks to b e f g
    assert retention.delete_after_date(timeline, 0, at(-1), 100) == 3
    got = windows.summary(timeline, 5, at(0))
    assert (got.n, got.total, got.vmin, got.vmax) == (4, Decimal(20 - 5 + 40 + 70), -5, 70)
    # the window's max (g = 70) goes: the max falls back to f = 40, from the rollups
    assert retention.delete_oldest_to_target(timeline, 0, 0, 1) == 1
    assert windows.window_max(timeline, 5, at(0)) == 40
    # a psql user deletes the minimum by hand: the min is recomputed too
    timeline.execute("DELETE FROM slidewin.events WHERE val = -5")
    got = windows.summary(timeline, 5, at(0))
    assert (got.n, got.vmin, got.vmax, got.avg) == (2, 20, 40, pytest.approx(30.0))


def test_the_sql_printed_for_psql_answers_like_the_functions(sconn):
    # now() is fixed for a transaction, so the wall-clock window can be pinned from inside one
    with sconn.transaction(force_rollback=True):
        sconn.execute(
            "INSERT INTO slidewin.events (part, uuid, val, ts) "
            "SELECT slidewin.partition_of(k), k, v, now() - s * interval '1 second' "
            "FROM (VALUES ('q0001', 10, 0), ('q0002', 20, 2), ('q0003', 90, 40)) AS x(k, v, s)")
        answers = []
        for statement in _statements(windows.sql_for_psql(30)):
            answers.append(sconn.execute(statement).fetchone())
    avg_now, avg_stream, max_now, summary, by_hand = answers
    assert avg_now == avg_stream == (15.0,)  # the row 40 s ago is outside the 30 s window
    assert max_now == (20,)
    assert summary == (2, Decimal(30), 10, 20, 15.0)
    assert by_hand == (Decimal(15),)


def _statements(script: str) -> list[str]:
    code = "\n".join(line for line in script.splitlines() if not line.startswith("--"))
    return [s.strip() for s in code.split(";") if s.strip()]
