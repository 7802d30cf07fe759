"""Session windows equal a brute-force computation over the accepted events.

Random keyed events arrive in batches (one transaction each), out of order, with duplicates of
earlier events and replays of whole earlier batches. The brute force keeps the set of events a
definition has accepted: for each batch it takes the new (uuid, ts) pairs, groups each key's
accepted and new events into runs split where two are more than the gap apart, and rejects the
new events of a run that ends before the close time (stream time before the batch - gap -
grace). Sessions are then simply each key's runs over the accepted events -- no incremental
merging -- and must equal what the store kept, with the late count and the merges' tombstones
never losing an event.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from decimal import Decimal

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from db import sessions
from db.events import partition_of
from ingest import sessions as sink_sessions
from ingest.batch import GOOD_SCHEMA
from ingest.sink import insert_arrow_events
from tests import store_fixtures
from tests.conftest import clean_connection
from tests.store_fixtures import at, put

small_store_dsn = store_fixtures.small_store_dsn

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


def copy_like_the_sink(conn, batch: list[tuple[str, float]]) -> None:
    unique = sorted(set(batch))  # the batch deduplicated, as Spark hands it over
    good = pa.Table.from_pylist(
        [{"part": partition_of(k, store_fixtures.PARTS), "uuid": k, "val": val_of(k, t),
          "ts": at(t), "copies": 1} for k, t in unique],
        schema=GOOD_SCHEMA,
    )
    with conn.transaction():
        insert_arrow_events(conn, good, session_refs=sink_sessions.definitions(conn))


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
        close = None if stream is None else stream - GAP_S - grace_s
        by_key: dict[str, set[float]] = defaultdict(set)
        for k, t in new:
            by_key[k].add(t)
        for k, fresh in by_key.items():
            for run in runs(list(accepted[k] | fresh)):
                mine = fresh.intersection(run)
                if close is not None and run[-1] < close:
                    late += len(mine)
                else:
                    accepted[k] |= mine
        if new:
            newest = max(t for _, t in new)
            stream = newest if stream is None else max(stream, newest)
    expected = {}
    for k, times in accepted.items():
        for run in runs(list(times)):
            vals = [val_of(k, t) for t in run]
            expected[(k, run[0])] = (run[-1], len(run), Decimal(sum(vals)), min(vals), max(vals))
    return expected, late


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(plan=batches, grace_s=st.sampled_from([0, 2.5, 5, 10]), sink=st.booleans())
def test_sessions_equal_the_brute_force(small_store_dsn, plan, grace_s: float, sink: bool):
    """``sink``: batches go the ingest sink's way -- COPYed whole with the islands computed in
    Python (``ingest.sessions``), or, when a row is stored already, through the staging path and
    the trigger -- instead of psql's (an INSERT, the trigger)."""
    history: list[list[tuple[str, float]]] = []
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
            if sink:
                copy_like_the_sink(conn, batch)
            else:
                put(conn, [(k, val_of(k, t), at(t)) for k, t in batch])
        expected, late = brute_force(history, grace_s)
        got = {
            (s.key, (s.start - at(0)).total_seconds()): (
                (s.end - at(0)).total_seconds(), s.n, s.total, s.vmin, s.vmax)
            for s in sessions.sessions(conn, None, limit=10_000)
        }
        assert got == expected
        assert sessions.stats(conn).late == late
        letters = conn.execute(
            "SELECT count(*) FROM slidewin.dead_letters WHERE source = 'session:p'").fetchone()
        assert letters == (late,)
