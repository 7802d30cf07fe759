"""The counters /metrics reports, kept in the store (slidewin.counters): each is raised in the
transaction of what it counts, and none goes down when the rows it counted are deleted --
dropping a stream takes its dead letters, record_job_run prunes old runs, retention deletes the
events -- while a rolled-back write counts nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pyarrow as pa
import pytest

from slidewin.db import streams
from slidewin.db.counters import counters
from slidewin.db.events import Event, insert_events
from slidewin.db.schema import init_schema
from slidewin.db.streams import Column
from slidewin.ingest.batch import GOOD_SCHEMA
from slidewin.ingest.sink import BatchRows, write_batch
from tests.conftest import CLEAN_SQL, T0, clean_connection
from tests.pgfixture import create_database, drop_database

FIXTURE = Path(__file__).parent / "fixtures" / "store_v1.sql"


@pytest.fixture
def cconn(store_dsn: str) -> Iterator[psycopg.Connection]:
    with clean_connection(store_dsn, CLEAN_SQL + ", slidewin.counters, slidewin.job_runs") as c:
        yield c


def _bad(*reasons: str) -> pa.Table:
    return pa.table({
        "source": pa.array(["f.jsonl"] * len(reasons), pa.string()),
        "reason": pa.array(list(reasons), pa.string()),
        "detail": pa.array([None] * len(reasons), pa.string()),
        "raw": pa.array([f"line {i}" for i in range(len(reasons))], pa.string()),
    })


def _good(conn: psycopg.Connection, *seconds: int) -> pa.Table:
    rows = []
    for s in seconds:
        key = f"k{s:04d}"
        part = conn.execute("SELECT slidewin.partition_of(%s)", (key,)).fetchone()[0]
        rows.append({"part": part, "uuid": key, "val": s, "ts": T0 + timedelta(seconds=s),
                     "copies": 1})
    return pa.Table.from_pylist(rows, schema=GOOD_SCHEMA)


def _sensors(conn: psycopg.Connection, history: timedelta | None = None) -> None:
    streams.define(conn, "sensors", key="sensor", time="ts",
                   columns=[Column("sensor", "text"), Column("ts", "timestamptz"),
                            Column("temp", "double precision")],
                   measures=["temp"], history=history)


def test_dead_letters_are_counted_by_stream_and_reason_and_stay_counted(cconn):
    write_batch(cconn, "q/text/1", "events", 0,
                lambda _s: BatchRows(_good(cconn, 1, 2), _bad("malformed", "late", "late")))
    _sensors(cconn)
    cconn.execute("INSERT INTO slidewin.dead_letters (source, reason, raw, stream) "
                  "VALUES ('s.jsonl', 'bad_type', '{}', 'sensors')")
    with pytest.raises(psycopg.errors.RaiseException), cconn.transaction():
        cconn.execute("INSERT INTO slidewin.dead_letters (source, reason, raw, stream) "
                      "VALUES ('x', 'malformed', 'x', 'events')")
        cconn.execute("DO $$ BEGIN RAISE EXCEPTION 'rolled back'; END $$")
    expected = {("events", "late"): 2, ("events", "malformed"): 1, ("sensors", "bad_type"): 1}
    assert _dead(cconn) == expected

    streams.drop(cconn, "sensors")  # its dead letters go; the count of them stays
    assert cconn.execute("SELECT count(*) FROM slidewin.dead_letters").fetchone()[0] == 3
    assert _dead(cconn) == expected


INGEST_COUNTERS = ("ingest_batches", "ingest_events_accepted", "ingest_events_duplicate",
                   "ingest_records_rejected")
BATCH_SUMS = """
SELECT CASE WHEN starts_with(split_part(query_id, '/', 2), 'stream-')
            THEN substr(split_part(query_id, '/', 2), 8) ELSE 'events' END AS stream,
       count(*), sum(accepted), sum(duplicates), sum(rejected)
  FROM slidewin.ingest_batches GROUP BY 1 ORDER BY 1
"""


def _ingest(conn: psycopg.Connection) -> dict[str, tuple[int, ...]]:
    """The ingest's counters by stream, as (batches, accepted, duplicates, rejected)."""
    found: dict[str, list[int]] = {}
    for c in counters(conn):
        if c.name in INGEST_COUNTERS:
            found.setdefault(c.labels["stream"], [0] * 4)[INGEST_COUNTERS.index(c.name)] = c.value
    return {k: tuple(v) for k, v in sorted(found.items())}


def _batch_sums(conn: psycopg.Connection) -> dict[str, tuple[int, ...]]:
    return {r[0]: tuple(int(v) for v in r[1:]) for r in conn.execute(BATCH_SUMS)}


