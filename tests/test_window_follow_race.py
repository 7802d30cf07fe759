"""A batch that commits while the follower reads: every window is still emitted final once.

The follower reads the watermark and the window series in two statements. A commit between
them moves the watermark. Read after the series, the moved watermark would let the follower
forget a window it last read as open, so ``--emit final`` never showed it; read before, a
commit in between can only make more of the windows read final.

    tumbling 10 s:   [0,10) [10,20) [20,30) [30,40)
    watermark:        5 -> commit -> 15 -> commit -> 25 -> ...  (one commit after each read)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from slidewin.db.window_follow import FINAL, Follower
from slidewin.db.windows import Window

BASE = datetime(2026, 1, 1, tzinfo=UTC)
SIZE = timedelta(seconds=10)


class CommitAfterEachRead:
    """A series of four 10 s windows over a watermark that a batch moves on by 10 s right after
    each read of the series -- the commit landing between the follower's two reads."""

    def __init__(self) -> None:
        self.watermark = BASE + timedelta(seconds=5)

    def series(self, _conn: object, start: datetime, end: datetime) -> list[Window]:
        seen = self.watermark
        out = [Window(BASE + i * SIZE, BASE + (i + 1) * SIZE, 1, Decimal(1), 1, 1, 1.0,
                      BASE + (i + 1) * SIZE <= seen, False)
               for i in range(4) if start <= BASE + i * SIZE < end]
        self.watermark += SIZE  # the commit between the follower's two reads
        return out

    def read_watermark(self, _conn: object) -> datetime:
        return self.watermark


def test_a_commit_between_the_followers_reads_skips_no_final_window() -> None:
    feed = CommitAfterEachRead()
    follower = Follower(series=feed.series, reference=lambda _c: BASE + 4 * SIZE, start=BASE,
                        settled=SIZE, emit=FINAL, watermark=feed.read_watermark)
    shown: list[datetime] = []
    for _ in range(8):
        shown += [e.window.start for e in follower.poll(None)]  # type: ignore[arg-type]
    assert shown == [BASE + i * SIZE for i in range(4)]  # each window once, none skipped
