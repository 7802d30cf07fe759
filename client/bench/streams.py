"""``slidewin bench ingest --stream wide``: a declared stream of 8 typed columns against the
built-in stream, side by side in one run.

(a) ``wide_copy_limit_rows_per_s`` -- the database's limit for the same rows: COPY straight into
    ``slidewin_streams.wide`` (its statement triggers keep the rollups of its two double
    measures), one transaction per file's rows, no Spark; ``wide_plain_copy_rows_per_s`` -- a
    plain binary COPY of the same rows into a table of the same columns and primary key, with
    no partitions and no triggers (``wide_vs_plain_copy`` = (b) / it);
(b) ``wide_ingest_events_per_s`` -- end to end through ``slidewin ingest --once``'s code path
    reading ``<landing>/wide/``; ``wide_ratio`` = (b) / (a);
(c) ``events_ratio`` -- the same two measures for the built-in stream and as many events
    (``client.bench.ingest``), so ``wide_vs_events`` = wide_ratio / events_ratio compares the
    two in one sitting (the target: at least 0.9);
(d) ``three_streams_*`` -- three declared streams of the same shape, a third of the events
    each, ingested by one ``slidewin ingest --once`` at once and then one stream at a time;
    ``three_streams_at_once_vs_alone`` = at once / one at a time (target: at least 0.85).

Every phase gets a fresh database. Benchmarks report, they do not assert.
"""

from __future__ import annotations

import io
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from psycopg import sql

from slidewin.client.bench.ingest import (
    FILE_EXT,
    BenchOptions,
    _iso,
    copy_limit,
    end_to_end,
    ingest_config,
    make_events,
    with_partitions,
    write_landing,
)
from slidewin.db import streams
from slidewin.db.errors import ConfigError
from slidewin.db.scratch import scratch_database
from slidewin.db.streams import Column, Stream

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

WIDE_COLUMNS = (
    Column("device", "text"), Column("ts", "timestamptz"), Column("temp", "double precision"),
    Column("pressure", "double precision"), Column("amount", "numeric(12,2)"),
    Column("count", "bigint", required=True), Column("label", "text"), Column("ok", "boolean"),
)
WIDE_MEASURES = ("temp", "pressure")
KEYS = 1000


@dataclass(frozen=True)
class BenchStream:
    """A stream the benchmarks run over (``--stream``): the built-in ``events``, or a declared
    benchmark stream -- what a benchmark needs of it in one place: its key and time columns,
    the measure its per-key questions read, its declaration in a fresh store, its rows for
    given keys and times, where the ingest reads its files and the table they land in."""

    name: str
    key: str
    measure: str
    # the stream's rows for these keys and times (a key once per time), the other columns drawn
    # from the generator
    make_rows: Callable[[pa.Array, pa.Array, np.random.Generator], pa.Table]
    columns: tuple[Column, ...] = ()  # none: the built-in stream, whose shape is fixed
    measures: tuple[str, ...] = ()
    time: str = "ts"
    key_prefix: str = "key-"  # of the keys ``spread`` draws: <prefix><0 .. KEYS - 1>
    # what a session window over it sums (a required integer column): None, the stream's own
    # default (val for the built-in stream)
    session_measure: str | None = None

    @property
    def declared(self) -> bool:
        return bool(self.columns)

    def declare(self, conn: psycopg.Connection, name: str | None = None, *,
                grace: timedelta = timedelta(hours=1), history: timedelta | None = None,
                max_rows: int | None = None, partitions: int = 4) -> None:
        """Declare the stream (as ``name``: several of the same shape) in a fresh store, with
        the retention given; the built-in stream is there already."""
        if self.declared:
            streams.define(conn, name or self.name, key=self.key, time=self.time,
                           columns=self.columns, measures=self.measures, grace=grace,
                           history=history, max_rows=max_rows, partitions=partitions)

    def as_stream(self) -> Stream:
        """The declared stream as the store describes it (what ``slidewin client --stream``'s
        generator and reporter take)."""
        return Stream(self.name, self.key, self.time, self.columns, self.measures)

    def spread(self, count: int, start_us: int, span_us: int, seed: int) -> pa.Table:
        """``count`` rows at random times in ``[start_us, start_us + span_us)`` (microseconds
        since the epoch), in time order, keys taken in turn from a pool of KEYS."""
        rng = np.random.default_rng(seed)
        ts_us = start_us + np.sort(rng.integers(0, span_us, count))
        keys = np.char.add(self.key_prefix, (np.arange(count) % KEYS).astype(str))
        return self.make_rows(pa.array(keys), pa.array(ts_us, pa.timestamp("us", tz="UTC")), rng)

    def copy_input(self, table: pa.Table, partitions: int) -> pa.Table:
        """``table`` as ``copy_rate`` takes it (the built-in stream's rows with their
        partition), made before any clock starts."""
        return table if self.declared else with_partitions(table, partitions)

    def copy_rate(self, dsn: str, rows: pa.Table, rows_per_file: int) -> float:
        """Rows/s of the stream's COPY of ``copy_input``'s rows without Spark, one transaction
        per file's rows: the database's own cost of what the store keeps for the stream."""
        if self.declared:
            return copy_limit_wide(dsn, rows, rows_per_file, self.name)
        return copy_limit(dsn, rows, rows_per_file)

    def landing(self, root: Path) -> Path:
        """Where ``slidewin ingest`` over the landing folder ``root`` reads the stream's files."""
        return root / self.name if self.declared else root

    @property
    def table(self) -> sql.Composed:
        """The table the stream's rows land in."""
        if not self.declared:
            return sql.SQL("slidewin.events").format()
        return sql.SQL("{}.{}").format(sql.Identifier("slidewin_streams"),
                                        sql.Identifier(self.name))