def test_ingest_batches_are_counted_in_their_transaction_by_stream(cconn):
    write_batch(cconn, "q/text/1", "events", 0,
                lambda _s: BatchRows(_good(cconn, 1, 2), _bad("malformed")))
    write_batch(cconn, "q/text/1", "events", 1,
                lambda _s: BatchRows(_good(cconn, 2, 3), _bad()))  # second 2 again: a duplicate
    write_batch(cconn, "q/text/1", "events", 1,  # a replay of batch 1: skipped, counts nothing
                lambda _s: BatchRows(_good(cconn, 2, 3), _bad()))
    # a declared stream's marker, claimed then filled as its sink does
    cconn.execute("INSERT INTO slidewin.ingest_batches (query_id, batch_id) "
                  "VALUES ('q/stream-sensors/1', 0)")
    cconn.execute("UPDATE slidewin.ingest_batches SET rows_in = 5, accepted = 4, rejected = 1 "
                  "WHERE query_id = 'q/stream-sensors/1'")
    with pytest.raises(psycopg.errors.RaiseException), cconn.transaction():
        cconn.execute("INSERT INTO slidewin.ingest_batches (query_id, batch_id, accepted) "
                      "VALUES ('q/text/1', 7, 100)")
        cconn.execute("DO $$ BEGIN RAISE EXCEPTION 'rolled back'; END $$")
    assert _ingest(cconn) == {"events": (2, 3, 1, 1), "sensors": (1, 4, 0, 1)}
    assert _ingest(cconn) == _batch_sums(cconn)


def _dead(conn: psycopg.Connection) -> dict[tuple[str, str], int]:
    return {(c.labels["stream"], c.labels["reason"]): c.value
            for c in counters(conn, "dead_letters")}


def test_job_runs_are_counted_past_the_pruning(cconn):
    for i in range(5):
        cconn.execute("SELECT slidewin.record_job_run('default', 'retention', now(), now(), 1, "
                      "'{\"0\": 2}', true, %s, '{}', %s, 2)",
                      (i == 3, "boom" if i == 4 else None))
    assert cconn.execute("SELECT count(*) FROM slidewin.job_runs").fetchone()[0] == 2
    found = {(c.labels["kind"], c.labels["outcome"]): c.value for c in counters(cconn, "job_runs")}
    assert found == {("retention", "ok"): 3, ("retention", "skipped"): 1,
                     ("retention", "error"): 1}


def test_retention_deletes_are_counted_per_stream(cconn):
    events = [Event(f"k{i:04d}", i, T0 + timedelta(seconds=i)) for i in range(40)]
    insert_events(cconn, events, 8)
    deleted = 0
    for part in range(8):  # every partition, in chunks, as the retention job nibbles
        while n := cconn.execute("SELECT slidewin.delete_after_date(%s, %s, 3)",
                                 (part, T0 + timedelta(seconds=30))).fetchone()[0]:
            deleted += n
    assert deleted == 30
    _sensors(cconn, history=timedelta(seconds=10))
    cconn.execute("INSERT INTO slidewin_streams.sensors (sensor, ts, temp) "
                  "SELECT 's' || i, %s + i * interval '1 second', i FROM generate_series(0, 19) i",
                  (T0,))
    assert streams.nibble(cconn, "sensors", T0 + timedelta(seconds=20), chunk=4) == 4
    assert streams.nibble(cconn, "sensors", T0 + timedelta(seconds=20), chunk=4) == 4
    totals: dict[str, int] = {}
    for c in counters(cconn, "retention_deleted"):
        totals[c.labels["stream"]] = totals.get(c.labels["stream"], 0) + c.value
    assert totals == {"events": 30, "sensors": 8}
    # one row per partition of the built-in stream: parallel nibbles never share one
    parts = {c.labels.get("part") for c in counters(cconn, "retention_deleted")
             if c.labels["stream"] == "events"}
    assert len(parts) == 8


@pytest.fixture
def v1_store(pg_admin_dsn: str) -> Iterator[str]:
    dsn = create_database(pg_admin_dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(FIXTURE.read_text(encoding="utf-8"))
    yield dsn
    drop_database(pg_admin_dsn, dsn)


def test_an_upgraded_store_starts_its_counters_from_what_it_holds(v1_store):
    with psycopg.connect(v1_store, autocommit=True) as conn:
        held = dict(conn.execute("SELECT reason, count(*) FROM slidewin.dead_letters "
                                 "GROUP BY reason").fetchall())
        runs = conn.execute("SELECT count(*) FROM slidewin.job_runs").fetchone()[0]
        init_schema(conn)
        init_schema(conn)  # idempotent: a second init counts nothing twice
        assert held and {c.labels["reason"]: c.value for c in counters(conn, "dead_letters")
                         if c.labels["stream"] == "events"} == held
        assert sum(c.value for c in counters(conn, "job_runs")) == runs
        batches = _batch_sums(conn)
        assert batches and _ingest(conn) == batches  # from the batches it held, once
