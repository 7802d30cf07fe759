"""The psycopg sink: one transaction per batch, replays skipped, duplicates of stored rows
skipped by ON CONFLICT with rollups kept exact by the trigger, dead letters kept with raw text.
No Spark: the batches are Arrow tables built here."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import psycopg
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slidewin.db.events import partition_of
from slidewin.db.schema import init_schema
from slidewin.ingest.batch import GOOD_SCHEMA, partials
from slidewin.ingest.sink import (
    PRECOMPUTED,
    BatchResult,
    BatchRows,
    InlineRetention,
    Partials,
    PartialsMismatch,
    write_batch,
)
from tests.conftest import T0
from tests.ingest_fixtures import clean_ingest_state
from tests.invariants import assert_rollups_exact


@pytest.fixture
def iconn(conn):
    return clean_ingest_state(conn)


BAD = pa.schema(
    [
        ("source", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("raw", pa.string()),
    ]
)


def rows(events, bad=()) -> BatchRows:
    good = pa.Table.from_pylist(
        [
            {
                "part": partition_of(u, 8),
                "uuid": u,
                "val": v,
                "ts": T0 + timedelta(seconds=s),
                "copies": c,
            }
            for u, v, s, c in events
        ],
        schema=GOOD_SCHEMA,
    )
    dead = pa.Table.from_pylist(
        [{"source": "f.jsonl", "reason": r, "detail": None, "raw": raw} for r, raw in bad],
        schema=BAD,
    )
    return BatchRows(good, dead)


def write(conn, batch_id, batch, query="q/text", inline=None, seen=None):
    def compute(newest):
        if seen is not None:
            seen.append(newest)
        return batch

    return write_batch(conn, query, "q", batch_id, compute, inline)


def test_batch_writes_rows_dead_letters_marker_and_state(iconn):
    conn = iconn
    res = write(conn, 0, rows([("a", 1, 0, 1), ("b", 5, 0.5, 2)], [("malformed", 'x"y\\z')]))
    assert (res.rows_in, res.accepted, res.duplicates, res.rejected) == (4, 2, 1, 1)
    assert res.path == "copy" and res.by_reason == {"malformed": 1}
    assert conn.execute("SELECT count(*) FROM slidewin.events").fetchone()[0] == 2
    raw = conn.execute("SELECT raw, reason, batch_id FROM slidewin.dead_letters").fetchall()
    assert raw == [('x"y\\z', "malformed", 0)]
    marker = conn.execute(
        "SELECT rows_in, accepted, duplicates, rejected, max_ts FROM slidewin.ingest_batches"
    ).fetchone()
    assert marker == (4, 2, 1, 1, T0 + timedelta(seconds=0.5))
    state = conn.execute("SELECT newest_ts FROM slidewin.stream_state WHERE stream = 'q'")
    assert state.fetchone()[0] == T0 + timedelta(seconds=0.5)
    assert_rollups_exact(iconn)


def test_dead_letters_keep_their_event_time_and_the_state_its_grace(iconn):
    """event_ts is stored to the microsecond whatever time zone the Arrow column carries, for
    the reasons that have one (late here, not bad_ts); NULL stays NULL, also for a bad table
    without the column; the grace passed with a batch is recorded with the stream time, and a
    batch without one keeps it."""
    late = T0 + timedelta(seconds=40, microseconds=500001)
    bad = pa.table(
        {
            "source": ["f.jsonl"] * 3,
            "reason": ["late", "bad_ts", "late"],
            "detail": [None, None, None],
            "raw": ["v", "w", "y"],
            "ts": pa.array([late, late, None], pa.timestamp("us", tz="UTC")).cast(
                pa.timestamp("us", tz="America/New_York")
            ),
        }
    )
    five = timedelta(seconds=5)
    write_batch(iconn, "q/text", "q", 0, lambda _n: BatchRows(rows([("a", 1, 100, 1)]).good, bad),
                grace=five)
    got = iconn.execute("SELECT raw, event_ts FROM slidewin.dead_letters ORDER BY raw")
    assert got.fetchall() == [("v", late), ("w", None), ("y", None)]
    state = "SELECT newest_ts, grace FROM slidewin.stream_state WHERE stream = 'q'"
    assert iconn.execute(state).fetchone() == (T0 + timedelta(seconds=100), five)
    write(iconn, 1, rows([("b", 1, 101, 1)], [("malformed", "x")]))  # no grace: kept
    assert iconn.execute(state).fetchone() == (T0 + timedelta(seconds=101), five)
    x = iconn.execute("SELECT event_ts FROM slidewin.dead_letters WHERE raw = 'x'").fetchone()
    assert x == (None,)
    write_batch(iconn, "q/text", "q", 2, lambda _n: rows([]), grace=timedelta(minutes=2))
    assert iconn.execute(state).fetchone()[1] == timedelta(minutes=2)


def test_a_store_from_before_grace_ends_with_one_ingest_advance(iconn):
    """A store made before p_grace has the three-argument function; init drops it, so a call
    with two or three arguments is not ambiguous between two overloads."""
    iconn.execute(
        "CREATE OR REPLACE FUNCTION slidewin.ingest_advance(p_query_id text, "
        "p_newest_ts timestamptz, p_now timestamptz DEFAULT now()) RETURNS timestamptz "
        "LANGUAGE sql AS 'SELECT p_newest_ts'"
    )
    init_schema(iconn)
    init_schema(iconn)
    count = "SELECT count(*) FROM pg_proc WHERE proname = 'ingest_advance'"
    assert iconn.execute(count).fetchone()[0] == 1
    row = iconn.execute("SELECT slidewin.ingest_advance('one', %s, %s)", (T0, T0)).fetchone()
    assert row == (T0,)


def test_a_batch_in_chunks_is_counted_as_one(iconn):
    """Chunks (one per group of files; rows, or a function the writer thread calls for them)
    share the batch's transaction, marker and counts; a key repeated in a later chunk is a
    duplicate, the newest time may come from any chunk."""
    first = rows([("a", 1, 3, 2), ("b", 2, 1, 1)], [("malformed", "x")])
    second = rows([("a", 1, 3, 1), ("c", 3, 2, 1)], [("bad_ts", "y"), ("malformed", "z")])
    res = write_batch(iconn, "q/text", "q", 0, lambda _newest: iter([first, lambda: second]))
    assert (res.rows_in, res.accepted, res.duplicates, res.rejected) == (8, 3, 2, 3)
    assert res.by_reason == {"malformed": 2, "bad_ts": 1}
    assert res.path == "copy+staging" and res.max_ts == T0 + timedelta(seconds=3)
    marker = iconn.execute("SELECT rows_in, accepted, max_ts FROM slidewin.ingest_batches")
    assert marker.fetchone() == (8, 3, T0 + timedelta(seconds=3))
    assert iconn.execute("SELECT count(*) FROM slidewin.dead_letters").fetchone()[0] == 3
    assert_rollups_exact(iconn)


def test_replayed_batch_changes_nothing(iconn):
    conn = iconn
    batch = rows([("a", 1, 0, 1)], [("bad_ts", "{}")])
    write(conn, 7, batch)
    before = conn.execute("SELECT * FROM slidewin.rollups").fetchall()
    again = write(conn, 7, batch)
    assert again.skipped
    assert conn.execute("SELECT * FROM slidewin.rollups").fetchall() == before
    assert conn.execute("SELECT count(*) FROM slidewin.dead_letters").fetchone()[0] == 1


def test_duplicate_of_a_stored_event_is_skipped_and_rollups_stay_exact(iconn):
    conn = iconn
    write(conn, 0, rows([("a", 10, 0, 1), ("b", 20, 0, 1)]))
    res = write(conn, 1, rows([("a", 10, 0, 1), ("c", 30, 0, 1)]))  # a is already stored
    assert res.path == "staging"
    assert (res.accepted, res.duplicates) == (1, 1)
    total = conn.execute("SELECT sum(n), sum(total) FROM slidewin.rollups").fetchone()
    assert (total[0], int(total[1])) == (3, 60)
    assert_rollups_exact(iconn)


def test_state_is_read_before_the_batch_and_only_rises(iconn):
    conn = iconn
    seen = []
    write(conn, 0, rows([("a", 1, 100, 1)]), seen=seen)
    write(conn, 1, rows([("b", 1, 50, 1)]), seen=seen)
    write(conn, 2, rows([]), seen=seen)
    hundred = T0 + timedelta(seconds=100)
    assert [s.newest for s in seen] == [None, hundred, hundred]


def test_failed_batch_leaves_nothing(iconn):
    conn = iconn

    def explode(_newest):
        raise RuntimeError("spark failed")

    def second_chunk_fails():
        raise RuntimeError("split failed")

    with pytest.raises(RuntimeError):
        write_batch(conn, "q/text", "q", 0, explode)
    with pytest.raises(RuntimeError):
        write_batch(conn, "q/text", "q", 0, lambda _n: [rows([("b", 1, 0, 1)]), second_chunk_fails])
    assert conn.execute("SELECT count(*) FROM slidewin.ingest_batches").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM slidewin.events").fetchone()[0] == 0
    assert write(conn, 0, rows([("a", 1, 0, 1)])).accepted == 1


def test_inline_keeps_the_newest_max_rows_of_the_whole_store(iconn):
    conn = iconn
    events = [(f"u{i}", i, i, 1) for i in range(200)]  # one event per second
    inline = InlineRetention(history=None, max_rows=10, chunk=7)
    res = write(conn, 0, rows(events), inline=inline)
    kept = [r[0] for r in conn.execute("SELECT uuid FROM slidewin.events ORDER BY ts").fetchall()]
    assert kept == [f"u{i}" for i in range(190, 200)]  # store-wide max_rows, as the jobs use it
    assert res.nibbled == 190
    assert_rollups_exact(iconn)


def test_inline_history_cutoff_follows_the_stream_time(iconn):
    conn = iconn
    inline = InlineRetention(history=timedelta(seconds=30), max_rows=None, chunk=100)
    write(conn, 0, rows([(f"u{i}", i, i, 1) for i in range(100)]), inline=inline)
    oldest = conn.execute("SELECT min(ts), max(ts) FROM slidewin.events").fetchone()
    assert oldest == (T0 + timedelta(seconds=69), T0 + timedelta(seconds=99))
    assert_rollups_exact(iconn)


def test_concurrent_writer_of_the_same_batch_waits_then_skips(iconn, store_dsn):
    conn = iconn
    with psycopg.connect(store_dsn, autocommit=True) as other:
        with other.transaction():
            other.execute(
                "INSERT INTO slidewin.ingest_batches (query_id, batch_id) VALUES ('q/text', 3)"
            )
        assert write(conn, 3, rows([("a", 1, 0, 1)])).skipped


# ---------------------------------------------------------------- rollups from Spark's partials


def with_partials(batch: BatchRows, *chunks: BatchRows):
    """Chunks as ``ingest.stream`` yields them: each a Spark partition (pid = its position),
    then their partials (computed with Arrow, as Spark computes them: copies counted)."""
    def compute(_newest):
        parts = []
        for pid, chunk in enumerate((batch, *chunks)):
            yield replace(chunk, pid=pid)
            every_copy = [r for r in chunk.good.to_pylist() for _ in range(r["copies"])]
            sums = partials(pa.Table.from_pylist(every_copy, schema=GOOD_SCHEMA), 0)
            parts.append(sums.set_column(0, "pid", pa.array([pid] * sums.num_rows, pa.int32())))
        yield Partials(lambda: pa.concat_tables(parts))
    return compute


def test_a_chunk_with_partials_is_copied_with_the_trigger_aside(iconn):
    """The rows are COPYed with the insert trigger stepped aside and Spark's partials applied
    once: were the trigger to fire too, every rollup would count twice."""
    batch = rows([("a", 1, 0, 1), ("b", 5, 0.5, 1), ("c", -3, 2, 1)])
    res = write_batch(iconn, "q/text", "q", 0, with_partials(batch, rows([("d", 9, 0.2, 1)])))
    assert res.path == PRECOMPUTED and res.spark_rollups == 4 and res.accepted == 4
    assert_rollups_exact(iconn)
    # the switch was the COPY's alone: a psql insert on the same connection counts
    iconn.execute("INSERT INTO slidewin.events (part, uuid, val, ts) "
                  "VALUES (slidewin.partition_of('e'), 'e', 7, %s)", (T0,))
    assert_rollups_exact(iconn)


def test_duplicates_leave_the_rollups_to_the_trigger(iconn):
    """A chunk with an in-batch duplicate (copies 2), or holding a row already stored (the
    staging path, which inserts fewer rows than it was sent), is not summed from partials."""
    write(iconn, 0, rows([("old", 4, 1, 1)]))
    dup_in_batch = rows([("a", 1, 0, 2), ("b", 2, 0, 1)])
    stored_again = rows([("old", 40, 1, 1), ("n", 3, 1, 1)])
    fresh = rows([("f", 6, 3, 1)])
    res = write_batch(iconn, "q/text", "q", 1, with_partials(dup_in_batch, stored_again, fresh))
    assert res.spark_rollups == 1 and res.accepted == 4
    assert res.path == f"copy+{PRECOMPUTED}+staging" == "copy+presummed+staging"
    assert_rollups_exact(iconn)


def test_partials_that_do_not_match_their_rows_roll_the_batch_back(iconn):
    def compute(_newest):
        yield replace(rows([("a", 1, 0, 1)]), pid=0)
        sums = partials(rows([("a", 2, 0, 1)]).good, 0)  # another value
        yield Partials(lambda: sums)

    with pytest.raises(PartialsMismatch):
        write_batch(iconn, "q/text", "q", 0, compute)
    assert iconn.execute("SELECT count(*) FROM slidewin.events").fetchone() == (0,)
    assert iconn.execute("SELECT count(*) FROM slidewin.ingest_batches").fetchone() == (0,)


def test_the_progress_line_names_rows_the_triggers_summed():
    from slidewin.ingest.progress import batch_line
    from slidewin.ingest.sink import BatchResult

    now = T0 + timedelta(seconds=5)
    spark_only = BatchResult("q", 3, rows_in=10, accepted=10, spark_rollups=10, seconds=1.0,
                             newest_ts=T0)
    mixed = BatchResult("q", 4, rows_in=10, accepted=10, spark_rollups=7, seconds=1.0,
                        newest_ts=T0)
    assert "by trigger" not in batch_line("text", spark_only, now)
    assert ", rollups of 3 by trigger," in batch_line("text", mixed, now)


def test_the_batch_line_says_what_session_windows_took():
    from slidewin.ingest.progress import batch_line

    light = BatchResult("q", 1, rows_in=10, accepted=10, seconds=2.0, compute_s=1.0, session_s=0.1)
    assert ", sessions 0.10s, " in batch_line("text", light, T0)
    heavy = replace(light, session_s=0.9)
    assert "sessions 0.90s -- most of the batch: see `slidewin windows list`" in batch_line(
        "text", heavy, T0)
    assert "sessions" not in batch_line("text", replace(light, session_s=0.0), T0)


# ---------------------------------------------------------------- the driver's partials


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 7),
            st.integers(-(2**63), 2**63 - 1),
            # microseconds around the epoch and a few seconds either side: floors of negative
            # times, exact second boundaries
            st.integers(-5_000_001, 5_000_001),
        ),
        min_size=1,
        max_size=60,
    ),
    st.integers(0, 40),
)
def test_the_drivers_partials_are_the_rows_sums_per_part_and_second(events, pid):
    """``batch.partials`` (the default ``--rollups driver``) against sums in Python: count,
    exact sum (beyond 64 bits), min and max per (part, second) -- seconds floored, before 1970
    too -- every row tagged with its partition."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    good = pa.table({
        "part": pa.array([p for p, _v, _us in events], pa.int16()),
        "uuid": pa.array([f"u{i}" for i in range(len(events))]),
        "val": pa.array([v for _p, v, _us in events], pa.int64()),
        "ts": pa.array([epoch + timedelta(microseconds=us) for _p, _v, us in events],
                       pa.timestamp("us", tz="UTC")),
    })
    groups: dict[tuple[int, datetime], list[int]] = {}
    for p, v, us in events:
        groups.setdefault((p, epoch + timedelta(seconds=us // 1_000_000)), []).append(v)
    want = {k: (len(vs), sum(vs), min(vs), max(vs)) for k, vs in groups.items()}
    got = partials(good, pid).to_pylist()
    assert {r["pid"] for r in got} == {pid}
    assert {(r["part"], r["sec"]): (r["n"], int(r["total"]), r["vmin"], r["vmax"]) for r in got} \
        == want
    assert len(got) == len(want)
