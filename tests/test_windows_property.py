"""Every window kind equals a brute-force answer computed in Python from the raw rows, after
random inserts (out of order, across hour boundaries, so every rollup grain is read), deletes of
random rows (which take away extremes) and nibbles.

The brute force reads ``slidewin.events`` as it is after the writes; the windows read only the
rollups (and, for count windows, the newest rows), so any drift between the two fails here.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slidewin.db import windows
from tests import store_fixtures
from tests.store_fixtures import PARTS, Row, put, rows_of

small_store_dsn = store_fixtures.small_store_dsn

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# just before an hour boundary: the events straddle it, so hours, minutes, 10 s and seconds
# all take part in the answers
BASE = datetime(2026, 1, 1, 11, 58, 0, tzinfo=UTC)
SPAN_S = 4 * 60

Agg = tuple[int, Decimal | None, int | None, int | None]


def agg(vals: Iterable[int]) -> Agg:
    got = list(vals)
    if not got:
        return 0, None, None, None
    return len(got), Decimal(sum(got)), min(got), max(got)


def second_of(ts: datetime) -> datetime:
    return ts.replace(microsecond=0)


def floor_to(ts: datetime, step_s: int) -> datetime:
    secs = (ts - EPOCH) // timedelta(seconds=1)
    return EPOCH + timedelta(seconds=secs - secs % step_s)


def brute_hopping(rows: list[Row], size: int, adv: int, start: datetime, end: datetime):
    found = {}
    for _, _, ts in rows:
        first = floor_to(ts, adv)
        ws = first
        while ws > ts - timedelta(seconds=size):
            if start <= ws < end:
                found[ws] = None
            ws -= timedelta(seconds=adv)
    out = []
    for ws in sorted(found):
        we = ws + timedelta(seconds=size)
        out.append((ws, we, *agg(v for _, v, t in rows if ws <= t < we)))
    return out


def brute_sliding(rows: list[Row], size: int, start: datetime, end: datetime):
    ends = sorted({second_of(t) for _, _, t in rows if start <= second_of(t) < end})
    span = timedelta(seconds=size)
    return [(t - span, t, *agg(v for _, v, ts in rows if t - span <= second_of(ts) <= t))
            for t in ends]


def brute_count(rows: list[Row], size: int, adv: int, last: int):
    newest = sorted(rows, key=lambda r: (r[2], r[0]), reverse=True)[:last]
    out = []
    k = 0
    while k * adv + size <= last and k * adv < len(newest):
        part = newest[k * adv:k * adv + size]
        ts = [t for _, _, t in part]
        out.append((k + 1, min(ts), max(ts), *agg(v for _, v, _ in part)))
        k += 1
    return out


def got_windows(found: list[windows.Window]):
    return [(w.start, w.end, w.n, w.total, w.vmin, w.vmax) for w in found]


events = st.lists(
    st.tuples(
        st.integers(0, 40),  # key number
        st.integers(-1000, 1000),  # value
        st.integers(0, SPAN_S * 1000),  # ms after BASE
    ),
    min_size=1,
    max_size=120,
)
sizes = st.sampled_from([(1, 1), (3, 1), (7, 7), (10, 5), (10, 10), (30, 10), (60, 20),
                         (60, 60), (90, 30), (120, 60), (3600, 600), (3600, 3600)])


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    batches=st.lists(events, min_size=1, max_size=3),
    drop_every=st.integers(2, 7),
    nibble_s=st.integers(0, SPAN_S),
    spec=sizes,
    range_s=st.tuples(st.integers(-120, SPAN_S), st.integers(1, SPAN_S + 120)),
    counts=st.tuples(st.integers(1, 30), st.integers(1, 30), st.integers(0, 60)),
    at_s=st.integers(0, SPAN_S * 1000),
)
def test_every_window_kind_equals_brute_force(
    small_store_dsn, batches, drop_every, nibble_s, spec, range_s, counts, at_s
):
    with store_fixtures.clean_connection(small_store_dsn) as conn:
        _write(conn, batches, drop_every, nibble_s)
        rows = rows_of(conn)
        _check(conn, rows, spec, range_s, counts, at_s)


def _write(conn: psycopg.Connection, batches, drop_every: int, nibble_s: int) -> None:
    for batch in batches:  # batches arrive out of order: each spans the whole timeline
        put(conn, [(f"k{k:04d}", v, BASE + timedelta(milliseconds=ms)) for k, v, ms in batch])
    # take away random rows (extremes among them) through a plain DELETE ...
    conn.execute("DELETE FROM slidewin.events WHERE (hashtext(uuid || ts::text) %% %s) = 0",
                 (drop_every,))
    # ... and retention's own delete, oldest first, in every partition
    cutoff = BASE + timedelta(seconds=nibble_s)
    for part in range(PARTS):
        conn.execute("SELECT slidewin.nibble(%s, %s, NULL, 50)", (part, cutoff))


def _check(conn, rows: list[Row], spec, range_s, counts, at_s) -> None:
    size, adv = spec
    start = BASE + timedelta(seconds=min(range_s[0], range_s[1] - 1))
    end = start + timedelta(seconds=range_s[1])
    s, a = timedelta(seconds=size), timedelta(seconds=adv)
    assert got_windows(windows.hopping(conn, s, a, start, end)) == brute_hopping(
        rows, size, adv, start, end)
    assert got_windows(windows.tumbling(conn, s, start, end)) == brute_hopping(
        rows, size, size, start, end)
    assert got_windows(windows.sliding(conn, s, start, end)) == brute_sliding(
        rows, size, start, end)
    # any range of whole seconds, read from the coarsest grains that fit
    summary = windows.summary(conn, range_s[1], end)
    lo = second_of(end) - timedelta(seconds=range_s[1] - 1)
    want = agg(v for _, v, t in rows if lo <= t < second_of(end) + timedelta(seconds=1))
    assert (summary.n, summary.total, summary.vmin, summary.vmax) == want
    # Faust's lookups: every window holding a time
    at = BASE + timedelta(milliseconds=at_s)
    holding = [w for w in windows.windows_at(conn, s, a, at)]
    assert [w.start for w in holding] == [
        floor_to(at, adv) - k * a for k in reversed(range(-(-size // adv)))
        if floor_to(at, adv) - k * a > at - s
    ]
    for w in holding:
        assert (w.n, w.total, w.vmin, w.vmax) == agg(v for _, v, t in rows if w.start <= t < w.end)
    # count windows over the newest events
    csize, cadv, extra = counts
    cadv = min(cadv, csize)
    got = windows.count_windows(conn, csize, cadv, csize + extra)
    assert [(w.number, w.start, w.end, w.n, w.total, w.vmin, w.vmax) for w in got] == \
        brute_count(rows, csize, cadv, csize + extra)