def _events_rows(keys: pa.Array, ts: pa.Array, rng: np.random.Generator) -> pa.Table:
    val = rng.integers(-1_000_000, 1_000_000, len(keys))
    return pa.table({"uuid": keys, "val": pa.array(val, pa.int64()), "ts": ts})


def _wide_rows(device: pa.Array, ts: pa.Array, rng: np.random.Generator) -> pa.Table:
    count = len(device)
    labels = np.array(["idle", "run", "warn", "stop"])
    return pa.table({
        "device": device,
        "ts": once_per_key(device, ts),
        "temp": pa.array(20 + rng.normal(0, 5, count)),
        "pressure": pa.array(1000 + rng.normal(0, 30, count)),
        "amount": _amounts(rng, count),
        "count": pa.array(rng.integers(0, 10**12, count)),
        "label": pa.array(labels[rng.integers(0, 4, count)]),
        "ok": pa.array(rng.random(count) < 0.9),
    })


def once_per_key(key: pa.Array, ts: pa.Array) -> pa.Array:
    """``ts`` with a (key, time) drawn twice moved on by 1 µs until each is once: a declared
    stream's table holds a (time, key) once, and a COPY holding one twice fails whole."""
    us = pc.cast(ts, pa.int64()).to_numpy().copy()
    if isinstance(key, pa.ChunkedArray):  # pa.array of millions of strings comes in chunks
        key = key.combine_chunks()
    codes = pc.dictionary_encode(key).indices.to_numpy()
    moved = False
    while True:
        order = np.lexsort((us, codes))
        twice = (np.diff(codes[order]) == 0) & (np.diff(us[order]) == 0)
        if not twice.any():
            return pa.array(us, ts.type) if moved else ts
        us[order[1:][twice]] += 1
        moved = True


WIDE = BenchStream("wide", key="device", measure="temp", make_rows=_wide_rows,
                   columns=WIDE_COLUMNS, measures=WIDE_MEASURES, key_prefix="dev-",
                   session_measure="count")
BENCH_STREAMS = {s.name: s for s in (
    BenchStream("events", key="uuid", measure="val", make_rows=_events_rows), WIDE)}


def bench_stream(name: str) -> BenchStream:
    """The benchmark stream ``name``, or ConfigError naming --stream and the choices."""
    try:
        return BENCH_STREAMS[name]
    except KeyError:
        raise ConfigError(f"--stream {name!r} is not a benchmark stream; use one of "
                          f"{', '.join(BENCH_STREAMS)}") from None


