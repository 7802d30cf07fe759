"""``slidewin bench peers``: slidewin's ingest against the same ingest written by hand in plain
PySpark Structured Streaming, same files, same machine, same run.

Data: ``events`` events (``client.bench.ingest.make_events``: 10,000 a second of event time,
ending 5 minutes ago) in landing files of ``rows_per_file`` events (Parquet by default, as
``slidewin bench ingest``). Each run reads its own copy of them.

slidewin: the code path of ``slidewin ingest --once`` (``client.bench.ingest.end_to_end``) into
a fresh store: raw rows in their partitions, per-partition per-second rollups, exactly once.

The peer, as a competent user would write it: ``spark.readStream`` of the same files with the
same schema and ``maxFilesPerTrigger``, trigger availableNow (as ``--once``), ``foreachBatch``
that, in one transaction: claims the batch id in a batch table (a batch already committed is
skipped: exactly once across restarts), COPYs the raw rows (uuid, val, ts) into a plain table
(psycopg, CSV from Arrow) and upserts the batch's per-second count / sum / min / max, grouped
by the second in Spark, into a per-second table (INSERT ... ON CONFLICT DO UPDATE merging
them). The batch is persisted for its two uses, as Spark's guide advises for foreachBatch
writing twice. No JDBC: no driver jar can be fetched here, and COPY is faster anyway.

Both sides share one SparkSession (slidewin's settings: master, shuffle partitions, file
packing, GC) so neither pays a colder JVM; each gets a warm-up run over the first files first
(not counted), then they run alternately, slidewin first, ``runs`` times each, every run in a
fresh database on the same server; medians are reported. Seconds run from the query's start
to its last commit on both sides.

Checked after every run: the peer's per-second table and raw row count equal slidewin's
rollups summed over the partitions per second and its raw row count (``results_match``), and
both equal the per-second aggregates of the generated events (``matches_generator``).

``--stream wide``: the same over the declared benchmark stream of 8 typed columns
(client/bench/streams.py), 10,000 rows a second of event time, its files in ``<landing>/wide/``;
slidewin stores it in a store that declares it, the peer reads them with the stream's schema
into a plain table of its columns, and both sides' seconds are the count of rows and the sum,
min and max of its measure ``temp``. slidewin sums a double exactly (the decimal of each
value), the peer as Spark does (in floating point, in its own order): a double's sum matches
to 1e-9 of itself, every other figure exactly.

Benchmarks report, they do not assert.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
from psycopg import sql

from slidewin.client.bench.ingest import (
    BenchOptions,
    copy_landing,
    end_to_end,
    ingest_config,
    make_events,
    write_landing,
)
from slidewin.client.bench.stats import median
from slidewin.client.bench.streams import BenchStream, bench_stream, make_wide
from slidewin.db.scratch import scratch_database
from slidewin.ingest.config import DEFAULT_MAX_FILES
from slidewin.ingest.typed_arrow import csv_bytes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SIDES = ("slidewin", "peer")
RAW, SECONDS, BATCHES = "peer_events", "peer_seconds", "peer_batches"
SPARK_SCHEMA = "uuid string, val long, ts timestamp"
PER_SECOND = 10_000  # events per second of event time, as `slidewin bench ingest`
WARMUP_FILES = 2
TARGET = ">= 2.0"
# second -> (count, sum, min, max) of the stream's measure (val for the built-in stream)
Seconds = dict[datetime, tuple[Any, ...]]
# the peer's Spark types of a declared stream's columns
SPARK_TYPES = {"text": "string", "timestamptz": "timestamp", "double precision": "double",
               "bigint": "long", "boolean": "boolean"}
BUILT_IN = bench_stream("events")


@dataclass(frozen=True)
class PeersOptions:
    events: int = 2_000_000
    runs: int = 3
    format: str = "parquet"
    rows_per_file: int = 200_000
    max_files_per_trigger: int = DEFAULT_MAX_FILES
    master: str = "local[2]"
    partitions: int = 8
    work_dir: Path | None = None  # where the generated files go (default: the temp directory)
    keep: bool = False  # keep the last run's databases and the generated files
    stream: str = "events"

    def bench(self) -> BenchOptions:
        """The ingest benchmark's options these runs share (files, batches, Spark)."""
        return BenchOptions(events=self.events, format=self.format,
                            rows_per_file=self.rows_per_file,
                            max_files_per_trigger=self.max_files_per_trigger, master=self.master,
                            partitions=self.partitions)


