"""The streaming ingest end to end in-process: real Spark (one shared local[2] session) and
real PostgreSQL, and the partition-by-partition pull it uses (``ingest.pull``). Each test drops
files, runs the query to completion (availableNow) and checks where every line went. The
ingest's clock is pinned (NOW = T0 + 2 min): the future rule never depends on today's date.
Timeline of the lateness test (grace 5 s, history 60 s):

    t(s)   30        40  40.5          90       97  100
           |expired  |   |late          |late    |ok |newest seen (batch 0)
           w         .   v              z        y   x
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from slidewin.db import windows
from slidewin.ingest.config import IngestConfig
from slidewin.ingest.runner import preflight, run
from tests.conftest import T0
from tests.ingest_fixtures import (
    clean_ingest_state,
    event,
    spark_conf,
    stored_rollups,
    stored_rows,
    truth_from_jsonl,
    truth_rollups,
    write_jsonl,
    write_lines,
)
from tests.invariants import assert_rollups_exact

pytestmark = pytest.mark.spark


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)
NOW = T0 + timedelta(minutes=2)  # the ingest's clock: every test event (T0 .. T0+100 s) is past


@pytest.fixture
def iconn(conn):
    return clean_ingest_state(conn)


def ingest_once(
    spark, dsn: str, tmp: Path, *, now: datetime = NOW, on_batch=None, **kw
) -> list[str]:
    """Run ``slidewin ingest --once`` in-process against ``tmp/landing`` with the clock pinned
    at ``now``; return the progress (``on_batch``: called with each batch's result)."""
    base = {
        "landing": tmp / "landing",
        "checkpoint_dir": tmp / "cp",
        "archive_dir": tmp / "archive",
        "once": True,
        "format": "json",
        "processed": "keep",
        "max_files_per_trigger": 1,
        "query_id": "t",
    }
    config = IngestConfig(**{**base, **kw})
    lines: list[str] = []
    run(
        preflight(config, dsn), dsn, lines.append, spark=spark, clock=lambda: now,
        on_batch=on_batch,
    )
    return lines


def files_in_order(folder: Path, batches: list[list[dict]], prefix: str = "f") -> list[Path]:
    """One file per batch, modification times one second apart (the file source's order)."""
    base = time.time() - 1000
    return [
        write_jsonl(folder, f"{prefix}{i}.jsonl", evs, mtime=base + i)
        for i, evs in enumerate(batches)
    ]


def markers(conn):
    return conn.execute(
        "SELECT batch_id, rows_in, accepted, duplicates, rejected FROM slidewin.ingest_batches "
        "ORDER BY batch_id"
    ).fetchall()


def three_batches_and_a_replay(spark, dsn: str, iconn, tmp_path: Path, after_first=None) -> set:
    """Three batches -- duplicates within a file, across files, a re-sent file -- then Spark
    replays the last: rows, rollups and batch markers are exact and the replay is a no-op.
    ``after_first`` checks more after the first run. Returns the stored truth."""
    land = tmp_path / "landing"
    land.mkdir()
    first = [event("a", 1, 0), event("a", 1, 0), event("b", 2, 1)]
    second = [event("a", 1, 0), event("c", 3, 2)]
    files = files_in_order(land, [first, second, first])  # the third is a re-sent copy
    ingest_once(spark, dsn, tmp_path)
    truth = truth_from_jsonl(files)
    if after_first is not None:
        after_first()
    assert stored_rows(iconn) == truth and len(truth) == 3
    assert stored_rollups(iconn) == truth_rollups(truth, 8)
    assert markers(iconn) == [(0, 3, 2, 1, 0), (1, 2, 1, 1, 0), (2, 3, 0, 3, 0)]
    # a replay: Spark lost its record of batch 2 (a crash between our commit and its own) and
    # runs the batch again on restart: the marker makes it a no-op
    for name in ("2", ".2.crc"):
        (tmp_path / "cp" / "text" / "commits" / name).unlink(missing_ok=True)
    lines = ingest_once(spark, dsn, tmp_path)
    assert sum("batch 2: already committed, skipped" in line for line in lines) == 1
    assert stored_rows(iconn) == truth
    return truth


@pytest.mark.slow
def test_duplicates_within_across_files_and_replays(spark, store_dsn, iconn, tmp_path):
    truth = three_batches_and_a_replay(spark, store_dsn, iconn, tmp_path)
    # a new checkpoint on the same store reads every file again: all duplicates, nothing new
    ingest_once(spark, store_dsn, tmp_path, checkpoint_dir=tmp_path / "cp2")
    assert stored_rows(iconn) == truth
    assert stored_rollups(iconn) == truth_rollups(truth, 8)
    sums = iconn.execute(
        "SELECT count(*), sum(rows_in), sum(accepted), sum(duplicates) FROM slidewin.ingest_batches"
    ).fetchone()
    assert sums == (6, 16, 3, 13)


@pytest.mark.slow
def test_late_and_expired_go_to_dead_letters(spark, store_dsn, iconn, tmp_path):
    land = tmp_path / "landing"
    land.mkdir()
    later = [event("y", 97, 97), event("z", 90, 90), event("w", 30, 30), event("v", 40, 40.5)]
    files_in_order(land, [[event("x", 100, 100)], later])
    ingest_once(
        spark, store_dsn, tmp_path, grace=timedelta(seconds=5), history=timedelta(seconds=60)
    )
    kept = {u for u, _, _ in stored_rows(iconn)}
    assert kept == {"x", "y"}
    dead = iconn.execute(
        "SELECT reason, raw, event_ts FROM slidewin.dead_letters ORDER BY raw"
    ).fetchall()
    by_uuid = {json.loads(raw)["uuid"]: (reason, ts) for reason, raw, ts in dead}
    assert by_uuid == {  # each with its exact event time, for the windows' late counts
        "z": ("late", at(90)),
        "w": ("expired", at(30)),
        "v": ("late", at(40.5)),
    }
    assert markers(iconn)[1] == (1, 4, 1, 0, 3)
    state = iconn.execute(
        "SELECT newest_ts, grace FROM slidewin.stream_state WHERE stream = 'events'"
    ).fetchone()
    assert state == (at(100), timedelta(seconds=5))
    # the windows' watermark is the ingest's late rule: newest - grace
    status = windows.status(iconn, at(40), at(91))
    assert (status.complete_up_to, status.late) == (at(95), 2)
    assert windows.status(iconn, at(40.6), at(90)).late == 0


BAD_JSON = {
    "not json at all": "malformed",
    '{"uuid": "m1", "val": 1}': "missing_field",
    '{"val": 1, "ts": "2026-01-01T12:00:00Z"}': "missing_field",
    '{"uuid": "m2", "val": "ten", "ts": "2026-01-01T12:00:00Z"}': "bad_type",
    '{"uuid": "m3", "val": 1.5, "ts": "2026-01-01T12:00:00Z"}': "bad_type",
    '{"uuid": "m4", "val": 9223372036854775808, "ts": "2026-01-01T12:00:00Z"}': "out_of_range",
    '{"uuid": "m5", "val": 1, "ts": "yesterday"}': "bad_ts",
    '{"uuid": "m6", "val": 1, "ts": "2999-01-01T00:00:00Z"}': "future",
    # just past the clock + max-future (NOW + 1 min = 12:03:00; the pinned clock, not today)
    '{"uuid": "m7", "val": 1, "ts": "2026-01-01T12:03:00.001Z"}': "future",
    '{"uuid": "' + "u" * 201 + '", "val": 1, "ts": "2026-01-01T12:00:00Z"}': "bad_uuid",
}
GOOD_JSON = {
    '{"uuid": "g1", "val": -9223372036854775808, "ts": "2026-01-01T12:00:00.25Z"}',
    '{"uuid": "g2", "val": "7", "ts": 1767268800500}',  # epoch ms, quoted integer
    '{"uuid": "g3", "val": 3, "ts": "2026-01-01T13:00:01+01:00"}',  # = 12:00:01 UTC
    '{"uuid": "g4", "val": 4, "ts": "2026-01-01 12:00:02"}',  # naive = UTC
    '{"uuid": "g5", "val": 5, "ts": "2026-01-01T12:03:00Z"}',  # exactly clock + max-future
}
BAD_CSV = {
    "c1,,2026-01-01T12:00:00Z": "missing_field",
    "c2,1,2,3": "malformed",
    "c3,x,2026-01-01T12:00:00Z": "bad_type",
    "c4,5,notatime": "bad_ts",
}


@pytest.mark.slow
def test_bad_lines_keep_raw_text_and_reason(spark, store_dsn, iconn, tmp_path):
    land = tmp_path / "landing"
    land.mkdir()
    write_lines(land, "mixed.jsonl", [*BAD_JSON, "", *GOOD_JSON])
    write_lines(land, "rows.csv", ["uuid,val,ts", *BAD_CSV, '"c,5",5,2026-01-01T12:00:03Z'])
    # a header with a byte-order mark, spaces and capitals is a header too; epoch ms in CSV
    write_lines(land, "more.CSV", ["\ufeff UUID , Val ,\tTS ", "v6,6,1767268804000"])
    ingest_once(spark, store_dsn, tmp_path, format="auto", max_files_per_trigger=10)
    dead = iconn.execute("SELECT source, raw, reason FROM slidewin.dead_letters").fetchall()
    want = {("mixed.jsonl", raw, why) for raw, why in BAD_JSON.items()}
    want |= {("rows.csv", raw, why) for raw, why in BAD_CSV.items()}
    assert set(dead) == want
    # the event time is kept where the ts parsed (future), and NULL where it did not
    times = dict(iconn.execute("SELECT raw, event_ts FROM slidewin.dead_letters").fetchall())
    assert times['{"uuid": "m7", "val": 1, "ts": "2026-01-01T12:03:00.001Z"}'] == datetime(
        2026, 1, 1, 12, 3, 0, 1000, tzinfo=UTC)
    assert times['{"uuid": "m5", "val": 1, "ts": "yesterday"}'] is None
    assert times["c4,5,notatime"] is None
    rows = {(u, v, ts) for u, v, ts in stored_rows(iconn)}
    secs = {u: (v, ts - T0) for u, v, ts in rows}
    assert secs == {
        "g1": (-9223372036854775808, timedelta(seconds=0.25)),
        "g2": (7, timedelta(seconds=0.5)),
        "g3": (3, timedelta(seconds=1)),
        "g4": (4, timedelta(seconds=2)),
        "g5": (5, timedelta(minutes=3)),
        "c,5": (5, timedelta(seconds=3)),
        "v6": (6, timedelta(seconds=4)),
    }
    assert stored_rollups(iconn) == truth_rollups(rows, 8)


@pytest.mark.slow
def test_parquet_rows_and_bad_parquet_rows(spark, store_dsn, iconn, tmp_path):
    land = tmp_path / "landing"
    land.mkdir()
    wide = "\u00e9" * 200  # 200 characters (the limit), 400 bytes
    table = pa.table(
        {
            "uuid": ["p1", "p2", None, "p1", wide, wide + "\u00e9", "nul\x00"],
            "val": pa.array([1, None, 3, 1, 2, 2, 2], pa.int64()),
            "ts": pa.array([T0] * 7, pa.timestamp("us", tz="UTC")),
        }
    )
    pq.write_table(table, land / ".tmp-part")
    os.replace(land / ".tmp-part", land / "batch.parquet")
    other_schema = pa.table({"uuid": ["q1"], "val": ["not a number"], "ts": ["noon"]})
    pq.write_table(other_schema, land / "alien.parquet")
    (land / "torn.parquet").write_bytes(b"PAR1 cut short")
    ingest_once(spark, store_dsn, tmp_path, format="parquet", max_files_per_trigger=5)
    assert stored_rows(iconn) == {("p1", 1, T0), (wide, 2, T0)}
    dead = iconn.execute(
        "SELECT source, reason, raw FROM slidewin.dead_letters WHERE source = 'batch.parquet'"
    )
    got = {(r, json.loads(raw).get("uuid")) for _, r, raw in dead}
    assert got == {
        ("missing_field", "p2"),
        ("missing_field", None),
        ("bad_uuid", wide + "\u00e9"),
        ("bad_uuid", "nul\x00"),
    }
    # another schema: read with its own, the row shown as JSON and validated like a JSON line
    alien = iconn.execute(
        "SELECT reason, raw FROM slidewin.dead_letters WHERE source = 'alien.parquet'"
    ).fetchall()
    assert alien == [("bad_type", '{"uuid":"q1","val":"not a number","ts":"noon"}')]
    torn = iconn.execute(
        "SELECT reason, raw, detail FROM slidewin.dead_letters WHERE source = 'torn.parquet'"
    ).fetchall()
    assert [(r, raw) for r, raw, _ in torn] == [("unreadable_file", str(land / "torn.parquet"))]
    assert "not a readable Parquet file" in torn[0][2]
    assert markers(iconn) == [(0, 9, 2, 1, 6)]


@pytest.mark.slow
def test_processed_files_are_archived_and_temp_files_ignored(spark, store_dsn, iconn, tmp_path):
    land = tmp_path / "landing"
    land.mkdir()
    done = write_jsonl(land, "done.jsonl", [event("k", 1, 0)])
    (land / ".half-written.jsonl").write_text(json.dumps(event("h", 1, 0)) + "\n")
    (land / "upload.jsonl.tmp").write_text(json.dumps(event("t", 1, 0)) + "\n")
    ingest_once(spark, store_dsn, tmp_path, processed="archive")
    assert {u for u, _, _ in stored_rows(iconn)} == {"k"}
    assert sorted(p.name for p in land.iterdir()) == [".half-written.jsonl", "upload.jsonl.tmp"]
    assert (tmp_path / "archive" / str(done).lstrip("/")).is_file()


@pytest.mark.slow
def test_two_landing_folders_in_one_data_dir_each_run_their_own_query(
    spark, store_dsn, iconn, tmp_path
):
    """A second landing folder, with no --query-id, met the first one's checkpoints and failed
    with "Wrong basePath"; each folder now gets a query id, and so checkpoints, of its own."""
    from slidewin.ingest.config import default_paths, query_id_for

    data = tmp_path / "data"
    for name in ("first", "second"):
        folder = tmp_path / name
        folder.mkdir()
        write_jsonl(folder, f"{name}.jsonl", [event(name, 1, 0)])
        query_id = query_id_for(data, folder, None)
        land, checkpoints, archive = default_paths(data, folder, query_id)
        config = IngestConfig(landing=land, checkpoint_dir=checkpoints, archive_dir=archive,
                              once=True, format="json", processed="keep", query_id=query_id)
        run(preflight(config, store_dsn), store_dsn, lambda _line: None, spark=spark,
            clock=lambda: NOW)
    assert {u for u, _, _ in stored_rows(iconn)} == {"first", "second"}
    markers = iconn.execute("SELECT query_id FROM slidewin.ingest_batches").fetchall()
    assert sorted(m.split("/")[0] for (m,) in markers) == sorted(
        query_id_for(data, tmp_path / n, None) for n in ("first", "second")
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("archive_for", "history", "kept"),
    [
        (timedelta(0), None, set()),  # deleted as soon as archived
        ("forever", None, {"old", "recent"}),
        (None, timedelta(minutes=30), {"recent"}),  # the store's history
        (None, None, {"recent"}),  # no history: an hour
    ],
)
def test_the_archive_keeps_files_for_archive_for(
    spark, store_dsn, iconn, tmp_path, archive_for, history, kept
):
    """The archive grew without bound (1.4 GB in 45 minutes): files are now deleted once their
    modification time is --archive-for old, on the ingest's (here pinned) clock."""
    from slidewin.ingest.config import FOREVER

    land = tmp_path / "landing"
    land.mkdir()
    ages = {"old": timedelta(hours=2), "recent": timedelta(minutes=10)}
    for name, age in ages.items():
        write_jsonl(land, f"{name}.jsonl", [event(name, 1, 0)], mtime=(NOW - age).timestamp())
    ingest_once(spark, store_dsn, tmp_path, processed="archive", history=history,
                archive_for=FOREVER if archive_for == "forever" else archive_for,
                grace=timedelta(seconds=5), max_files_per_trigger=10)
    assert {u for u, _, _ in stored_rows(iconn)} == {"old", "recent"}
    archived = tmp_path / "archive" / str(land).lstrip("/")
    assert {p.stem for p in archived.iterdir()} == kept
    assert list(land.iterdir()) == []


def test_pruning_is_bounded_and_stays_in_its_folder(tmp_path):
    from slidewin.ingest.archive import prune

    mine, other = tmp_path / "archive" / "land", tmp_path / "archive" / "other"
    for folder in (mine, other):
        folder.mkdir(parents=True)
        for i in range(5):
            path = folder / f"f{i}.jsonl"
            path.write_text("x\n")
            os.utime(path, ((NOW - timedelta(hours=i)).timestamp(),) * 2)
    assert prune(mine, timedelta(minutes=90), NOW, limit=2) == 2  # f2, f3, f4 are too old
    assert prune(mine, timedelta(minutes=90), NOW, limit=2) == 1
    assert sorted(p.name for p in mine.iterdir()) == ["f0.jsonl", "f1.jsonl"]
    assert len(list(other.iterdir())) == 5
    assert prune(tmp_path / "never-archived", timedelta(0), NOW) == 0


@pytest.mark.slow
def test_arrow_dedup_equals_the_spark_plan(spark):
    """batch.split (Arrow, what the sink uses) == parse.good_rows (a Spark groupBy)."""
    from slidewin.ingest import batch, parse

    lines = [json.dumps(event(f"k{i % 7}", i % 3, i % 5)) for i in range(60)]
    lines += ["garbage", json.dumps(event("k1", 99, 0))]
    df = spark.createDataFrame([(line, "x.jsonl") for line in lines], "raw string, source string")
    limits = parse.Limits(T0, None, timedelta(seconds=5), None, timedelta(minutes=1))
    classified = parse.classify(parse.parse_text(df), limits)
    arrow = batch.split(parse.batch_output(classified, 8).toArrow())
    spark_rows = {tuple(r.values()) for r in parse.good_rows(classified, 8).toArrow().to_pylist()}
    arrow_rows = {tuple(r.values()) for r in arrow.good.to_pylist()}
    assert len(arrow_rows) == 35 and arrow_rows == spark_rows
    assert arrow.bad.column("reason").to_pylist() == ["malformed"]


def test_file_chunks_group_small_files(tmp_path):
    from slidewin.ingest.stream import file_chunks

    sizes = {"s0": 10, "s1": 10, "t-big": 3000, "u-big": 3000, "v-small": 10}
    for name, size in sizes.items():
        (tmp_path / name).write_bytes(b"x" * size)
    paths = [str(tmp_path / n) for n in sizes]
    chunks = file_chunks(paths, target_bytes=1000)
    assert chunks == [paths[:3], [paths[3]], [paths[4]]]
    assert file_chunks([str(tmp_path / "gone")], target_bytes=1000) == [[str(tmp_path / "gone")]]


# ---------------------------------------------------------------- ingest.pull

SIZES = {"a": 5, "b": 50, "c": 20, "d": 35, "e": 0}  # Spark plans the largest file first


@pytest.fixture()
def one_file_per_partition(spark):
    """Count every file as a full partition, so these small files are not packed together."""
    with spark_conf(spark, {"spark.sql.files.openCostInBytes": str(64 * 2**20)}):
        yield


def write_files(folder, sizes=SIZES):
    paths = []
    for name, rows in sizes.items():
        table = pa.table(
            {
                "uuid": [f"{name}{i}" for i in range(rows)],
                "val": pa.array(range(rows), pa.int64()),
                "ts": pa.array(
                    [T0 + timedelta(seconds=i) for i in range(rows)], pa.timestamp("us", tz="UTC")
                ),
            }
        )
        path = folder / f"{name}.parquet"
        pq.write_table(table, path)
        paths.append(str(path))
    return paths


def test_partitions_come_one_per_file_in_path_order(spark, tmp_path, one_file_per_partition):
    from slidewin.ingest.parse import read_files
    from slidewin.ingest.pull import arrow_partitions, indexed_partitions, partition_order
    from slidewin.ingest.spark_internals import arrow_batch_rdd

    df = read_files(spark, "parquet", list(reversed(write_files(tmp_path))))
    files = arrow_batch_rdd(df).files
    assert len(files) == 5
    assert partition_order(files) != list(range(5))  # Spark's own order is not the files' order

    tables = list(arrow_partitions(df))
    sources = [t.column("source").unique().to_pylist() for t in tables]
    assert sources == [["a.parquet"], ["b.parquet"], ["c.parquet"], ["d.parquet"]]  # e: empty
    assert [t.num_rows for t in tables] == [5, 50, 20, 35]
    pulled = pa.concat_tables(tables).sort_by("uuid")
    assert pulled.equals(df.toArrow().sort_by("uuid"))
    # computed two and three at a time, every partition still comes, in the same order
    for ahead in (2, 3, 9):
        again = [t for _i, t in indexed_partitions(df, ahead=ahead)]
        assert [t.num_rows for t in again] == [5, 50, 20, 35], ahead


def test_a_batch_does_not_keep_the_partitions_it_pulled(spark, tmp_path, one_file_per_partition):
    """Spark files each job that carries an SQL execution's id under that execution, results
    included, until the execution ends -- and a micro-batch is one execution. The pull's jobs
    run outside it, so a batch over one large file does not hold every partition it pulled in
    the driver's heap until it commits (a 2.4 GB CSV file filled a 1 GB heap so)."""
    from slidewin.ingest.parse import read_files
    from slidewin.ingest.pull import indexed_partitions

    (tmp_path / "in").mkdir()
    df = read_files(spark, "parquet", write_files(tmp_path / "in"))
    scheduler = spark.sparkContext._jsc.sc().dagScheduler()
    seen: list[tuple[str | None, int, int]] = []

    def batch(_frame, _batch_id) -> None:
        filed = scheduler.jobIdToQueryExecutionId().size()
        pulled = sum(1 for _ in indexed_partitions(df, ahead=2))
        execution = spark.sparkContext.getLocalProperty("spark.sql.execution.id")
        seen.append((execution, pulled, scheduler.jobIdToQueryExecutionId().size() - filed))

    query = (spark.readStream.schema(df.schema).parquet(str(tmp_path / "in"))
             .writeStream.foreachBatch(batch).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    query.awaitTermination(120)
    [(execution, pulled, filed)] = seen
    assert execution is not None and pulled == 4  # in a batch's execution, 4 partitions pulled
    assert filed == 0  # none of their jobs (and results) kept under it


def test_spark_partials_are_the_aggregates_of_each_pulled_partition(
    spark, tmp_path, one_file_per_partition
):
    """``parse.partials`` (a second job over the same scan) gives, per Spark partition, the
    count/sum/min/max per (part, second) of exactly the valid rows ``ingest.pull`` pulls of
    that partition -- in-partition duplicates counted, bad rows left out, extreme values
    summed without overflow."""
    from slidewin.ingest import parse
    from slidewin.ingest.pull import indexed_partitions

    big = 2**63 - 1
    for name, vals in {"a": [big, big, 3, -4], "b": [5, 6, 7, -(2**63)], "c": [1, 2, 3, 4]}.items():
        rows = [(f"{name}{i % 3}", v, T0 + timedelta(milliseconds=400 * i))
                for i, v in enumerate(vals)]
        rows.append(rows[0])  # an in-batch duplicate
        table = pa.table({
            "uuid": [r[0] for r in rows] + [""],  # and a row missing its uuid
            "val": pa.array([r[1] for r in rows] + [1], pa.int64()),
            "ts": pa.array([r[2] for r in rows] + [T0], pa.timestamp("us", tz="UTC")),
        })
        pq.write_table(table, tmp_path / f"{name}.parquet")
    limits = parse.Limits(now=NOW, newest_before=None, grace=timedelta(hours=1), history=None,
                          max_future=timedelta(hours=1))
    steps = [*parse.parse_steps("parquet"), *parse.classify_steps("parquet", limits),
             *parse.output_steps("parquet", 4)]
    paths = sorted(str(p) for p in tmp_path.glob("*.parquet"))
    plan = parse.apply(parse.read_files(spark, "parquet", paths), steps)

    expected: dict[tuple, list[int]] = {}
    for pid, table in indexed_partitions(plan):
        for row in table.to_pylist():
            if row["reason"] is None:
                key = (pid, row["part"], row["ts"].replace(microsecond=0))
                expected.setdefault(key, []).append(row["val"])
    got = {
        (r["pid"], r["part"], r["sec"]): (r["n"], int(r["total"]), r["vmin"], r["vmax"])
        for r in parse.partials(plan).toArrow().to_pylist()
    }
    assert got == {k: (len(v), sum(v), min(v), max(v)) for k, v in expected.items()}
    assert len({k[0] for k in got}) == 3 and sum(n for n, *_ in got.values()) == 15


@pytest.mark.slow
def test_the_generated_code_does_not_change_with_the_batch_limits(spark, tmp_path):
    """Each batch classifies against new limits (clock, stream time), yet its plan compiles to
    the same Java code, which Spark then takes from its cache instead of compiling again."""
    import io

    from slidewin.ingest import parse

    path = write_jsonl(tmp_path, "a.jsonl", [event("u", 1, 0)])

    def generated_code(now: datetime) -> list[str]:
        limits = parse.Limits(now=now, newest_before=now - timedelta(seconds=9),
                              grace=timedelta(seconds=5), history=timedelta(minutes=1),
                              max_future=timedelta(minutes=1))
        steps = [*parse.parse_steps("text"), *parse.classify_steps("text", limits),
                 *parse.output_steps("text", 8)]
        plan = parse.apply(parse.read_files(spark, "text", [str(path)]), steps)
        shown = io.StringIO()
        with contextlib.redirect_stdout(shown):
            plan.explain("codegen")
        return [line for line in shown.getvalue().splitlines() if line.startswith("/* ")]

    first = generated_code(NOW)
    assert first and first == generated_code(NOW + timedelta(seconds=7.5))


def test_small_files_are_packed_into_one_partition(spark, tmp_path):
    """With slidewin's session settings a batch of small files is one partition (one chunk),
    not one per file (nor one per core)."""
    from slidewin.ingest.parse import read_files
    from slidewin.ingest.pull import arrow_partitions

    df = read_files(spark, "parquet", write_files(tmp_path, {"a": 5, "b": 50, "c": 20}))
    assert [t.num_rows for t in arrow_partitions(df)] == [75]


def test_a_file_spark_cannot_read_fails_the_pull(spark, tmp_path, one_file_per_partition):
    from slidewin.ingest.parse import read_files
    from slidewin.ingest.pull import arrow_partitions
    from slidewin.ingest.stream import SPARK_ERRORS

    paths = write_files(tmp_path, {"a": 3, "b": 4})
    alien = tmp_path / "c.parquet"
    pq.write_table(pa.table({"uuid": ["x"], "val": ["not a number"], "ts": ["noon"]}), alien)
    pulled = arrow_partitions(read_files(spark, "parquet", [*paths, str(alien)]))
    assert next(pulled).num_rows == 3
    with pytest.raises(SPARK_ERRORS):
        list(pulled)


@pytest.mark.parametrize("rollups", ["driver", "spark"])
def test_the_handler_pulls_a_batch_once_per_partition(
    spark, store_dsn, iconn, tmp_path, monkeypatch, one_file_per_partition, rollups
):
    """A healthy batch goes through ingest.pull (one plan), not the file-by-file path; the
    rollups' partials come from the driver (the default) or a second Spark job."""
    from slidewin.ingest import stream

    land = tmp_path / "landing"
    land.mkdir()
    write_files(land)
    pulled, by_file = [], []
    real_pull, real_collect = stream.indexed_partitions, stream.BatchHandler._collect_files

    def spy_pull(df):
        for pid, table in real_pull(df):
            pulled.append(table.num_rows)
            yield pid, table

    def spy_collect(self, *args):
        by_file.append(args)
        return real_collect(self, *args)

    monkeypatch.setattr(stream, "indexed_partitions", spy_pull)
    monkeypatch.setattr(stream.BatchHandler, "_collect_files", spy_collect)
    results = []
    ingest_once(
        spark, store_dsn, tmp_path, format="parquet", max_files_per_trigger=10, rollups=rollups,
        on_batch=lambda _stream, result: results.append(result),
    )
    assert pulled == [5, 50, 20, 35] and by_file == []
    assert len(stored_rows(iconn)) == 110
    # no duplicate anywhere: every row's rollups came from the partials, not the triggers
    assert [r.spark_rollups for r in results] == [110]
    assert_rollups_exact(iconn)


def test_rollups_by_the_database_leave_spark_out_of_them(spark, store_dsn, iconn, tmp_path):
    """``--rollups database``: no partials job, every row's rollups from the triggers, just as
    exact."""
    land = tmp_path / "landing"
    land.mkdir()
    write_files(land)
    results = []
    ingest_once(
        spark, store_dsn, tmp_path, format="parquet", rollups="database", max_files_per_trigger=10,
        on_batch=lambda _stream, result: results.append(result),
    )
    assert [(r.accepted, r.spark_rollups) for r in results] == [(110, 0)]
    assert_rollups_exact(iconn)


@pytest.mark.slow
def test_split_text_files_are_written_in_file_and_line_order(spark, store_dsn, iconn, tmp_path):
    """Files split into several partitions: every line is read once, and a key repeated in a
    later file loses to its first occurrence (the last lines of the first file, which Spark
    itself would plan after the second file's first split)."""
    land = tmp_path / "landing"
    land.mkdir()
    first = [event(f"u{i}", i, i) for i in range(50)] + [event("dup", 900, 7)]
    second = [event("dup", 1, 7)] + [event(f"v{i}", i, i) for i in range(30)]
    files = files_in_order(land, [first, second])
    assert files[0].stat().st_size > 5 * 512 and files[1].stat().st_size > 3 * 512
    tiny = {"spark.sql.files.maxPartitionBytes": "512", "spark.sql.files.openCostInBytes": "1"}
    with spark_conf(spark, tiny):
        ingest_once(spark, store_dsn, tmp_path, max_files_per_trigger=10)
    truth = truth_from_jsonl(files)
    assert ("dup", 900, T0 + timedelta(seconds=7)) in truth
    assert stored_rows(iconn) == truth
    assert stored_rollups(iconn) == truth_rollups(truth, 8)
    assert markers(iconn) == [(0, 82, 81, 1, 0)]


@pytest.mark.slow
def test_one_watermark_per_stream_whatever_the_ingest_or_its_grace(
    spark, store_dsn, iconn, tmp_path
):
    """Two ingests of the one stream -- JSON Lines from one landing directory with grace 5 s,
    Parquet from another with grace 60 s, each its own query id -- share the stream's state:
    once the first has made [80, 90) final (watermark 95), an event at 85 that the second's
    own grace would admit is late, and the final window never changes.

        t(s)   80      85      90   95  100
               [ window   ]         |wm |newest (first ingest, grace 5 s)
                       x  <- Parquet, second ingest, grace 60 s: late, not stored
    """
    first, second = tmp_path / "a", tmp_path / "b"
    (first / "landing").mkdir(parents=True)
    (second / "landing").mkdir(parents=True)
    write_jsonl(first / "landing", "a.jsonl", [event("k", 1, 82), event("k", 2, 100)])
    ingest_once(spark, store_dsn, first, grace=timedelta(seconds=5), query_id="first")
    [before] = windows.tumbling(iconn, timedelta(seconds=10), at(80), at(90))
    assert (before.n, before.final) == (1, True)
    pq.write_table(
        pa.table({"uuid": ["k"], "val": pa.array([3], pa.int64()),
                  "ts": pa.array([at(85)], pa.timestamp("us", tz="UTC"))}),
        second / "landing" / "b.parquet",
    )
    ingest_once(spark, store_dsn, second, grace=timedelta(seconds=60), query_id="second",
                format="parquet")
    [after] = windows.tumbling(iconn, timedelta(seconds=10), at(80), at(90))
    assert after == before
    late = iconn.execute(
        "SELECT event_ts FROM slidewin.dead_letters WHERE reason = 'late'").fetchall()
    assert late == [(at(85),)]
    states = iconn.execute("SELECT stream, newest_ts, watermark FROM slidewin.stream_state")
    assert states.fetchall() == [("events", at(100), at(95))]
