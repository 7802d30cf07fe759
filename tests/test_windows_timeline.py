"""Window boundaries on drawn timelines: epoch alignment, [start, end), sliding windows' inclusive
ends, grace and `final`, retention cutting a window (`partial`), late counts, Faust's lookups and
count-window ties. T0 = 2026-01-01 12:00:00 UTC; 3 partitions.

    t (s after T0)   0      7       9.999999  10      13       20
    events           a=1    b=2     c=3       d=4     e=5      f=6
    7 s windows (epoch-aligned: 1767268800 = 7 x 252466971 + 3, so they start at T0-3, T0+4,
    T0+11, T0+18):   [-3,4): a   [4,11): b c d   [11,18): e   [18,25): f
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from slidewin.db import windows
from slidewin.db.errors import ProcedureError
from tests import store_fixtures
from tests.store_fixtures import at, keys_in, put

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn

K = keys_in(0, 4, "t") + keys_in(1, 4, "t")
EVENTS = [(K[0], 1, at(0)), (K[4], 2, at(7)), (K[1], 3, at(9.999999)), (K[5], 4, at(10)),
          (K[2], 5, at(13)), (K[6], 6, at(20))]
S = timedelta(seconds=1)


def secs(n: float) -> timedelta:
    return timedelta(seconds=n)


@pytest.fixture
def timeline(sconn):
    put(sconn, EVENTS)
    return sconn


def watermark(conn, newest_s: float, grace_s: float) -> None:
    conn.execute("INSERT INTO slidewin.stream_state (stream, newest_ts, grace, watermark) "
                 "VALUES ('events', %s, %s, %s) ON CONFLICT (stream) DO UPDATE SET "
                 "newest_ts = excluded.newest_ts, grace = excluded.grace, "
                 "watermark = excluded.watermark",
                 (at(newest_s), secs(grace_s), at(newest_s - grace_s)))


def table(found):
    return [(round((w.start - at(0)).total_seconds()), w.n, int(w.total)) for w in found]


def test_windows_align_to_the_epoch_not_to_the_data(timeline):
    got = windows.tumbling(timeline, secs(7), at(-10), at(30))
    assert table(got) == [(-3, 1, 1), (4, 3, 9), (11, 1, 5), (18, 1, 6)]
    hop = windows.hopping(timeline, secs(10), secs(5), at(-10), at(30))
    assert table(hop) == [(-5, 1, 1), (0, 3, 6), (5, 4, 14), (10, 2, 9), (15, 1, 6), (20, 1, 6)]


def test_start_is_in_end_is_out(timeline):
    got = windows.tumbling(timeline, secs(10), at(0), at(30))
    # c at 9.999999 is the first window's; d at exactly 10 opens the next
    assert table(got) == [(0, 3, 6), (10, 2, 9), (20, 1, 6)]
    # the range selects windows by their start: [from, to)
    assert table(windows.tumbling(timeline, secs(10), at(10), at(20))) == [(10, 2, 9)]
    assert table(windows.tumbling(timeline, secs(10), at(0.5), at(20))) == [(10, 2, 9)]


def test_sliding_windows_include_both_ends(timeline):
    got = {round((w.end - at(0)).total_seconds()): (w.n, int(w.total))
           for w in windows.sliding(timeline, secs(3), at(0), at(30))}
    # ending at 10: seconds 7..10 -> b, c, d; ending at 13: 10..13 -> d, e (both ends in)
    assert got == {0: (1, 1), 7: (1, 2), 9: (2, 5), 10: (3, 9), 13: (2, 9), 20: (1, 6)}
    spans = {w.end - w.start for w in windows.sliding(timeline, secs(3), at(0), at(30))}
    assert spans == {secs(3)}


def test_final_is_end_at_or_before_newest_minus_grace(timeline):
    tumbling = lambda: {round((w.start - at(0)).total_seconds()): w.final  # noqa: E731
                        for w in windows.tumbling(timeline, secs(10), at(0), at(30))}
    assert tumbling() == {0: False, 10: False, 20: False}  # no ingest recorded: nothing final
    watermark(timeline, 15, 5)  # complete up to 10
    assert tumbling() == {0: True, 10: False, 20: False}
    watermark(timeline, 24.999999, 5)  # complete up to 19.999999: [10, 20) still open
    assert tumbling() == {0: True, 10: False, 20: False}
    watermark(timeline, 25, 5)
    assert tumbling() == {0: True, 10: True, 20: False}
    sliding = {round((w.end - at(0)).total_seconds()): w.final
               for w in windows.sliding(timeline, secs(3), at(0), at(30))}
    assert sliding[13] and not sliding[20]  # the second 20 ends at 21 > 20


def test_retention_cutting_a_window_makes_it_partial(timeline):
    assert not any(w.partial for w in windows.tumbling(timeline, secs(10), at(0), at(30)))
    # retention deletes everything before 8 s in partition 1 (b at 7)
    assert timeline.execute("SELECT slidewin.nibble(1, %s, NULL, 10)", (at(8),)).fetchone()[0] == 1
    got = {round((w.start - at(0)).total_seconds()): (w.n, w.partial)
           for w in windows.tumbling(timeline, secs(5), at(0), at(30))}
    assert got == {0: (1, True), 5: (1, True), 10: (2, False), 20: (1, False)}
    assert windows.status(timeline, at(0), at(30)).retired_through == at(7)


def test_late_events_are_counted_for_the_range_they_belong_to(timeline):
    for ts in (at(3), at(9.9), at(10)):
        timeline.execute("INSERT INTO slidewin.dead_letters (source, reason, raw, event_ts, "
                         "stream) VALUES ('f', 'late', 'x', %s, 'events')", (ts,))
    timeline.execute("INSERT INTO slidewin.dead_letters (source, reason, raw, event_ts, stream) "
                     "VALUES ('f', 'expired', 'x', %s, 'events')", (at(4),))
    # another stream's late events are that stream's, never the built-in one's
    timeline.execute("INSERT INTO slidewin.dead_letters (source, reason, raw, event_ts, stream) "
                     "VALUES ('g', 'late', 'x', %s, 'sensors')", (at(5),))
    assert windows.status(timeline, at(0), at(10)).late == 2
    assert windows.status(timeline, at(10), at(20)).late == 1
    assert windows.status(timeline, at(4), at(9)).late == 0


def test_lookups_every_window_holding_a_time(timeline):
    found = windows.windows_at(timeline, secs(10), secs(5), at(12))
    assert table(found) == [(5, 4, 14), (10, 2, 9)]
    assert windows.current(timeline, secs(10), secs(5), at(12)).start == at(10)
    assert windows.current(timeline, secs(10), secs(10), at(12), delta=secs(10)).start == at(0)
    empty = windows.windows_at(timeline, secs(10), secs(10), at(100))
    assert [(w.n, w.avg) for w in empty] == [(0, None)]


def test_count_windows_break_ties_by_uuid_and_stop_at_the_oldest_event(sconn):
    keys = sorted(keys_in(0, 3, "u") + keys_in(2, 3, "u"))
    put(sconn, [(k, i, at(5)) for i, k in enumerate(keys)])  # six events, one timestamp
    newest_two = windows.count_windows(sconn, 2)
    # (ts, uuid) order: the two largest uuids are the newest
    assert [int(w.total) for w in newest_two] == [4 + 5]
    assert [(w.number, w.n) for w in windows.count_windows(sconn, 4, 2, 10)] == [
        (1, 4), (2, 4), (3, 2)]  # fewer events than the windows ask: the oldest is short


BAD = [
    (lambda c: windows.tumbling(c, secs(1.5), at(0), at(1)), "size must be a whole number"),
    (lambda c: windows.tumbling(c, secs(0), at(0), at(1)), "size must be a whole number"),
    (lambda c: windows.hopping(c, secs(5), secs(10), at(0), at(1)),
     "advance 10s is larger than size 5s"),
    (lambda c: windows.tumbling(c, secs(10), at(5), at(0)), "to 2026-01-01 12:00:00+00 is before"),
    (lambda c: windows.count_windows(c, 10, 11), "advance must be from 1 to size (10)"),
]


@pytest.mark.parametrize(("call", "message"), BAD, ids=[m for _, m in BAD])
def test_bad_parameters_name_the_parameter_and_the_fix(timeline, call, message):
    with pytest.raises(ProcedureError, match=re.escape(message)) as e:
        call(timeline)
    assert "(" in str(e.value)  # the hint: what to do instead


@pytest.mark.slow
def test_buckets_align_to_the_epoch_before_it_too(sconn):
    """The ingest accepts times from 0001-01-01; their buckets must hold them and be aligned
    (some PostgreSQL releases' date_bin() is one stride early there, e.g. 16.2)."""
    bad = sconn.execute(
        "SELECT g, t, slidewin.grain_floor(t, g) FROM unnest(ARRAY[1, 7, 10, 60, 3600]) AS g, "
        "unnest(ARRAY['0001-01-01 00:00:00+00', '0001-01-01 00:00:07.5+00', "
        "'1969-12-31 23:59:50+00', '1969-12-31 23:59:59.5+00', '1970-01-01 00:00:00+00', "
        "'2026-01-01 12:00:09.999+00']::timestamptz[]) AS t "
        "WHERE slidewin.grain_floor(t, g) > t "
        "   OR slidewin.grain_floor(t, g) + make_interval(secs => g) <= t "
        "   OR mod(extract(epoch FROM slidewin.grain_floor(t, g)), g) <> 0"
    ).fetchall()
    assert bad == []
    put(sconn, [(K[0], 9, at(0).replace(year=1, month=1, day=1, hour=0))])  # 0001-01-01 00:00
    found = windows.tumbling(sconn, secs(3600), at(0).replace(year=1, month=1, day=1, hour=0),
                             at(0).replace(year=1, month=1, day=1, hour=1))
    assert [(w.n, int(w.total)) for w in found] == [(1, 9)]
