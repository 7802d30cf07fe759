"""Two streams holding the same data give the same answers: the built-in ``events`` and
``twin``, a declared stream of the same shape with its own names (key ``who``, measure
``amount``, time ``at_ts``) and its own partition count.

Random batches -- keys from a small pool, times across an hour boundary, out of order and behind
the watermark, (key, time) pairs stored again with other values, values from the whole bigint
range -- are written to both through their ingest sinks (``ingest.sink.write_batch`` for events,
``ingest.typed_sink.write_stream_batch`` for twin: their COPY paths, staging on a conflict, the
stream time, the joins' watermark), and a side stream ``tags`` is fed between them. Retention
runs with the same history and the same row limit (``--max-rows``: the events' policy, the
twin's own), through the retention job's own calls, caught up. Then, at a pinned now,
everything a user asks of a stream (``client.answers``: what the CLI and ``serve`` call, which
dispatch to ``db.windows`` / ``db.key_windows`` or ``db.streams``) must be the same for both,
refusals included: time windows of every kind, of every key and of each key alone, with their
completeness; count windows, of every key and of each key alone; Faust's lookups; the ``query``
figures; a session window defined alike on each; and a join of each with ``tags`` -- whose
results, once its watermark has passed every record, are also ``slidewin.join_exact``'s.

What the test leaves out, and why:

- The parsers' rules (late, expired, future, bad values) are not run: the events' run in Spark,
  the declared streams' in ``ingest.typed``/``typed_spark``, and their own tests cover them.
  A row behind the watermark is therefore stored, on both sides alike.

The row limit is drawn over a one-partition events store (the twin keeps its two partitions):
the events' policy splits a store-wide row limit into per-partition targets from the rollups
(``slidewin.retention_targets``, ``--split global``), which keep the newest rows to within one
second -- of the boundary second each partition keeps a share in proportion to its rows there --
while a declared stream's row limit is one ordered delete over all its partitions, exact to the
row. With one partition the events' targets are exact too, and both keep the same rows. The
three-partition store is kept by history alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slidewin.client.answers import windows as answers
from slidewin.db import clock, joins, key_windows, sessions, streams
from slidewin.db.errors import ConfigError, ProcedureError
from slidewin.db.events import partition_of
from slidewin.db.retention_settings import RetentionSettings, upsert_settings
from slidewin.db.streams import Column
from slidewin.ingest.batch import GOOD_SCHEMA, dedup
from slidewin.ingest.sink import BatchRows, write_batch
from slidewin.ingest.typed import Layout, Parsed
from slidewin.ingest.typed_sink import write_stream_batch
from slidewin.jobs.config import RetentionPolicy
from slidewin.jobs.retention import (
    expire_sessions,
    nibble_streams,
    run_until_caught_up,
    tick_joins,
)
from tests import store_fixtures

small_store_dsn = store_fixtures.small_store_dsn

# slow: a property search over a few dozen stores, about 15 s
pytestmark = pytest.mark.slow

EV, TW = "events", "twin"
KEYS = ("k0001", "k0002", "k0003", "k0004")
# just before an hour boundary: events' windows read hours, 10 s, minutes and seconds of its
# rollups, the twin's minutes and seconds
BASE = datetime(2026, 1, 1, 11, 58, 0, tzinfo=UTC)
SPAN_S = 240
NOW = BASE + timedelta(seconds=SPAN_S + 30)  # the pinned clock: retention, `query`, the ingest
S = timedelta(seconds=1)
# the twin's names for the columns of events
RENAMED = {"uuid": "who", "val": "amount", "ts": "at_ts"}

Row = tuple[str, int, datetime]
# the dead letters Spark hands the sink with the rows (none here)
NO_DEAD_LETTERS = pa.schema([("source", pa.string()), ("reason", pa.string()),
                             ("detail", pa.string()), ("raw", pa.string())]).empty_table()


def at_ms(ms: int) -> datetime:
    return BASE + timedelta(milliseconds=ms)


# -- the data -----------------------------------------------------------------------------------

# times on whole seconds, a minute and the hour are common, so (key, time) pairs repeat
times = st.one_of(st.integers(0, SPAN_S * 1000),
                  st.sampled_from([0, 999, 1000, 59_999, 60_000, 120_000, 150_500]))
values = st.one_of(st.integers(-1000, 1000), st.integers(-(2**63), 2**63 - 1))
rows = st.tuples(st.sampled_from(KEYS), values, times)
batch = st.fixed_dictionaries({
    "rows": st.lists(rows, max_size=15),
    # copies: indices into the rows so far, sent again (in this batch: a copy of one of its own)
    "copies": st.lists(st.integers(0, 200), max_size=4),
    "tags": st.lists(st.tuples(st.sampled_from(KEYS), times), max_size=5),
    "nibble": st.booleans(),  # retention runs after this batch
})


# -- writing: each stream through its ingest sink -----------------------------------------------


def write_events(conn: psycopg.Connection, batch_id: int, batch_rows: list[Row],
                 grace: timedelta, parts: int) -> None:
    """The built-in ingest's sink, given the rows Spark would hand it: deduplicated in the batch
    (``copies``), the partition computed (of ``parts``)."""
    table = pa.table({
        "part": pa.array([partition_of(k, parts) for k, _, _ in batch_rows], pa.int16()),
        "uuid": pa.array([k for k, _, _ in batch_rows], pa.string()),
        "val": pa.array([v for _, v, _ in batch_rows], pa.int64()),
        "ts": pa.array([t for _, _, t in batch_rows], pa.timestamp("us", tz="UTC")),
    })
    good = dedup(table) if batch_rows else GOOD_SCHEMA.empty_table()
    write_batch(conn, "q-events", EV, batch_id, lambda _state: BatchRows(good, NO_DEAD_LETTERS),
                grace=grace)


def write_declared(conn: psycopg.Connection, name: str, batch_id: int,
                   records: list[dict[str, Any]]) -> None:
    """A declared stream's sink, given the batch as typed records (the parsers' output): the
    batch's dedup of (key, time) (``Parsed.take``), then its write path."""

    def pieces(layout: Layout, _limits: object) -> list[Parsed]:
        parsed, seen = Parsed(), set()
        for rec in records:
            row = tuple(rec.get(n) for n in layout.names)
            parsed.take((row, None, False), seen, layout.key_index, layout.time_index)
        return [parsed]

    write_stream_batch(conn, name, f"q-{name}", batch_id, [], now=NOW, pieces=pieces)