def make_wide(count: int, end: datetime, per_second: int, seed: int = 11) -> pa.Table:
    """``count`` events of the wide stream, ``per_second`` per second of event time ending at
    ``end``, keys from a pool of KEYS devices (each (device, ts) once)."""
    start_us = int((end.timestamp() - count / per_second) * 1_000_000)
    return WIDE.spread(count, start_us, int(count / per_second * 1_000_000), seed)


def _amounts(rng: np.random.Generator, count: int) -> pa.Array:
    cents = rng.integers(-10**8, 10**8, count)
    return pa.array([f"{c / 100:.2f}" for c in cents.tolist()]).cast(pa.decimal128(12, 2))


def copy_limit_wide(dsn: str, table: pa.Table, rows_per_file: int, name: str = "wide") -> float:
    """Rows/s of COPY (CSV made by Arrow beforehand) into the declared stream ``name``'s table,
    one transaction per file's rows, the rollup triggers (and any session window's) running:
    the fastest way in."""
    chunks = []
    for offset in range(0, table.num_rows, rows_per_file):
        buf = io.BytesIO()
        pacsv.write_csv(table.slice(offset, rows_per_file), buf,
                        pacsv.WriteOptions(include_header=False))
        chunks.append(buf.getvalue())
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in table.column_names)
    target = sql.Identifier("slidewin_streams", name)
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        for data in chunks:
            with conn.transaction(), conn.cursor() as cur, cur.copy(
                sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(target, cols)
            ) as copy:
                copy.write(data)
    return table.num_rows / (time.perf_counter() - started)


def plain_copy_limit(dsn: str, table: pa.Table, rows_per_file: int) -> float:
    """Rows/s of a plain binary COPY of the same rows into a table with the same columns and
    primary key and nothing else -- no partitions, no triggers: what PostgreSQL takes at most.
    The binary payloads are made by PostgreSQL itself beforehand (untimed), one per file's
    rows, and each is COPYed in a transaction of its own."""
    cols = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c.name), sql.SQL(c.type))
                              for c in WIDE_COLUMNS)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE plain_wide ({}, PRIMARY KEY (ts, device))").format(cols))
        conn.execute("CREATE TABLE plain_source (LIKE plain_wide)")
        with conn.cursor() as cur, cur.copy("COPY plain_source FROM STDIN (FORMAT csv)") as copy:
            buf = io.BytesIO()
            pacsv.write_csv(table, buf, pacsv.WriteOptions(include_header=False))
            copy.write(buf.getvalue())
        payloads = []
        for offset in range(0, table.num_rows, rows_per_file):
            buffer = bytearray()
            query = sql.SQL("COPY (SELECT * FROM plain_source ORDER BY ts, device OFFSET {} "
                            "LIMIT {}) TO STDOUT (FORMAT binary)").format(offset, rows_per_file)
            with conn.cursor() as cur, cur.copy(query) as copy:
                for chunk in copy:
                    buffer += chunk
            payloads.append(bytes(buffer))
        conn.execute("DROP TABLE plain_source")
        conn.execute("CHECKPOINT")
        started = time.perf_counter()
        for data in payloads:
            with conn.transaction(), conn.cursor() as cur, cur.copy(
                "COPY plain_wide FROM STDIN (FORMAT binary)"
            ) as copy:
                copy.write(data)
        return table.num_rows / (time.perf_counter() - started)


def _write_stream_files(table: pa.Table, folder: Path, opts: BenchOptions) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    write_landing(table, folder, opts)