# ---------------------------------------------------------------- the answers


def generated_seconds(events: pa.Table, target: BenchStream = BUILT_IN) -> Seconds:
    """The per-second aggregates of the generated events, with Arrow (no Spark, no database)."""
    keyed = pa.table({"sec": pc.floor_temporal(events[target.time], unit="second"),
                      "val": events[target.measure]})
    grouped = keyed.group_by("sec", use_threads=False).aggregate(
        [("val", "count"), ("val", "sum"), ("val", "min"), ("val", "max")])
    return {row["sec"]: (row["val_count"], row["val_sum"], row["val_min"], row["val_max"])
            for row in grouped.to_pylist()}


def _seconds(conn: psycopg.Connection, query: sql.SQL | sql.Composed) -> Seconds:
    def number(x: Any) -> Any:
        return x if isinstance(x, float) or x is None else int(x) if x == int(x) else float(x)

    return {sec.astimezone(UTC): (int(n), number(total), number(vmin), number(vmax))
            for sec, n, total, vmin, vmax in conn.execute(query).fetchall()}


def slidewin_seconds(conn: psycopg.Connection, target: BenchStream = BUILT_IN) -> Seconds:
    """slidewin's per-second rollups summed over the partitions (a declared stream's: one row
    a second already)."""
    if target.declared:
        m = target.measure
        return _seconds(conn, sql.SQL("SELECT sec, n, {}, {}, {} FROM {}").format(
            sql.Identifier(f"{m}_sum"), sql.Identifier(f"{m}_min"), sql.Identifier(f"{m}_max"),
            sql.Identifier("slidewin_rollups", target.name)))
    return _seconds(conn, sql.SQL("SELECT sec, sum(n), sum(total), min(vmin), max(vmax) "
                                  "FROM slidewin.rollups GROUP BY sec"))


def peer_seconds(conn: psycopg.Connection) -> Seconds:
    """The peer's per-second table."""
    return _seconds(conn, sql.SQL("SELECT sec, n, total, vmin, vmax FROM {}")
                    .format(sql.Identifier(SECONDS)))


