"""The one-pass window series (running sums, and min and max from blocks forwards and backwards)
equal a brute force that aggregates each window on its own from the raw rows -- for random sizes
and advances (seconds to hours, so every rollup grain and the coarse pieces between window
boundaries take part), random ranges, and after random deletes, nibbles and updates that take
extremes away.

Built-in stream: hopping, tumbling, sliding, the windows holding a time, count windows, and the
same for one key. Declared stream (a double measure with NaN, +-Infinity and missing values):
hopping, sliding and count windows, of the whole stream and of one key.
"""

from __future__ import annotations

import bisect
import decimal
import math
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from slidewin.db import key_windows, streams, windows
from slidewin.db.streams import Column
from tests import store_fixtures
from tests.conftest import clean_connection
from tests.store_fixtures import PARTS, put, rows_of

small_store_dsn = store_fixtures.small_store_dsn

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# events around an hour boundary, most within four minutes of it, a few hours either side
BASE = datetime(2026, 1, 1, 11, 58, 0, tzinfo=UTC)
SEC = timedelta(seconds=1)
KEYS = 6

Agg = tuple[int, Decimal | None, Any, Any]


def floor_to(ts: datetime, step_s: int) -> datetime:
    secs = (ts - EPOCH) // SEC
    return EPOCH + timedelta(seconds=secs - secs % step_s)


def agg(vals: Iterable[int]) -> Agg:
    got = list(vals)
    if not got:
        return 0, None, None, None
    return len(got), Decimal(sum(got)), min(got), max(got)


class Raw:
    """Raw rows sorted by time, each window aggregated on its own (bisect finds its rows)."""

    def __init__(self, rows: list[tuple[str, Any, datetime]]) -> None:
        self.rows = sorted(rows, key=lambda r: r[2])
        self.times = [r[2] for r in self.rows]

    def between(self, lo: datetime, hi: datetime) -> list[tuple[str, Any, datetime]]:
        return self.rows[bisect.bisect_left(self.times, lo):bisect.bisect_left(self.times, hi)]

    def starts(self, size: int, adv: int, start: datetime, end: datetime) -> list[datetime]:
        """Every start k * adv in [start, end)."""
        first = floor_to(start - timedelta(microseconds=1), adv) + timedelta(seconds=adv)
        out = []
        ws = first
        while ws < end:
            out.append(ws)
            ws += timedelta(seconds=adv)
        return out

    def hopping(self, size: int, adv: int, start: datetime, end: datetime, empty: bool = False):
        out = []
        for ws in self.starts(size, adv, start, end):
            we = ws + timedelta(seconds=size)
            a = agg(v for _, v, _ in self.between(ws, we))
            if empty or a[0]:
                out.append((ws, we, *a))
        return out

    def sliding(self, size: int, start: datetime, end: datetime):
        ends = sorted({t.replace(microsecond=0) for t in self.times
                       if start <= t.replace(microsecond=0) < end})
        span = timedelta(seconds=size)
        return [(t - span, t, *agg(v for _, v, _ in self.between(t - span, t + SEC)))
                for t in ends]


def got(found) -> list[tuple]:
    return [(w.start, w.end, w.n, w.total, w.vmin, w.vmax) for w in found]


events = st.lists(
    st.tuples(st.integers(0, KEYS - 1),  # key
              st.integers(-1000, 1000),  # value
              st.one_of(st.integers(0, 240_000),  # ms after BASE: the four minutes...
                        st.integers(-3 * 3600_000, 3 * 3600_000))),  # ... or hours either side
    min_size=1, max_size=100)
sizes = st.one_of(st.integers(1, 90), st.integers(91, 3 * 3600))
counts = st.tuples(st.integers(1, 25), st.integers(1, 25), st.integers(0, 50))
# range starts, in seconds after BASE: mostly at the four busy minutes, else anywhere
starts = st.one_of(st.integers(-400, 200), st.integers(-4 * 3600, 300))