def run_wide_bench(dsn: str, opts: BenchOptions, progress: Callable[[str], None], *,
                   baselines: bool = True) -> dict:
    """(a)-(d) above; the report's keys. Without ``baselines``: (b) alone, with the driver's
    peak memory (``wide_driver_rss_mb``: the Python driver and the JVM)."""
    if not baselines:
        return _wide_alone(dsn, opts, progress)
    from slidewin.ingest.java import check_java
    from slidewin.ingest.spark import build_session, stop_session

    check_java()
    work = Path(tempfile.mkdtemp(prefix="slidewin-bench-wide-"))
    end = datetime.now(UTC) - timedelta(minutes=5)
    report: dict[str, Any] = {"events": opts.events, "format": opts.format, "stream": "wide",
                              "columns": len(WIDE_COLUMNS), "measures": list(WIDE_MEASURES)}
    try:
        progress(f"generating {opts.events:,} wide events and as many built-in ones in {work}")
        wide = make_wide(opts.events, end, 10_000)
        events = make_events(opts.events, end, 10_000)
        with scratch_database(dsn, partitions=opts.partitions) as store:
            with psycopg.connect(store, autocommit=True) as conn:
                WIDE.declare(conn)
            report["wide_copy_limit_rows_per_s"] = round(
                copy_limit_wide(store, wide, opts.rows_per_file))
        with scratch_database(dsn, partitions=opts.partitions) as store:
            report["wide_plain_copy_rows_per_s"] = round(
                plain_copy_limit(store, wide, opts.rows_per_file))
        with scratch_database(dsn, partitions=opts.partitions) as store:
            report["events_copy_limit_rows_per_s"] = round(copy_limit(
                store, with_partitions(events, opts.partitions), opts.rows_per_file))
        progress(f"(a) COPY limits: wide {report['wide_copy_limit_rows_per_s']:,} rows/s, "
                 f"events {report['events_copy_limit_rows_per_s']:,} rows/s")
        _write_stream_files(wide, work / "wide-land" / "wide", opts)
        write_landing(events, work / "events-land", opts)
        third = opts.events // 3
        for i in range(3):
            part = make_wide(third, end, 10_000, seed=20 + i)
            _write_stream_files(part, work / "three-land" / f"s{i}", opts)
            _write_stream_files(part, work / f"alone-{i}-land" / f"s{i}", opts)
        del wide, events
        spark = build_session(opts.master)
        try:
            _measure(spark, dsn, work, opts, report, progress)
        finally:
            stop_session(spark)
        return report
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _wide_alone(dsn: str, opts: BenchOptions, progress: Callable[[str], None]) -> dict:
    from slidewin.client.bench.ingest import RssSampler
    from slidewin.ingest.java import check_java
    from slidewin.ingest.spark import build_session, jvm_pid, stop_session

    check_java()
    work = Path(tempfile.mkdtemp(prefix="slidewin-bench-wide-"))
    end = datetime.now(UTC) - timedelta(minutes=5)
    report: dict[str, Any] = {"events": opts.events, "format": opts.format, "stream": "wide",
                              "columns": len(WIDE_COLUMNS)}
    try:
        folder = work / "wide-land" / "wide"
        progress(f"generating {opts.events:,} wide events in {folder}")
        _write_wide_files(opts, end, folder)
        report["input_mb"] = round(sum(p.stat().st_size for p in folder.iterdir()) / 2**20)
        spark = build_session(opts.master)
        try:
            with scratch_database(dsn, partitions=opts.partitions) as store:
                with psycopg.connect(store, autocommit=True) as conn:
                    WIDE.declare(conn)
                config = ingest_config(work, "wide-land", opts, once=True)
                with RssSampler(jvm_pid(spark)) as rss:
                    figures = end_to_end(spark, store, config, lambda _line: None)
                with psycopg.connect(store) as conn:
                    stored = conn.execute("SELECT count(*) FROM slidewin_streams.wide").fetchone()
        finally:
            stop_session(spark)
        report["wide_ingest_events_per_s"] = figures["ingest_events_per_s"]
        report["wide_ingest_batches"] = figures["ingest_batches"]
        report["wide_rows_stored"] = stored[0] if stored else 0
        report["wide_driver_rss_mb"] = round(rss.peak / 2**20)
        progress(f"wide {report['wide_ingest_events_per_s']:,} events/s, "
                 f"{report['wide_rows_stored']:,} rows stored, driver peak "
                 f"{report['wide_driver_rss_mb']:,} MB")
        return report
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _write_wide_files(opts: BenchOptions, end: datetime, folder: Path) -> None:
    """The wide events, generated a million at a time (so a large input never sits whole in
    memory) and written as files of ``rows_per_file`` rows: CSV and JSON Lines appended to,
    Parquet one file per million."""
    folder.mkdir(parents=True)
    step = 1_000_000
    for index, offset in enumerate(range(0, opts.events, step)):
        count = min(step, opts.events - offset)
        # each million a span of event time of its own: (device, ts) stay unique
        part = make_wide(count, end - timedelta(seconds=(opts.events - offset - count) / 10_000),
                         10_000, seed=100 + index)
        if opts.format == "parquet":
            write_landing(part, folder / f"m{index:04d}", replace(opts, rows_per_file=count))
            continue
        start = 0
        while start < count:  # up to the end of this million or of the file it is in
            number, used = divmod(offset + start, opts.rows_per_file)
            length = min(opts.rows_per_file - used, count - start)
            name = folder / f"part-{number:05d}.{FILE_EXT[opts.format]}"
            _append(part.slice(start, length), name, opts.format, header=not name.exists())
            start += length
    for sub in [p for p in folder.iterdir() if p.is_dir()]:
        for path in sub.iterdir():
            path.rename(folder / f"{sub.name}-{path.name}")
        sub.rmdir()


