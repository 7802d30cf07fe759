"""Session windows equal a brute-force computation over the accepted events, and a session
reported final never changes.

Random keyed events arrive in batches (one transaction each, written in random chunks: the
sink's COPYs or psql's INSERTs), out of order, with duplicates of earlier events and replays of
whole earlier batches. The brute force keeps the set of events a definition has accepted: of
each batch's new (uuid, ts) pairs it rejects as late those older than the stream time before the
batch minus grace, and accepts the rest. Sessions are then simply each key's runs over the
accepted events split where two are more than the gap apart -- no incremental merging -- and
must equal what the store kept, with the late count never losing an event, whatever the chunks.
After every batch the sessions the store calls final are noted; each must still be there, the
same, at the end.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slidewin.db import sessions
from slidewin.db.events import Event, insert_events, partition_of
from slidewin.ingest import sessions as sink_sessions
from slidewin.ingest.batch import GOOD_SCHEMA
from slidewin.ingest.sink import insert_arrow_events
from tests import store_fixtures
from tests.conftest import clean_connection
from tests.store_fixtures import at

small_store_dsn = store_fixtures.small_store_dsn

# slow: its one test is a property search that runs for about 10 s
pytestmark = pytest.mark.slow

KEYS = ("a", "b", "c")
GAP_S = 10


def val_of(key: str, t: float) -> int:
    """The same (uuid, ts) always carries the same value, so a duplicate is a true duplicate."""
    return int(t * 4) % 37 - 18 + KEYS.index(key)


# a 2.5 s grid: events exactly one gap apart, and runs ending exactly at the close time, are common
events = st.tuples(st.sampled_from(KEYS), st.integers(0, 48).map(lambda q: q * 2.5))
batches = st.lists(
    st.one_of(
        st.lists(events, min_size=1, max_size=12).map(lambda b: ("new", b)),
        st.integers(0, 10).map(lambda i: ("replay", i)),
    ),
    min_size=1,
    max_size=10,
)


def _good(events: list[tuple[str, float]]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"part": partition_of(k, store_fixtures.PARTS), "uuid": k, "val": val_of(k, t),
          "ts": at(t), "copies": 1} for k, t in events],
        schema=GOOD_SCHEMA,
    )


def write_in_chunks(conn, batch: list[tuple[str, float]], cuts: list[int], sink: bool) -> None:
    """One transaction, the deduplicated batch cut into chunks at ``cuts`` (as Spark hands a
    batch over partition by partition), each written the sink's way or psql's."""
    unique = sorted(set(batch), key=lambda e: batch.index(e))
    bounds = sorted({0, len(unique), *(c % (len(unique) + 1) for c in cuts)})
    with conn.transaction():
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            chunk = unique[lo:hi]
            if sink:
                insert_arrow_events(conn, _good(chunk),
                                    session_refs=sink_sessions.definitions(conn))
            else:
                insert_events(conn, [Event(k, val_of(k, t), at(t)) for k, t in chunk],
                              store_fixtures.PARTS)


def runs(times: list[float]) -> list[list[float]]:
    out: list[list[float]] = []
    for t in sorted(times):
        if out and t - out[-1][-1] <= GAP_S:
            out[-1].append(t)
        else:
            out.append([t])
    return out


def brute_force(history: list[list[tuple[str, float]]], grace_s: float):
    stored: set[tuple[str, float]] = set()
    accepted: dict[str, set[float]] = defaultdict(set)
    stream: float | None = None
    late = 0
    for batch in history:
        new = {e for e in batch if e not in stored}
        stored |= new
        cut = None if stream is None else stream - grace_s
        for k, t in new:
            if cut is not None and t < cut:
                late += 1
            else:
                accepted[k].add(t)
                stream = t if stream is None else max(stream, t)
    expected = {}
    for k, times in accepted.items():
        for run in runs(list(times)):
            vals = [val_of(k, t) for t in run]
            expected[(k, run[0])] = (run[-1], len(run), Decimal(sum(vals)), min(vals), max(vals))
    return expected, late


def stored_sessions(conn) -> dict:
    return {
        (s.key, (s.start - at(0)).total_seconds()): (
            (s.end - at(0)).total_seconds(), s.n, s.total, s.vmin, s.vmax)
        for s in sessions.sessions(conn, None, limit=10_000)
    }


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(plan=batches, grace_s=st.sampled_from([0, 2.5, 5, 10]), sink=st.booleans(),
       cuts=st.lists(st.integers(0, 12), max_size=3))
def test_sessions_equal_the_brute_force(small_store_dsn, plan, grace_s: float, sink: bool,
                                        cuts: list[int]):
    """``sink``: chunks go the ingest sink's way -- COPYed whole with the islands computed in
    Python (``ingest.sessions``), or, when a row is stored already, through the staging path and
    the trigger -- instead of psql's (an INSERT, the trigger). ``cuts``: where each batch is cut
    into chunks within its transaction."""
    history: list[list[tuple[str, float]]] = []
    finals: dict = {}
    with clean_connection(small_store_dsn) as conn:
        sessions.define(
            conn, sessions.SessionDef("p", timedelta(seconds=GAP_S), timedelta(seconds=grace_s),
                                      timedelta(hours=1)))
        for kind, arg in plan:
            if kind == "replay":
                if not history:
                    continue
                batch = history[arg % len(history)]
            else:
                batch = list(arg)
            history.append(batch)
            write_in_chunks(conn, batch, cuts, sink)
            now = stored_sessions(conn)
            for s in sessions.closed(conn, "p", None, limit=10_000):
                key = (s.key, (s.start - at(0)).total_seconds())
                finals.setdefault(key, now[key])
        expected, late = brute_force(history, grace_s)
        got = stored_sessions(conn)
        assert got == expected
        assert {k: got.get(k) for k in finals} == finals  # final meant final
        assert sessions.stats(conn).late == late
        letters = conn.execute(
            "SELECT count(*) FROM slidewin.dead_letters WHERE source = 'session:p'").fetchone()
        assert letters == (late,)
