"""Promise 1 as a hypothesis state machine: whatever writers and deleters do, in any order, the
rollups equal count/sum/min/max of the raw rows still there -- checked after EVERY step.

Steps: batch inserts (out of order, many rows in one second, equal timestamps, resent
duplicates), COPY, single-row inserts, every nibble procedure and both inline variants (each also
checked against the nibble contract computed in Python), a manual DELETE and UPDATE as a psql
user types them (through the parent and through one partition), an upsert, a TRUNCATE of one
partition and a rolled-back transaction. Times are pinned around T0 so seconds collide.

Batches also go through the ingest's sink as Spark hands them over (``sink_batch``): chunks
carrying Spark's partials (computed here as ``ingest.parse.partials`` computes them, in-chunk
duplicates counted; ``test_ingest_stream`` checks Spark's against the same brute force), with
duplicates within a chunk, across chunks and of rows already stored, replays of a committed
batch, batches killed before commit, and partials that do not match their rows.

Runs derandomized (the same examples on every run, as CI needs). Set SLIDEWIN_HYPOTHESIS=explore
for a longer, random search.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from psycopg import sql

from slidewin.db import retention
from slidewin.db.events import Event, copy_events, partition_of
from slidewin.ingest import batch as arrow_batch
from slidewin.ingest.sink import BatchRows, Partials, PartialsMismatch, write_batch
from tests import store_fixtures
from tests.conftest import CLEAN_SQL, T0
from tests.invariants import rollup_drift
from tests.store_fixtures import PARTS, Row, oldest_first, put, rows_of

small_store_dsn = store_fixtures.small_store_dsn

# slow: its one test is a stateful property search that runs for about 10 s
pytestmark = pytest.mark.slow

KEYS = [f"k{i:04d}" for i in range(10)]  # same-length keys: Python and SQL order them alike
assert {partition_of(k, PARTS) for k in KEYS} == set(range(PARTS))

times = st.builds(
    lambda s, us: T0 + timedelta(seconds=s, microseconds=us),
    st.integers(-3, 3),
    st.sampled_from([0, 0, 1, 500_000, 999_999]) | st.integers(0, 999_999),
)
vals = st.sampled_from([-(2**63), 2**63 - 1, 0]) | st.integers(-1000, 1000)
events = st.tuples(st.sampled_from(KEYS), vals, times)
parts = st.integers(0, PARTS - 1)
chunks = st.integers(1, 6)
row_targets = st.integers(0, 8)

EXPLORE = os.environ.get("SLIDEWIN_HYPOTHESIS") == "explore"
SETTINGS = settings(
    max_examples=300 if EXPLORE else 25,
    stateful_step_count=50 if EXPLORE else 30,
    derandomize=not EXPLORE,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def expected_victims(before: list[Row], cutoff: datetime | None, target: int | None,
                     chunk: int) -> int:
    """The nibble contract in Python: the longest prefix of the (ts, uuid) order that is older
    than the cutoff or beyond the newest ``target`` rows, capped at ``chunk``."""
    excess = max(len(before) - target, 0) if target is not None else 0
    old = sum(1 for r in before if cutoff is not None and r[2] < cutoff)
    return min(chunk, max(excess, old))


def chunk_rows(chunk: list[Row], pid: int) -> BatchRows:
    """A chunk as ``ingest.stream`` hands it to the sink: deduplicated good rows, no dead
    letters, the Spark partition it is."""
    table = pa.table({
        "part": pa.array([partition_of(u, PARTS) for u, _v, _t in chunk], pa.int16()),
        "uuid": pa.array([u for u, _v, _t in chunk], pa.string()),
        "val": pa.array([v for _u, v, _t in chunk], pa.int64()),
        "ts": pa.array([t for _u, _v, t in chunk], pa.timestamp("us", tz="UTC")),
    })
    bad = pa.table({c: pa.array([], pa.string()) for c in arrow_batch.DEAD_LETTER_COLUMNS})
    return BatchRows(arrow_batch.dedup(table), bad, pid=pid)


def spark_partials(chunks: list[list[Row]]) -> pa.Table:
    """What ``ingest.parse.partials`` computes: per (pid, part, second) of each chunk's valid
    rows, every copy of a duplicate counted."""
    groups: dict[tuple[int, int, datetime], list[int]] = {}
    for pid, chunk in enumerate(chunks):
        for u, v, t in chunk:
            groups.setdefault((pid, partition_of(u, PARTS), t.replace(microsecond=0)), []).append(v)
    keys = sorted(groups)
    return pa.table({
        "pid": pa.array([k[0] for k in keys], pa.int32()),
        "part": pa.array([k[1] for k in keys], pa.int16()),
        "sec": pa.array([k[2] for k in keys], pa.timestamp("us", tz="UTC")),
        "n": pa.array([len(groups[k]) for k in keys], pa.int64()),
        "total": pa.array([sum(groups[k]) for k in keys], pa.decimal128(38, 0)),
        "vmin": pa.array([min(groups[k]) for k in keys], pa.int64()),
        "vmax": pa.array([max(groups[k]) for k in keys], pa.int64()),
    })


class Killed(Exception):
    """The process died before the batch committed (its transaction rolls back)."""


class RollupMachine(RuleBasedStateMachine):
    dsn = ""

    def __init__(self) -> None:
        super().__init__()
        self.conn = psycopg.connect(self.dsn, autocommit=True)
        self.conn.execute(CLEAN_SQL)
        self.batches: list[list[list[Row]]] = []  # committed sink batches, by batch id

    def teardown(self) -> None:
        self.conn.close()

    # --- writers ------------------------------------------------------------------------------

    @rule(batch=st.lists(events, max_size=12))
    def insert_batch(self, batch: list[Row]) -> None:
        put(self.conn, batch)

    @rule(batch=st.lists(events, min_size=1, max_size=12))
    def copy_new_rows(self, batch: list[Row]) -> None:
        stored = {(u, t) for u, _v, t in rows_of(self.conn)}
        fresh: dict[tuple[str, datetime], Row] = {}
        for u, v, t in batch:
            if (u, t) not in stored:
                fresh.setdefault((u, t), (u, v, t))
        with self.conn.transaction():
            copy_events(self.conn, [Event(*r) for r in fresh.values()], PARTS)

    @rule(data=st.data(), val=vals)
    def resend_an_existing_row(self, data: st.DataObject, val: int) -> None:
        stored = rows_of(self.conn)
        if not stored:
            return
        u, v, t = data.draw(st.sampled_from(stored))
        self.conn.execute("SELECT slidewin.insert_event(%s, %s, %s)", (u, val, t))
        put(self.conn, [(u, val, t)])
        kept = self.conn.execute(
            "SELECT val FROM slidewin.events WHERE uuid = %s AND ts = %s", (u, t)).fetchall()
        assert kept == [(v,)], "a duplicate (uuid, ts) must change nothing"

    @rule(event=events)
    def upsert_as_a_psql_user(self, event: Row) -> None:
        u, v, t = event
        self.conn.execute(
            "INSERT INTO slidewin.events (part, uuid, val, ts) "
            "VALUES (slidewin.partition_of(%s), %s, %s, %s) "
            "ON CONFLICT (part, ts, uuid) DO UPDATE SET val = excluded.val", (u, u, v, t))

    # --- the ingest's sink, rollups from Spark's partials -------------------------------------

    def _sink(self, batch_id: int, chunks: list[list[Row]], partials: pa.Table,
              kill: bool = False) -> bool:
        def compute(_newest):
            yield from (chunk_rows(chunk, pid) for pid, chunk in enumerate(chunks))
            if kill:
                raise Killed
            yield Partials(lambda: partials)

        result = write_batch(self.conn, "machine", "machine/state", batch_id, compute)
        if not result.skipped:
            expected = sum(len(c) for c in chunks if len({(u, t) for u, _v, t in c}) == len(c))
            assert result.spark_rollups <= expected
        return result.skipped

    @rule(chunks=st.lists(st.lists(events, max_size=8), min_size=1, max_size=3))
    def sink_batch(self, chunks: list[list[Row]]) -> None:
        assert not self._sink(len(self.batches), chunks, spark_partials(chunks))
        self.batches.append(chunks)

    @rule(data=st.data())
    def sink_replays_a_committed_batch(self, data: st.DataObject) -> None:
        if not self.batches:
            return
        batch_id = data.draw(st.integers(0, len(self.batches) - 1))
        before = rows_of(self.conn)
        chunks = self.batches[batch_id]
        assert self._sink(batch_id, chunks, spark_partials(chunks)), "a replay is skipped"
        assert rows_of(self.conn) == before

    @rule(chunks=st.lists(st.lists(events, min_size=1, max_size=8), min_size=1, max_size=3))
    def sink_batch_killed_before_commit(self, chunks: list[list[Row]]) -> None:
        before = rows_of(self.conn)
        try:
            self._sink(len(self.batches), chunks, spark_partials(chunks), kill=True)
        except Killed:
            pass
        assert rows_of(self.conn) == before

    @rule(chunks=st.lists(st.lists(events, min_size=1, max_size=8), min_size=2, max_size=3))
    def sink_batch_with_partials_of_another_partition(self, chunks: list[list[Row]]) -> None:
        # the first chunk holds a value no other does, so the two partitions' partials differ
        chunks = [[*chunks[0], (KEYS[0], 5000, T0 + timedelta(seconds=10))], *chunks[1:]]
        before = rows_of(self.conn)
        partials = spark_partials(chunks)
        last = len(chunks) - 1
        pid = partials["pid"]
        swapped = pc.if_else(pc.equal(pid, 0), last, pc.if_else(pc.equal(pid, last), 0, pid))
        partials = partials.set_column(0, "pid", swapped.cast(pa.int32()))
        try:
            self._sink(len(self.batches), chunks, partials)
        except PartialsMismatch:
            assert rows_of(self.conn) == before
            return
        # neither chunk was COPYed for its partials (a duplicate in it, or already stored)
        self.batches.append(chunks)

    # --- nibbles, checked against the contract ------------------------------------------------

    def _nibble(self, part: int, cutoff: datetime | None, target: int | None, chunk: int,
                call) -> None:
        before = rows_of(self.conn, part)
        want = expected_victims(before, cutoff, target, chunk)
        assert call() == want
        assert rows_of(self.conn, part) == before[want:]

    @rule(part=parts, cutoff=times, chunk=chunks)
    def delete_after_date(self, part: int, cutoff: datetime, chunk: int) -> None:
        self._nibble(part, cutoff, None, chunk,
                     lambda: retention.delete_after_date(self.conn, part, cutoff, chunk))

    @rule(part=parts, keep=row_targets, chunk=chunks)
    def delete_oldest_to_target(self, part: int, keep: int, chunk: int) -> None:
        self._nibble(part, None, keep, chunk,
                     lambda: retention.delete_oldest_to_target(self.conn, part, keep, chunk))

    @rule(part=parts, cutoff=times, keep=row_targets, chunk=chunks)
    def delete_to_limits(self, part: int, cutoff: datetime, keep: int, chunk: int) -> None:
        self._nibble(part, cutoff, keep, chunk,
                     lambda: retention.delete_to_limits(self.conn, part, cutoff, keep, chunk))

    @rule(part=parts, cutoff=st.none() | times, keep=st.none() | row_targets, chunk=chunks)
    def nibble(self, part: int, cutoff: datetime | None, keep: int | None, chunk: int) -> None:
        if cutoff is None and keep is None:
            return
        self._nibble(part, cutoff, keep, chunk,
                     lambda: retention.nibble(self.conn, part, cutoff, keep, chunk))

    def _inline(self, event: Row, cutoff: datetime | None, target: int | None, chunk: int,
                query: str, limit: object) -> None:
        part = partition_of(event[0], PARTS)
        before = rows_of(self.conn, part)
        if (event[0], event[2]) not in {(u, t) for u, _v, t in before}:
            before = oldest_first([*before, event])
        want = expected_victims(before, cutoff, target, chunk)
        got = self.conn.execute(query, (*event, limit, chunk)).fetchone()
        assert got == (want,)
        assert rows_of(self.conn, part) == before[want:]

    @rule(event=events, cutoff=times, chunk=chunks)
    def insert_and_delete_after_date(self, event: Row, cutoff: datetime, chunk: int) -> None:
        self._inline(event, cutoff, None, chunk,
                     "SELECT slidewin.insert_and_delete_after_date(%s, %s, %s, %s, %s)", cutoff)

    @rule(event=events, keep=row_targets, chunk=chunks)
    def insert_and_delete_oldest_to_target(self, event: Row, keep: int, chunk: int) -> None:
        self._inline(event, None, keep, chunk,
                     "SELECT slidewin.insert_and_delete_oldest_to_target(%s, %s, %s, %s, %s)",
                     keep)

    # --- what a psql user might type ----------------------------------------------------------

    def _psql(self, statement: sql.Composed) -> None:
        try:
            self.conn.execute(statement.as_string(self.conn))
        except psycopg.errors.UniqueViolation:
            pass  # an UPDATE moving a row onto another's (uuid, ts): refused, nothing changes

    @rule(key=st.sampled_from(KEYS), before=times)
    def manual_delete(self, key: str, before: datetime) -> None:
        self._psql(sql.SQL("DELETE FROM slidewin.events WHERE uuid = {} AND ts < {}").format(
            sql.Literal(key), sql.Literal(before)))

    @rule(part=parts, floor=st.integers(-1000, 1000))
    def manual_delete_in_one_partition(self, part: int, floor: int) -> None:
        self._psql(sql.SQL("DELETE FROM slidewin.{} WHERE val > {}").format(
            sql.Identifier(f"events_p{part:03d}"), sql.Literal(floor)))

    @rule(key=st.sampled_from(KEYS), val=st.integers(-2000, 2000))
    def manual_update_val(self, key: str, val: int) -> None:
        self._psql(sql.SQL("UPDATE slidewin.events SET val = {} WHERE uuid = {}").format(
            sql.Literal(val), sql.Literal(key)))

    @rule(key=st.sampled_from(KEYS), shift_ms=st.sampled_from([-1500, -500, 1, 700, 1000]))
    def manual_update_ts(self, key: str, shift_ms: int) -> None:
        # moves rows into other seconds (and out of seconds whose extremes they were)
        part = partition_of(key, PARTS)
        self._psql(sql.SQL(
            "UPDATE slidewin.{} SET ts = ts + {} * interval '1 millisecond', val = val % 1000 "
            "WHERE uuid = {}").format(
            sql.Identifier(f"events_p{part:03d}"), sql.Literal(shift_ms), sql.Literal(key)))

    @rule(part=parts)
    def truncate_one_partition(self, part: int) -> None:
        self._psql(sql.SQL("TRUNCATE slidewin.{}").format(sql.Identifier(f"events_p{part:03d}")))

    @rule(batch=st.lists(events, min_size=1, max_size=5), part=parts)
    def rolled_back_transaction(self, batch: list[Row], part: int) -> None:
        before = rows_of(self.conn)
        self.conn.autocommit = False
        try:
            put(self.conn, batch)
            retention.delete_oldest_to_target(self.conn, part, 0, 3)
            self.conn.rollback()
        finally:
            self.conn.autocommit = True
        assert rows_of(self.conn) == before

    # --- promise 1, after every step ----------------------------------------------------------

    @invariant()
    def rollups_equal_raw_aggregates(self) -> None:
        assert rollup_drift(self.conn) == []


def test_rollups_stay_exact_under_random_interleavings(small_store_dsn):
    RollupMachine.dsn = small_store_dsn
    run_state_machine_as_test(RollupMachine, settings=SETTINGS)