def _append(rows: pa.Table, path: Path, fmt: str, *, header: bool) -> None:
    text = _iso(rows)
    with open(path, "ab") as f:
        if fmt == "csv":
            pacsv.write_csv(text, f, pacsv.WriteOptions(include_header=header))
        else:
            f.write(text.to_pandas().to_json(orient="records", lines=True).encode())


def _measure(spark: SparkSession, dsn: str, work: Path, opts: BenchOptions,
             report: dict[str, Any], progress: Callable[[str], None]) -> None:
    def once(land: str, names: list[str]) -> dict[str, Any]:
        with scratch_database(dsn, partitions=opts.partitions) as store:
            with psycopg.connect(store, autocommit=True) as conn:
                for name in names:
                    WIDE.declare(conn, name)
            config = ingest_config(work, land, opts, once=True)
            return end_to_end(spark, store, config, lambda _line: None)

    wide = once("wide-land", ["wide"])
    report["wide_ingest_events_per_s"] = wide["ingest_events_per_s"]
    report["wide_ingest_batches"] = wide["ingest_batches"]
    built_in = once("events-land", [])
    report["events_ingest_events_per_s"] = built_in["ingest_events_per_s"]
    report["wide_ratio"] = _ratio(report["wide_ingest_events_per_s"],
                                  report["wide_copy_limit_rows_per_s"])
    report["wide_vs_plain_copy"] = _ratio(report["wide_ingest_events_per_s"],
                                          report["wide_plain_copy_rows_per_s"])
    report["events_ratio"] = _ratio(report["events_ingest_events_per_s"],
                                    report["events_copy_limit_rows_per_s"])
    report["wide_vs_events"] = _ratio(report["wide_ratio"], report["events_ratio"])
    progress(f"(b, c) end to end: wide {report['wide_ingest_events_per_s']:,} events/s "
             f"(ratio {report['wide_ratio']}), events {report['events_ingest_events_per_s']:,} "
             f"(ratio {report['events_ratio']})")
    together = once("three-land", ["s0", "s1", "s2"])
    alone_seconds = 0.0
    alone_events = 0
    for i in range(3):
        one = once(f"alone-{i}-land", [f"s{i}"])
        alone_seconds += one["ingest_seconds"]
        alone_events += round(one["ingest_events_per_s"] * one["ingest_seconds"])
    report["three_streams_at_once_events_per_s"] = together["ingest_events_per_s"]
    report["three_streams_one_at_a_time_events_per_s"] = (
        round(alone_events / alone_seconds) if alone_seconds else None)
    report["three_streams_at_once_vs_alone"] = _ratio(
        report["three_streams_at_once_events_per_s"],
        report["three_streams_one_at_a_time_events_per_s"])
    progress(f"(d) three streams: {report['three_streams_at_once_events_per_s']:,} events/s at "
             f"once, {report['three_streams_one_at_a_time_events_per_s']:,} one at a time")


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None