def write_all(conn: psycopg.Connection, batch_id: int, batch_rows: list[Row],
              tag_rows: list[tuple[str, datetime]], grace: timedelta, parts: int) -> None:
    write_events(conn, batch_id, batch_rows, grace, parts)
    write_declared(conn, TW, batch_id, [{"who": k, "amount": v, "at_ts": t}
                                         for k, v, t in batch_rows])
    if tag_rows:
        write_declared(conn, "tags", batch_id, [{"key": k, "ts": t, "tag": "x"}
                                                 for k, t in tag_rows])


def retention(conn: psycopg.Connection, history: timedelta | None, max_rows: int | None,
              chunk: int) -> None:
    """The retention job's calls, caught up: events by the policy, the declared streams by their
    own history and row limit, the sessions and the joins' results."""
    done = run_until_caught_up(
        conn, RetentionPolicy(history=history, max_rows=max_rows, chunk=chunk), NOW)
    assert done.caught_up
    nibble_streams(conn, NOW, chunk)
    expire_sessions(conn, chunk)
    tick_joins(conn, NOW, chunk)


# -- reading: the same question of both ---------------------------------------------------------


def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    """An answer, or that it was refused (the wording names the stream, so it differs)."""
    try:
        return "ok", call()
    except (ProcedureError, ConfigError):
        return "refused", None


def same(ask: Callable[[str], Any], what: object) -> None:
    """The same answer (or refusal) from both streams."""
    ev, tw = outcome(lambda: ask(EV)), outcome(lambda: ask(TW))
    assert ev == tw, f"{what}:\n  events: {ev!r}\n  twin:   {tw!r}"


def time_windows(conn: psycopg.Connection, kind: str, size: timedelta, advance: timedelta,
                 key: str | None, start: datetime, end: datetime) -> Callable[[str], Any]:
    def ask(stream: str) -> Any:
        spec = answers.window_spec(kind, size, advance if kind == "hopping" else None, key=key,
                                   stream=stream)
        got = answers.time_windows(conn, spec, from_=start, to=end)
        return got.windows, got.state
    return ask


def current(conn: psycopg.Connection, size: timedelta, advance: timedelta, at: datetime,
            delta: timedelta, key: str | None) -> Callable[[str], Any]:
    def ask(stream: str) -> Any:
        got = answers.current_windows(conn, size, advance, delta, True, at.isoformat(), key=key,
                                      stream=stream)
        return got.at, got.found, got.state
    return ask