def _spec(draw_size: int, adv_frac: float, span_s: int) -> tuple[int, int]:
    """An advance from 1 to size, never so small that the range holds more than 4000 windows."""
    adv = max(1, round(draw_size * adv_frac), -(-span_s // 4000))
    return draw_size, min(adv, draw_size)


@pytest.mark.slow
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(batches=st.lists(events, min_size=1, max_size=2), drop_every=st.integers(2, 6),
       nibble_s=st.integers(-4 * 3600, 240), size=sizes, adv_frac=st.floats(0, 1),
       lo_s=starts, span_s=st.integers(1, 6 * 3600),
       slide_lo=starts, slide_s=st.integers(1, 900),
       at_ms=st.one_of(st.integers(0, 240_000), st.integers(-3 * 3600_000, 3 * 3600_000)),
       cnt=counts, key=st.integers(0, KEYS - 1))
def test_builtin_series_equal_each_window_aggregated_alone(
    small_store_dsn, batches, drop_every, nibble_s, size, adv_frac, lo_s, span_s, slide_lo,
    slide_s, at_ms, cnt, key,
):
    with clean_connection(small_store_dsn) as conn:
        for batch in batches:  # each batch spans the whole timeline: out of order
            put(conn, [(f"k{k:04d}", v, BASE + timedelta(milliseconds=ms)) for k, v, ms in batch])
        conn.execute("DELETE FROM slidewin.events WHERE (hashtext(uuid || ts::text) %% %s) = 0",
                     (drop_every,))
        for part in range(PARTS):  # retention's delete too: windows become partial
            conn.execute("SELECT slidewin.nibble(%s, %s, NULL, 50)",
                         (part, BASE + timedelta(seconds=nibble_s)))
        raw = Raw([(u, v, t) for u, v, t in rows_of(conn)])
        start = BASE + timedelta(seconds=lo_s)
        end = start + timedelta(seconds=span_s)
        size, adv = _spec(size, adv_frac, span_s)
        s, a = timedelta(seconds=size), timedelta(seconds=adv)
        assert got(windows.hopping(conn, s, a, start, end)) == raw.hopping(size, adv, start, end)
        assert got(windows.tumbling(conn, s, start, end)) == raw.hopping(size, size, start,
                                                                          end)
        slide_start = BASE + timedelta(seconds=slide_lo)
        slide_end = slide_start + timedelta(seconds=slide_s)  # at most 900 windows
        assert got(windows.sliding(conn, s, slide_start, slide_end)) == raw.sliding(
            size, slide_start, slide_end)
        at = BASE + timedelta(milliseconds=at_ms)
        holding = windows.windows_at(conn, s, a, at)
        first = floor_to(at - s, adv) + a
        assert got(holding) == raw.hopping(size, adv, first, floor_to(at, adv) + SEC, True)
        # count windows over the newest events, in (ts, uuid) order
        csize, cadv, extra = cnt
        cadv = min(cadv, csize)
        newest = sorted(raw.rows, key=lambda r: (r[2], r[0]), reverse=True)[:csize + extra]
        want = []
        k = 0
        while k * cadv + csize <= csize + extra and k * cadv < len(newest):
            part = newest[k * cadv:k * cadv + csize]
            want.append((k + 1, part[-1][2], part[0][2], *agg(v for _, v, _ in part)))
            k += 1
        found = windows.count_windows(conn, csize, cadv, csize + extra)
        assert [(w.number, w.start, w.end, w.n, w.total, w.vmin, w.vmax) for w in found] == want
        # one key's windows: its events alone
        mine = Raw([r for r in raw.rows if r[0] == f"k{key:04d}"])
        k_name = f"k{key:04d}"
        assert got(key_windows.hopping(conn, k_name, s, a, start, end)) == mine.hopping(
            size, adv, start, end)
        assert got(key_windows.sliding(conn, k_name, s, slide_start,
                                       slide_end)) == mine.sliding(size, slide_start, slide_end)
        assert got(key_windows.windows_at(conn, k_name, s, a, at)) == mine.hopping(
            size, adv, first, floor_to(at, adv) + SEC, True)


# --- a declared stream: a double measure, with NaN, infinities and rows without a value -------

doubles = st.one_of(st.integers(-1000, 1000).map(lambda i: i / 8),
                    st.sampled_from([0.1, -0.3, 1e300, -1e300, 5e-324, math.nan, math.inf,
                                     -math.inf, None]))
stream_events = st.lists(
    st.tuples(st.integers(0, KEYS - 1), doubles,
              st.one_of(st.integers(0, 240_000), st.integers(-3 * 3600_000, 3 * 3600_000))),
    min_size=1, max_size=80)


def d_agg(vals: list[Decimal | None]) -> tuple[int, int, Decimal | None, Any, Any]:
    """rows, values, what sum() gives (NaN and infinities as PostgreSQL's), min, max"""
    decimal.getcontext().prec = 2000
    have = [v for v in vals if v is not None]
    ordered = [v for v in have if not v.is_nan()]
    if not have:
        total = None
    elif any(v.is_nan() for v in have) or {Decimal("Infinity"), Decimal("-Infinity")} <= set(
            have):
        total = Decimal("NaN")
    elif Decimal("Infinity") in have:
        total = Decimal("Infinity")
    elif Decimal("-Infinity") in have:
        total = Decimal("-Infinity")
    else:
        total = sum(have, Decimal(0))
    return (len(vals), len(have), total, min(ordered) if ordered else None,
            max(ordered) if ordered else None)


def same(a: tuple, b: tuple) -> bool:
    """Equal, NaN equal to NaN."""
    return all((isinstance(x, Decimal) and isinstance(y, Decimal) and x.is_nan() and y.is_nan())
               or x == y for x, y in zip(a, b, strict=True)) and len(a) == len(b)


def stream_rows(conn: psycopg.Connection) -> list[tuple[str, Decimal | None, datetime]]:
    conn.execute("SET extra_float_digits = 1")  # a double's shortest round-trip text
    return [(k, None if v is None else Decimal(v), t) for k, v, t in conn.execute(
        "SELECT k, v::text, ts FROM slidewin_streams.readings").fetchall()]


@pytest.mark.slow
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(batch=stream_events, drop_every=st.integers(2, 6), size=sizes, adv_frac=st.floats(0, 1),
       lo_s=starts, span_s=st.integers(1, 6 * 3600),
       slide_lo=starts, slide_s=st.integers(1, 900), cnt=counts,
       key=st.integers(0, KEYS - 1))
def test_declared_stream_series_equal_each_window_aggregated_alone(
    small_store_dsn, batch, drop_every, size, adv_frac, lo_s, span_s, slide_lo, slide_s, cnt,
    key,
):
    with clean_connection(small_store_dsn) as conn:
        streams.define(conn, "readings", key="k", time="ts", measures=["v"],
                       columns=[Column("k", "text"), Column("v", "double precision")])
        conn.cursor().executemany(
            "INSERT INTO slidewin_streams.readings (k, ts, v) VALUES (%s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            [(f"s{k}", BASE + timedelta(milliseconds=ms), v) for k, v, ms in batch])
        conn.execute("DELETE FROM slidewin_streams.readings "
                     "WHERE (hashtext(k || ts::text) %% %s) = 0", (drop_every,))
        conn.execute("UPDATE slidewin_streams.readings SET v = NULL "
                     "WHERE (hashtext(ts::text || k) %% %s) = 1", (drop_every + 1,))
        raw = Raw([(k, v, t) for k, v, t in stream_rows(conn)])
        start = BASE + timedelta(seconds=lo_s)
        end = start + timedelta(seconds=span_s)
        size, adv = _spec(size, adv_frac, span_s)
        s, a = timedelta(seconds=size), timedelta(seconds=adv)
        slide_start = BASE + timedelta(seconds=slide_lo)
        slide_end = slide_start + timedelta(seconds=slide_s)
        for who in (None, f"s{key}"):
            mine = raw if who is None else Raw([r for r in raw.rows if r[0] == who])
            found = streams.windows(conn, "readings", "hopping", size=s, advance=a, start=start,
                                    end=end, key=who)
            want = []
            for ws in mine.starts(size, adv, start, end):
                part = mine.between(ws, ws + s)
                if part:
                    want.append((ws, ws + s, *d_agg([v for _, v, _ in part])))
            assert len(found) == len(want)
            for w, x in zip(found, want, strict=True):
                assert same((w.window_start, w.window_end, w.n, w.cnt, w.total, w.vmin, w.vmax),
                            x), (w, x)
            found = streams.windows(conn, "readings", "sliding", size=s, start=slide_start,
                                    end=slide_end, key=who)
            ends = sorted({t.replace(microsecond=0) for t in mine.times
                           if slide_start <= t.replace(microsecond=0) < slide_end})
            assert [w.window_end for w in found] == ends
            for w in found:
                part = mine.between(w.window_end - s, w.window_end + SEC)
                assert same((w.n, w.cnt, w.total, w.vmin, w.vmax),
                            d_agg([v for _, v, _ in part])), w
            csize, cadv, extra = cnt
            cadv = min(cadv, csize)
            newest = sorted(mine.rows, key=lambda r: (r[2], r[0]),
                            reverse=True)[:csize + extra]
            found_c = streams.count_windows(conn, "readings", csize, cadv, csize + extra,
                                            key=who)
            want_c = []
            # every window that fits in the newest csize + extra events and holds one, as
            # slidewin.count_windows: a stream (or key) holding fewer gives shorter windows
            for k in range(extra // cadv + 1):
                part = newest[k * cadv:k * cadv + csize]
                if part:
                    want_c.append((k + 1, part[-1][2], part[0][2],
                                   *d_agg([v for _, v, _ in part])[1:]))
            assert len(found_c) == len(want_c)
            for w, x in zip(found_c, want_c, strict=True):
                assert same((w.number, w.start, w.end, w.n, w.total, w.vmin, w.vmax), x), (w, x)


def test_the_stream_table_is_dropped_between_examples(small_store_dsn):
    """clean_connection drops declared streams, so every example defines its own."""
    with clean_connection(small_store_dsn) as conn:
        assert conn.execute(sql.SQL("SELECT count(*) FROM slidewin.streams WHERE NOT builtin")
                            ).fetchone() == (0,)