def same_second(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Two seconds' figures equal: integers exactly, a double's to 1e-9 of itself (slidewin
    sums doubles exactly, a peer in floating point)."""
    return len(a) == len(b) and all(
        x == y if isinstance(x, int) and isinstance(y, int)
        else math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-9)
        for x, y in zip(a, b, strict=True))


def count_rows(conn: psycopg.Connection, table: sql.Composable) -> int:
    row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
    return int(row[0]) if row else 0


def compare(reference: Seconds, other: Seconds, reference_rows: int, other_rows: int
            ) -> dict[str, Any]:
    """``other`` against ``reference``: ``match`` when every second and the raw row counts are
    equal; else how many seconds are missing, extra or differ."""
    common = reference.keys() & other.keys()
    out = {"missing": len(reference.keys() - other.keys()),
           "extra": len(other.keys() - reference.keys()),
           "differ": sum(not same_second(reference[s], other[s]) for s in common),
           "rows": other_rows, "reference_rows": reference_rows}
    out["match"] = (out["missing"] == out["extra"] == out["differ"] == 0
                    and reference_rows == other_rows)
    return out


# ---------------------------------------------------------------- the peer


def _columns(target: BenchStream) -> list[tuple[str, str]]:
    """(name, type) of the stream's columns, in its files' order."""
    if target.declared:
        return [(c.name, c.type) for c in target.columns]
    return [("uuid", "text"), ("val", "bigint"), ("ts", "timestamptz")]


def spark_schema(target: BenchStream) -> str:
    """The peer's schema of the stream's files (Spark's DDL)."""
    if not target.declared:
        return SPARK_SCHEMA
    return ", ".join(f"`{name}` {SPARK_TYPES.get(type_, type_)}"
                     for name, type_ in _columns(target))


def create_peer_tables(conn: psycopg.Connection, target: BenchStream = BUILT_IN) -> None:
    """The peer's tables: raw rows (plain: no key, no index), per-second aggregates of the
    measure keyed by the second, and the committed batch ids."""
    cols = _columns(target)
    raw = sql.SQL(", ").join(sql.SQL("{} {} NOT NULL").format(sql.Identifier(n), sql.SQL(t))
                             for n, t in cols)
    conn.execute(sql.SQL("CREATE TABLE {} ({})").format(sql.Identifier(RAW), raw))
    kind = sql.SQL(dict(cols)[target.measure])
    conn.execute(sql.SQL("CREATE TABLE {} (sec timestamptz PRIMARY KEY, n bigint NOT NULL, "
                         "total numeric NOT NULL, vmin {} NOT NULL, vmax {} NOT NULL)")
                 .format(sql.Identifier(SECONDS), kind, kind))
    conn.execute(sql.SQL("CREATE TABLE {} (batch_id bigint PRIMARY KEY, "
                         "committed_at timestamptz NOT NULL DEFAULT now())")
                 .format(sql.Identifier(BATCHES)))


CLAIM = sql.SQL("INSERT INTO {} (batch_id) VALUES (%s) ON CONFLICT DO NOTHING").format(
    sql.Identifier(BATCHES))
UPSERT = sql.SQL(
    "INSERT INTO {t} (sec, n, total, vmin, vmax) VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (sec) DO UPDATE SET n = {t}.n + excluded.n, total = {t}.total + excluded.total, "
    "vmin = least({t}.vmin, excluded.vmin), vmax = greatest({t}.vmax, excluded.vmax)"
).format(t=sql.Identifier(SECONDS))


def claim(conn: psycopg.Connection, batch_id: int) -> bool:
    """Record ``batch_id`` in the open transaction; False when it was committed before."""
    with conn.cursor() as cur:
        cur.execute(CLAIM, (batch_id,))
        return cur.rowcount == 1


def write_peer_batch(conn: psycopg.Connection, rows: pa.Table,
                     seconds: Sequence[tuple[Any, ...]], target: BenchStream = BUILT_IN
                     ) -> None:
    """The batch's raw rows by COPY and its per-second aggregates merged into the per-second
    table, in the caller's transaction."""
    names = [n for n, _ in _columns(target)]
    copy_sql = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(
        sql.Identifier(RAW), sql.SQL(", ").join(sql.Identifier(n) for n in names))
    with conn.cursor() as cur:
        if rows.num_rows:
            with cur.copy(copy_sql) as copy:
                copy.write(csv_bytes(rows.select(names)))
        if seconds:
            cur.executemany(UPSERT, seconds)


def plain_spark_ingest(spark: SparkSession, land: Path, checkpoint: Path, dsn: str,
                       opts: PeersOptions) -> float:
    """The ingest written by hand in plain Spark (see the module doc) from ``land`` into the
    peer's tables of ``dsn``; the seconds from the query's start to its end."""
    from pyspark.sql import functions as F

    target = bench_stream(opts.stream)
    m, t = target.measure, target.time
    reader = (spark.readStream.schema(spark_schema(target))
              .option("maxFilesPerTrigger", opts.max_files_per_trigger))
    if opts.format == "csv":
        reader = reader.option("header", True)
    events = reader.format(opts.format).load(str(land))
    with psycopg.connect(dsn, autocommit=True) as conn:
        create_peer_tables(conn, target)

        def write(batch: DataFrame, batch_id: int) -> None:
            with conn.transaction():
                if not claim(conn, batch_id):
                    return  # committed before a restart: exactly once
                batch.persist()
                try:
                    rows = batch.toArrow()
                    per_second = (batch.groupBy(F.date_trunc("second", t).alias("sec"))
                                  .agg(F.count("*").alias("n"), F.sum(m).alias("total"),
                                       F.min(m).alias("vmin"), F.max(m).alias("vmax"))
                                  .toArrow())  # Arrow keeps the times in UTC; collect() not
                finally:
                    batch.unpersist()
                seconds = [(r["sec"], r["n"], r["total"], r["vmin"], r["vmax"])
                           for r in per_second.to_pylist()]
                write_peer_batch(conn, rows, seconds, target)

        started = time.perf_counter()
        query = (events.writeStream.foreachBatch(write)
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        return time.perf_counter() - started


# ---------------------------------------------------------------- the runs


@dataclass
class _Run:
    seconds: float
    answer: Seconds
    rows: int
    batches: int


def _slidewin(spark: SparkSession, admin: str, work: Path, land: str, opts: PeersOptions,
              keep: bool, progress: Callable[[str], None]) -> _Run:
    """One ``slidewin ingest --once`` run over ``work / land`` into a fresh store."""
    target = bench_stream(opts.stream)
    with scratch_database(admin, partitions=opts.partitions, keep=keep,
                          progress=progress if keep else lambda _m: None) as store:
        with psycopg.connect(store, autocommit=True) as conn:
            target.declare(conn)
        config = ingest_config(work, land, opts.bench(), once=True)
        result = end_to_end(spark, store, config, lambda _line: None)
        with psycopg.connect(store, autocommit=True) as conn:
            return _Run(float(result["ingest_seconds"]), slidewin_seconds(conn, target),
                        count_rows(conn, target.table), int(result["ingest_batches"]))


def _peer(spark: SparkSession, admin: str, work: Path, land: str, opts: PeersOptions,
          keep: bool, progress: Callable[[str], None]) -> _Run:
    """One run of the plain Spark peer over ``work / land`` into a fresh database."""
    with scratch_database(admin, keep=keep,
                          progress=progress if keep else lambda _m: None) as target:
        files = bench_stream(opts.stream).landing(work / land)
        took = plain_spark_ingest(spark, files, work / f"{land}-checkpoint", target, opts)
        if not keep:  # Spark leaves the files it read: room for the next run's copy
            shutil.rmtree(work / land, ignore_errors=True)
        with psycopg.connect(target, autocommit=True) as conn:
            return _Run(took, peer_seconds(conn), count_rows(conn, sql.Identifier(RAW)),
                        count_rows(conn, sql.Identifier(BATCHES)))


def run_bench(admin: str, opts: PeersOptions, progress: Callable[[str], None]
              ) -> dict[str, Any]:
    """Generate, warm both sides up, run them alternately, check them; the report."""
    from slidewin.ingest.java import check_java
    from slidewin.ingest.spark import build_session, stop_session

    check_java()
    target = bench_stream(opts.stream)
    work = Path(tempfile.mkdtemp(prefix="slidewin-bench-peers-", dir=opts.work_dir))
    generated = target.landing(work / "landing")

    def copy(name: str, files: int | None = None) -> str:
        copy_landing(generated, target.landing(work / name), files)
        return name

    try:
        progress(f"generating {opts.events:,} events of {opts.stream} as {opts.format} files "
                 f"in {work}")
        end = datetime.now(UTC) - timedelta(minutes=5)
        events = (make_wide(opts.events, end, PER_SECOND) if target.declared
                  else make_events(opts.events, end, PER_SECOND))
        write_landing(events, generated, opts.bench())
        expected = generated_seconds(events, target)
        del events
        files = len(list(generated.iterdir()))
        sides = {"slidewin": _slidewin, "peer": _peer}
        runs: dict[str, list[_Run]] = {side: [] for side in SIDES}
        spark = build_session(opts.master)
        try:
            warm: dict[str, float] = {}
            for side in SIDES:
                progress(f"warming up: {side} over the first {min(WARMUP_FILES, files)} files "
                         "(not counted)")
                land = copy(f"warm-{side}", WARMUP_FILES)
                warm[side] = sides[side](spark, admin, work, land, opts, False, progress).seconds
            for r in range(opts.runs):
                for side in SIDES:
                    land = copy(f"{side}-{r}")
                    last = opts.keep and r == opts.runs - 1
                    runs[side].append(sides[side](spark, admin, work, land, opts, last,
                                                  progress))
                progress(f"run {r + 1}/{opts.runs}: " + ", ".join(
                    f"{side} {runs[side][-1].seconds:.2f} s" for side in SIDES))
        finally:
            stop_session(spark)
        return _report(opts, files, expected, runs, warm)
    finally:
        if opts.keep:
            progress(f"kept the generated files in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _report(opts: PeersOptions, files: int, expected: Seconds, runs: dict[str, list[_Run]],
            warm: dict[str, float]) -> dict[str, Any]:
    reference = runs["slidewin"][0]
    peers = [compare(reference.answer, run.answer, reference.rows, run.rows)
             for run in runs["peer"]]
    generator = [compare(expected, run.answer, opts.events, run.rows)
                 for side in SIDES for run in runs[side]]
    med = {side: median(run.seconds for run in runs[side]) for side in SIDES}
    last = peers[-1]
    return {
        "stream": opts.stream,
        "events": opts.events, "runs": opts.runs, "format": opts.format, "master": opts.master,
        "rows_per_file": opts.rows_per_file, "files": files,
        "max_files_per_trigger": opts.max_files_per_trigger, "trigger": "availableNow",
        "batches": {side: runs[side][-1].batches for side in SIDES},
        "slidewin_seconds": round(med["slidewin"], 2), "peer_seconds": round(med["peer"], 2),
        "slidewin_events_per_s": round(opts.events / med["slidewin"]),
        "peer_events_per_s": round(opts.events / med["peer"]),
        "speedup_vs_plain_spark": round(med["peer"] / med["slidewin"], 3),
        "seconds_per_run": {side: [round(run.seconds, 2) for run in runs[side]]
                            for side in SIDES},
        "warmup_seconds": {side: round(s, 2) for side, s in warm.items()},
        "results_match": all(p["match"] for p in peers),
        "results_match_runs": [p["match"] for p in peers],
        "matches_generator": all(g["match"] for g in generator),
        "seconds_compared": len(reference.answer),
        "slidewin_rows": reference.rows, "peer_rows": last["rows"],
        "peer_seconds_missing": last["missing"], "peer_seconds_extra": last["extra"],
        "peer_seconds_differ": last["differ"],
        "target": {"speedup_vs_plain_spark": TARGET},
        "notes": NOTES,
    }


NOTES = [
    "seconds: from the query's start to its last commit; slidewin through slidewin ingest "
    "--once's code path, the peer through its own availableNow query; medians of the runs, "
    "measured alternately (slidewin, peer, slidewin, peer, ...) after one warm-up run each",
    "both share one SparkSession with slidewin's Spark settings (master, shuffle partitions, "
    "file packing, GC), the same files, schema and maxFilesPerTrigger",
    "peer: foreachBatch, one transaction per batch: batch id claimed in a batch table (a "
    "committed batch is skipped), COPY of the raw rows into a plain table without key or "
    "index, per-second count/sum/min/max grouped in Spark and upserted (ON CONFLICT DO UPDATE)",
    "slidewin does more per event than the peer: hash partitions with a primary key, rollups "
    "per partition and second, dedup, event-time rules, dead letters, stream state",
    "results_match: the peer's per-second table equals slidewin's rollups summed over the "
    "partitions, and its raw row count slidewin's, after every peer run; matches_generator: "
    "every run of both sides equals the generated events' per-second aggregates",
]
