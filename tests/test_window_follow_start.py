"""``--follow --emit final`` started late: the windows of its range that are final already
come first, then each new final window once -- for every time-window kind.

    events  a@1 b@2 c@12 d@16 e@25 f@33        10 s windows from T0
    watermark 20 when the follower starts:  [0,10) [10,20) final; [20,30) [30,40) open
    watermark 35 later:                     [20,30) becomes final, printed once
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from slidewin.db import window_follow, windows
from tests import store_fixtures
from tests.store_fixtures import at, put

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn
S = timedelta(seconds=1)


def watermark(conn, seconds: float) -> None:
    conn.execute(
        "INSERT INTO slidewin.stream_state (stream, newest_ts, grace, watermark) "
        "VALUES ('events', %s, '0 s', %s) ON CONFLICT (stream) DO UPDATE SET "
        "newest_ts = excluded.newest_ts, watermark = excluded.watermark",
        (at(seconds), at(seconds)))


KINDS = {
    "tumbling": (lambda c, s, e: windows.tumbling(c, 10 * S, s, e), 10 * S, lambda w: w.start),
    "hopping": (lambda c, s, e: windows.hopping(c, 10 * S, 5 * S, s, e), 10 * S,
                lambda w: w.start),
    "sliding": (lambda c, s, e: windows.sliding(c, 5 * S, s, e), 1 * S, lambda w: w.end),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_final_starts_with_the_windows_final_already(sconn, kind):
    series, settled, place = KINDS[kind]
    put(sconn, [(k, 1, at(t)) for k, t in zip("abcdef", (1, 2, 12, 16, 25, 33), strict=True)])
    watermark(sconn, 20)
    follower = window_follow.Follower(series, lambda _c: at(60), at(0), settled,
                                      window_follow.FINAL, place)
    first = [e.window for e in follower.poll(sconn)]
    already = [w for w in series(sconn, at(0), at(60)) if w.final]
    assert first == already and first, kind
    assert follower.poll(sconn) == []
    watermark(sconn, 35)
    later = [e.window for e in follower.poll(sconn)]
    now_final = [w for w in series(sconn, at(0), at(60)) if w.final]
    assert later == [w for w in now_final if place(w) not in {place(x) for x in first}], kind
    assert later and follower.poll(sconn) == []