def query(conn: psycopg.Connection, what: str, seconds: int,
          relative_to: str) -> Callable[[str], Any]:
    def ask(stream: str) -> Any:
        got = answers.query(conn, what, seconds, relative_to, stream=stream)
        return dataclasses.replace(got, stream="")
    return ask


def session_view(conn: psycopg.Connection, name: str) -> dict[str, Any]:
    """Everything a reader of session window ``name`` sees, the name aside."""
    stats = sessions.stats(conn, name)
    return {
        "sessions": sessions.sessions(conn, None, name),
        # the versions count the writes -- one per statement, and the events' COPY writes
        # partition by partition -- so the changes are compared without them
        "changes": sorted(repr(dataclasses.replace(c, version=0))
                          for c in sessions.changes(conn, name, 0)),
        "closed": sessions.closed(conn, name, None),
        "stats": dataclasses.replace(stats, name="", apply_seconds=0.0),
    }


def join_view(conn: psycopg.Connection, name: str) -> dict[str, Any]:
    """A join's results, status and shown answers, the events' column names as the twin's."""
    status = joins.status(conn, name)
    shown = [(a.ts, a.final, _renamed(a.l), _renamed(a.r))
             for a in joins.show(conn, name, BASE - 600 * S, NOW + 600 * S, None)]
    return {
        "results": sorted(joins.results(conn, name), key=repr),
        "exact": sorted(joins.exact(conn, name, BASE - 600 * S, NOW + 600 * S), key=repr),
        "status": dataclasses.replace(status, name=""),
        "shown": sorted(shown, key=repr),
    }


def _renamed(record: dict[str, Any] | None) -> tuple[tuple[str, Any], ...] | None:
    """A record's columns by name, sorted: the two streams' columns come in their own order."""
    return None if record is None else tuple(sorted((RENAMED.get(k, k), v)
                                                    for k, v in record.items()))


# -- the property -------------------------------------------------------------------------------

sizes = st.sampled_from([(1, 1), (3, 1), (7, 7), (10, 5), (10, 10), (30, 10), (60, 20),
                         (60, 60), (90, 30), (120, 60), (3600, 600), (3600, 3600)])
SETUP = {
    "grace_s": st.sampled_from([0, 5, 60]),  # the ingest's late rule: the watermark
    "history_s": st.sampled_from([None, 100, 200]),
    "chunk": st.integers(1, 7),
    "gap_s": st.sampled_from([1, 10, 45]),  # the session window
    "session_grace_s": st.sampled_from([0, 5]),
    "join": st.tuples(st.sampled_from(["inner", "left", "right", "full"]),
                      st.sampled_from([0, 2, 10]), st.sampled_from([0, 2, 10]),
                      st.sampled_from([0, 3])),  # type, before, after, grace
}
setups = st.fixed_dictionaries({**SETUP, "max_rows": st.none()})
# a row limit too, over a one-partition events store (the module docstring says why)
setups_with_rows = st.fixed_dictionaries({**SETUP, "max_rows": st.sampled_from([None, 3, 10, 25])})
questions = st.fixed_dictionaries({
    "spec": sizes,
    "range_s": st.tuples(st.integers(-120, SPAN_S), st.integers(1, SPAN_S + 120)),
    "counts": st.tuples(st.integers(1, 30), st.integers(1, 30), st.integers(0, 60)),
    "at_ms": st.integers(-10_000, (SPAN_S + 10) * 1000),
    "delta_s": st.sampled_from([0, 1, 30]),
    "seconds": st.integers(1, 400),
})


@pytest.fixture(scope="module")
def one_part_store_dsn(make_store: Callable[..., str]) -> str:
    """One store per module with a single events partition."""
    return make_store(1)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(setup=setups, batches=st.lists(batch, min_size=1, max_size=4), q=questions)
def test_events_and_a_declared_twin_give_the_same_answers(small_store_dsn, setup, batches, q):
    same_answers(small_store_dsn, store_fixtures.PARTS, setup, batches, q)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(setup=setups_with_rows, batches=st.lists(batch, min_size=1, max_size=4), q=questions)
def test_with_a_row_limit_too_they_give_the_same_answers(one_part_store_dsn, setup, batches, q):
    same_answers(one_part_store_dsn, 1, setup, batches, q)


