"""The ingest keeps session windows in each batch's own transaction: through the sink's COPY
(with Spark's partials or the triggers), its staging path for rows already stored, a replayed
batch (skipped) and a batch that rolls back (no session changes). No Spark: batches are Arrow
tables, as in tests/test_ingest_sink.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from slidewin.db import sessions
from slidewin.ingest.batch import partials
from slidewin.ingest.sink import PRECOMPUTED, Partials, PartialsMismatch, write_batch
from tests.conftest import T0
from tests.ingest_fixtures import clean_ingest_state
from tests.test_ingest_sink import rows, with_partials, write

S = timedelta(seconds=1)


@pytest.fixture
def iconn(conn):
    c = clean_ingest_state(conn)
    sessions.define(c, sessions.SessionDef("visits", 10 * S, 10 * S, timedelta(hours=1)))
    return c


def spans(conn):
    return [
        (s.key, (s.start - T0) / S, (s.end - T0) / S, s.n, int(s.total))
        for s in sessions.sessions(conn, None)
    ]


def test_sessions_follow_every_path_of_the_sink_exactly_once(iconn):
    # batch 0, Spark's partials (trigger aside for the rollups, not for the sessions)
    res = write_batch(iconn, "q/text", "q", 0,
                      with_partials(rows([("a", 1, 0, 1), ("a", 2, 5, 1), ("b", 3, 1, 1)])))
    assert res.path == PRECOMPUTED
    assert spans(iconn) == [("a", 0, 5, 2, 3), ("b", 1, 1, 1, 3)]
    # the same batch replayed after a crash: skipped, nothing counts twice
    assert write_batch(iconn, "q/text", "q", 0,
                       with_partials(rows([("a", 1, 0, 1), ("a", 2, 5, 1)]))).skipped
    # batch 1 holds a stored row (staging path) and a new one that bridges nothing yet
    res = write(iconn, 1, rows([("a", 2, 5, 1), ("a", 4, 14, 1)]))
    assert res.path == "staging" and res.accepted == 1
    assert spans(iconn) == [("a", 0, 14, 3, 7), ("b", 1, 1, 1, 3)]
    # batch 2, an in-batch duplicate (copies 2): inserted once; 9 is within grace of 14
    write(iconn, 2, rows([("b", 6, 9, 2)]))
    assert spans(iconn) == [("a", 0, 14, 3, 7), ("b", 1, 9, 2, 9)]


def test_a_batch_that_rolls_back_changes_no_session(iconn):
    """The session trigger runs during the COPY; the partials' check fails after it, and the
    whole batch -- sessions included -- rolls back."""
    write(iconn, 0, rows([("a", 1, 0, 1)]))
    before = spans(iconn)

    def compute(_newest):
        yield replace(rows([("a", 1, 3, 1), ("c", 1, 4, 1)]), pid=0)
        yield Partials(lambda: partials(rows([("a", 2, 3, 1), ("c", 1, 4, 1)]).good, 0))

    with pytest.raises(PartialsMismatch):
        write_batch(iconn, "q/text", "q", 1, compute)
    assert spans(iconn) == before
    assert sessions.stats(iconn).stream_ts == T0


def test_the_sink_merges_in_bounded_calls_and_records_what_sessions_cost(iconn):
    many = rows([(f"k{i:05d}", 1, i / 1000, 1) for i in range(25_000)])
    res = write(iconn, 0, many)
    assert res.accepted == 25_000 and res.session_s > 0
    assert iconn.execute("SELECT version FROM slidewin.session_defs").fetchone() == (2,)
    spent = sessions.cost(iconn)
    assert spent.batches == 1 and 0 < spent.session_s <= spent.batch_s
    recorded = iconn.execute("SELECT seconds, session_seconds FROM slidewin.ingest_batches")
    [(seconds, session_seconds)] = recorded.fetchall()
    assert session_seconds == pytest.approx(res.session_s) and seconds >= session_seconds


def test_a_sessions_sum_below_the_smallest_bigint_is_exact(iconn):
    """The sink sums a chunk's islands in int64 when no sum can overflow: -2**63 - 1 cannot be
    one, so it is summed exactly (the trigger's numeric sum gives the same) -- and not wrapped
    round to 2**63 - 1."""
    low = -(2**63)
    write(iconn, 0, rows([("a", low, 0, 1), ("a", -1, 1, 1)]))
    assert spans(iconn) == [("a", 0, 1, 2, low - 1)]
    write(iconn, 1, rows([("b", low, 0, 1), ("b", low, 1, 1), ("c", 1, 0, 1)]))
    assert spans(iconn)[1:] == [("b", 0, 1, 2, 2 * low), ("c", 0, 0, 1, 1)]