def same_answers(dsn: str, parts: int, setup: dict[str, Any], batches: list[dict[str, Any]],
                 q: dict[str, Any]) -> None:
    """Feed both streams the batches, keep both by the setup's limits, ask both everything."""
    with store_fixtures.clean_connection(dsn) as conn, pytest.MonkeyPatch.context() as mp:
        mp.setattr(clock, "utc_now", lambda: NOW)
        grace = setup["grace_s"] * S
        history = None if setup["history_s"] is None else setup["history_s"] * S
        max_rows = setup["max_rows"]
        _declare(conn, setup, grace, history)
        sent: list[Row] = []
        for i, b in enumerate(batches):
            new = [(k, v, at_ms(ms)) for k, v, ms in b["rows"]]
            pool = sent + new
            new += [pool[c % len(pool)] for c in b["copies"] if pool]
            sent += new
            write_all(conn, i, new, [(k, at_ms(ms)) for k, ms in b["tags"]], grace, parts)
            if (history is not None or max_rows is not None) and b["nibble"]:
                retention(conn, history, max_rows, setup["chunk"])
        _check_windows(conn, q)
        _check_sessions_and_join(conn)
        # the join's watermark past every record: its results are the one exact join (of what
        # is stored: with retention, results of records it took are not in it)
        if history is None and max_rows is None:
            end = BASE + timedelta(seconds=SPAN_S + 120)
            write_all(conn, len(batches), [("zz", 0, end)], [("zz", end)], grace, parts)
            _check_sessions_and_join(conn)
            for name in ("ev_tags", "tw_tags"):
                view = join_view(conn, name)
                assert view["results"] == view["exact"]


def _declare(conn: psycopg.Connection, setup: dict[str, Any], grace: timedelta,
             history: timedelta | None) -> None:
    streams.define(conn, TW, key="who", time="at_ts", measures=["amount"], partitions=2,
                   history=history, grace=grace, max_rows=setup["max_rows"],
                   columns=[Column("who", "text"), Column("amount", "bigint", True),
                            Column("at_ts", "timestamptz")])
    streams.define(conn, "tags", key="key", time="ts",
                   columns=[Column("key", "text"), Column("tag", "text")])
    # a key's count windows read its newest rows through the key index (refused without it)
    key_windows.set_index(conn, True)
    key_windows.set_index(conn, True, TW)
    if history is not None or setup["max_rows"] is not None:
        # what `slidewin jobs add retention --history --max-rows` stores
        upsert_settings(conn, RetentionSettings(
            "default", None if history is None else history.total_seconds(), setup["max_rows"],
            setup["chunk"], 100))
    gap, sgrace = setup["gap_s"] * S, setup["session_grace_s"] * S
    for name, stream in (("ev", EV), ("tw", TW)):
        sessions.define(conn, sessions.SessionDef(name, gap, sgrace, timedelta(minutes=10),
                                                  stream=stream))
    kind, before, after, jgrace = setup["join"]
    for name, left, on in (("ev_tags", EV, "uuid=key"), ("tw_tags", TW, "who=key")):
        joins.define(conn, name, left=left, right="tags", on=on, join_type=kind,
                     before=before * S, after=after * S, grace=jgrace * S, idle=None, now=NOW)


def _check_windows(conn: psycopg.Connection, q: dict[str, Any]) -> None:
    size_s, adv_s = q["spec"]
    size, adv = size_s * S, adv_s * S
    lo, span = q["range_s"]
    start = BASE + timedelta(seconds=min(lo, span - 1))
    end = start + timedelta(seconds=span)
    for key in (None, *KEYS):
        for kind in answers.TIME_KINDS:
            same(time_windows(conn, kind, size, adv, key, start, end), (kind, key))
        at = BASE + timedelta(milliseconds=q["at_ms"])
        same(current(conn, size, adv, at, q["delta_s"] * S, key), ("current", key))
    csize, cadv, extra = q["counts"]
    cadv = min(cadv, csize)
    for key in (None, *KEYS):
        same(lambda s, key=key: answers.count_windows(conn, csize, cadv, csize + extra, key=key,
                                                      stream=s).windows, ("count windows", key))
    for what in answers.QUESTIONS:
        for relative_to in ("now", "stream"):
            same(query(conn, what, q["seconds"], relative_to), (what, relative_to))


def _check_sessions_and_join(conn: psycopg.Connection) -> None:
    assert session_view(conn, "ev") == session_view(conn, "tw")
    assert join_view(conn, "ev_tags") == join_view(conn, "tw_tags")
