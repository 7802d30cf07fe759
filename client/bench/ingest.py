"""``slidewin bench ingest``: how fast and how fresh the Spark ingest is on this machine.

One run measures, side by side on the same generated events:

(a) ``copy_limit_rows_per_s`` -- the database's limit: the same rows, the same schema, the
    sink's own path with no Spark -- binary COPY into each partition with the insert trigger
    stepped aside, then the rollups' partials (computed here, before the clock starts) applied
    in one upsert, one transaction per file's rows; ``copy_limit_triggers_rows_per_s`` is the
    same COPY with the rollups left to the statement triggers (every other writer's path);
(b) ``ingest_events_per_s`` -- end to end through the code path of ``slidewin ingest --once``
    (``ingest.runner.run``), from the query's start to the last batch's commit, with as many
    files per batch as ``slidewin ingest`` takes (``max_files_per_trigger``); the JVM's start is
    reported apart (``spark_startup_s``) because a long-running ingest pays it once, and so is
    whether the JVM had its class cache (``spark_class_cache``: used, created or off). This is
    the first work of a fresh JVM, which compiles its hot code as it goes; the same files again
    into a fresh database on the same JVM give ``ingest_warm_events_per_s`` (``ratio_warm``):
    what a long-running ingest does once warm. ``cpu_s`` says where each run's CPU went, in
    seconds: this Python process, the driver JVM, and the PostgreSQL server's processes if it
    runs on this machine (read every 50 ms; None when the server is elsewhere);
(c) ``freshness_p95_s`` -- a rate-limited streaming run: files appear over time, each holding
    one second of event time; per file, the time from its rename into the landing directory to
    its second being visible in slidewin.rollups; the 95th percentile;
(d) ``driver_rss_mb`` -- peak resident memory of the driver JVM plus the Python driver,
    sampled every 0.2 s during (b) and (c).

Each phase gets a fresh database (created and dropped here) so they do not disturb each other.
Benchmarks report, they do not assert.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import threading
import time
import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import numpy as np
import psutil
import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from slidewin.client.bench.stats import median, percentile
from slidewin.db.scratch import scratch_database
from slidewin.ingest import batch
from slidewin.ingest.config import DEFAULT_MAX_FILES, DEFAULT_TRIGGER, IngestConfig
from slidewin.ingest.runner import CLASS_CACHE_NOTE, Prepared, preflight, run
from slidewin.ingest.sessions import definitions as session_definitions
from slidewin.ingest.sink import (
    BatchResult,
    Partials,
    PartitionCheck,
    apply_partials,
    insert_arrow_events,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FILE_EXT = {"parquet": "parquet", "json": "jsonl", "csv": "csv"}


@dataclass(frozen=True)
class BenchOptions:
    events: int = 4_000_000
    format: str = "parquet"
    rows_per_file: int = 200_000
    max_files_per_trigger: int = DEFAULT_MAX_FILES  # as `slidewin ingest --once`
    master: str = "local[*]"
    rollups: str = "driver"
    partitions: int = 8
    freshness_seconds: float = 30.0
    freshness_rate: int = 5_000
    trigger: timedelta = DEFAULT_TRIGGER


# ---------------------------------------------------------------- data


def make_events(count: int, end: datetime, per_second: int, seed: int = 7) -> pa.Table:
    """``count`` events, ``per_second`` of them per event-time second, ending at ``end``."""
    rng = np.random.default_rng(seed)
    prefix = uuidlib.UUID(int=int(rng.integers(0, 2**62))).hex[:12]
    uuids = pa.array([f"{prefix}-{i:023d}" for i in range(count)], pa.string())
    offsets_us = (np.arange(count, dtype=np.int64) * 1_000_000) // per_second
    start_us = int(end.timestamp() * 1_000_000) - int(offsets_us[-1] if count else 0)
    ts = pa.array(offsets_us + start_us, pa.timestamp("us", tz="UTC"))
    vals = pa.array(rng.integers(-1_000_000, 1_000_000, count), pa.int64())
    return pa.table({"uuid": uuids, "val": vals, "ts": ts})


def write_file(table: pa.Table, folder: Path, name: str, fmt: str) -> Path:
    """Write atomically: a dot name first, then rename (what producers must do)."""
    final = folder / f"{name}.{FILE_EXT[fmt]}"
    tmp = folder / f".{final.name}.tmp"
    if fmt == "parquet":
        pq.write_table(table, tmp)
    elif fmt == "csv":
        pacsv.write_csv(_iso(table), tmp)
    else:
        _iso(table).to_pandas().to_json(tmp, orient="records", lines=True)
    os.replace(tmp, final)
    return final


def _iso(table: pa.Table) -> pa.Table:
    """``ts`` as ISO-8601 text, in its place (the built-in stream's third column, the wide
    stream's second)."""
    text = pc.strftime(table["ts"], format="%Y-%m-%dT%H:%M:%S")
    index = table.schema.get_field_index("ts")
    return table.set_column(index, "ts", pc.binary_join_element_wise(text, "Z", ""))


def with_partitions(table: pa.Table, partitions: int) -> pa.Table:
    """Add ``part`` (slidewin.partition_of) computed in Python: the COPY phase's input."""
    parts = [
        int(hashlib.md5(u.encode()).hexdigest()[:8], 16) % partitions  # noqa: S324
        for u in table["uuid"].to_pylist()
    ]
    return table.add_column(0, "part", pa.array(parts, pa.int16()))


# ---------------------------------------------------------------- databases


# ---------------------------------------------------------------- (a) copy limit


def copy_limit(dsn: str, table: pa.Table, rows_per_file: int, *, partials: bool = True) -> float:
    """Rows/s of the sink's own COPY (binary, straight into each partition), one transaction per
    file's rows: the fastest way in, without Spark. ``partials``: the rollups from partials
    computed beforehand, as the sink applies Spark's; else from the statement triggers."""
    chunks = [
        table.slice(offset, rows_per_file).select(["part", "uuid", "val", "ts"])
        for offset in range(0, table.num_rows, rows_per_file)
    ]
    sums = [(PartitionCheck.of(chunk), _fixed(batch.partials(chunk, 0))) for chunk in chunks]
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        for chunk, (check, sums_of_chunk) in zip(chunks, sums, strict=True):
            with conn.transaction():
                refs = session_definitions(conn)  # as the sink: none unless defined
                insert_arrow_events(conn, chunk, precomputed=partials, session_refs=refs)
                if partials:
                    apply_partials(conn, {0: check}, sums_of_chunk)
    return table.num_rows / (time.perf_counter() - started)


def _fixed(table: pa.Table) -> Partials:
    return Partials(lambda: table)


# ---------------------------------------------------------------- (d) memory


class _Sampler:
    """A background thread calling ``_sample`` every ``every_s`` between enter and exit (RSS
    peaks and short-lived processes are only seen while they last)."""

    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.every_s)

    def _sample(self) -> None:
        raise NotImplementedError


class RssSampler(_Sampler):
    """Peak RSS of this process plus the driver JVM, sampled in a background thread."""

    def __init__(self, jvm_pid: int | None, every_s: float = 0.2) -> None:
        super().__init__(every_s)
        self.pids = [os.getpid()] + ([jvm_pid] if jvm_pid else [])
        self.peak = 0

    def _sample(self) -> None:
        total = 0
        for pid in self.pids:
            with contextlib.suppress(psutil.Error):
                total += psutil.Process(pid).memory_info().rss
        self.peak = max(self.peak, total)


class CpuMeter(_Sampler):
    """CPU seconds of this process, the driver JVM and the local PostgreSQL server's processes
    between enter and exit. Backends come and go (and an ended one can stay unreaped a while,
    its time in nobody's count), so each PostgreSQL process is read every ``every_s`` and at
    exit: a process first seen during the run counts from its start, one that ends counts
    until its last reading (at most ``every_s`` of it lost). ``postgres`` is None when no
    PostgreSQL process on this machine can be read (a remote server)."""

    def __init__(self, jvm_pid: int | None, every_s: float = 0.05) -> None:
        super().__init__(every_s)
        self.jvm = _process(jvm_pid)
        self.seconds: dict[str, float | None] = {}
        self._own = (0.0, 0.0)
        self._start: dict[int, float] = {}
        self._seen: dict[int, float] = {}

    def __enter__(self) -> Self:
        self._own = (_cpu(psutil.Process()) or 0.0, _cpu(self.jvm) or 0.0)
        self._start = _postgres_processes()
        self._seen = dict(self._start)
        return super().__enter__()

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self._sample()
        postgres = sum(cpu - self._start.get(pid, 0.0) for pid, cpu in self._seen.items())
        self.seconds = {
            "python": round((_cpu(psutil.Process()) or 0.0) - self._own[0], 2),
            "jvm": round((_cpu(self.jvm) or 0.0) - self._own[1], 2),
            "postgres": round(postgres, 2) if self._seen else None,
        }

    def _sample(self) -> None:
        for pid, cpu in _postgres_processes().items():
            self._seen[pid] = max(cpu, self._seen.get(pid, 0.0))


def _postgres_processes() -> dict[int, float]:
    """User + system seconds of each readable ``postgres`` process (ended, unreaped ones
    included), without their children's: every backend is counted as itself."""
    found: dict[int, float] = {}
    for proc in psutil.process_iter(["name"]):
        if (proc.info.get("name") or "").startswith("postgres"):
            cpu = _cpu(proc)
            if cpu is not None:
                found[proc.pid] = cpu
    return found


def _process(pid: int | None) -> psutil.Process | None:
    try:
        return psutil.Process(pid) if pid else None
    except psutil.Error:
        return None


def _cpu(proc: psutil.Process | None) -> float | None:
    """User + system seconds of ``proc``; None when there is none or it cannot be read."""
    if proc is None:
        return None
    try:
        times = proc.cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system


# ---------------------------------------------------------------- (b) end to end


def ingest_config(work: Path, name: str, opts: BenchOptions, **kw: Any) -> IngestConfig:
    land = work / name
    land.mkdir(parents=True, exist_ok=True)
    base: dict[str, Any] = {
        "landing": land,
        "checkpoint_dir": work / f"{name}-checkpoints",
        "archive_dir": work / f"{name}-archive",
        "processed": "delete",
        "format": opts.format,
        "max_files_per_trigger": opts.max_files_per_trigger,
        "master": opts.master,
        "rollups": opts.rollups,
        "query_id": f"bench-{name}",
        "max_future": timedelta(hours=1),
        "grace": timedelta(hours=1),
    }
    return IngestConfig(**{**base, **kw})


def end_to_end(
    spark: SparkSession | None, dsn: str, config: IngestConfig, progress: Callable[[str], None]
) -> dict[str, Any]:
    """A ``--once`` run over what is in the landing dir: events/s from the query's start to
    the last commit, and the steady rate after the first batch (which pays Spark's warm-up)."""
    prepared = preflight(config, dsn)
    ends: list[tuple[float, int]] = []
    started = time.perf_counter()
    totals = run(
        prepared,
        dsn,
        progress,
        spark=spark,
        on_batch=lambda _s, r: ends.append((time.perf_counter(), r.rows_in)),
    )
    seconds = time.perf_counter() - started
    steady = None
    if len(ends) > 1 and ends[-1][0] > ends[0][0]:
        steady = sum(n for _, n in ends[1:]) / (ends[-1][0] - ends[0][0])
    return {
        "ingest_events_per_s": round(totals.rows_in / seconds) if seconds else 0,
        "ingest_steady_events_per_s": round(steady) if steady else None,
        "ingest_batches": totals.batches,
        "ingest_seconds": round(seconds, 2),
    }


# ---------------------------------------------------------------- (c) freshness


def freshness(
    spark: SparkSession | None,
    dsn: str,
    config: IngestConfig,
    opts: BenchOptions,
    progress: Callable[[str], None],
) -> list[float]:
    """Seconds from each file's rename to its event second showing in the rollups."""
    prepared: Prepared = preflight(config, dsn)
    stop = threading.Event()
    appeared: dict[datetime, float] = {}
    seen: dict[datetime, float] = {}
    runner = threading.Thread(target=run, args=(prepared, dsn, progress, stop, spark), daemon=True)
    runner.start()
    time.sleep(3.0)  # let the query start before the first file lands
    producer = threading.Thread(
        target=_produce, args=(config.landing, opts, appeared, stop), daemon=True
    )
    producer.start()
    _watch(dsn, appeared, seen, producer, timeout_s=opts.freshness_seconds + 30)
    stop.set()
    runner.join(timeout=120)
    return [seen[s] - appeared[s] for s in appeared if s in seen]


def _produce(folder: Path, opts: BenchOptions, appeared: dict, stop: threading.Event) -> None:
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=5)
    tick = time.perf_counter()
    for k in range(int(opts.freshness_seconds)):
        if stop.is_set():
            return
        second = base + timedelta(seconds=k)
        table = make_events(
            opts.freshness_rate, second + timedelta(seconds=1), opts.freshness_rate, seed=k
        )
        table = table.set_column(
            0, "uuid", pa.array([f"fresh-{k}-{i}" for i in range(table.num_rows)], pa.string())
        )
        write_file(_within(table, second), folder, f"fresh-{k:05d}", opts.format)
        appeared[second] = time.perf_counter()
        stop.wait(max(0.0, tick + k + 1 - time.perf_counter()))  # one file per second


def _within(table: pa.Table, second: datetime) -> pa.Table:
    """Keep every event inside ``second`` (so one file = one event second)."""
    start_us = int(second.timestamp() * 1_000_000)
    n = table.num_rows
    ts = pa.array(
        start_us + (np.arange(n, dtype=np.int64) * 1_000_000) // max(n, 1),
        pa.timestamp("us", tz="UTC"),
    )
    return table.set_column(2, "ts", ts)


def _watch(dsn: str, appeared: dict, seen: dict, producer: threading.Thread, timeout_s: float):
    deadline = time.perf_counter() + timeout_s
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.perf_counter() < deadline:
            rows = conn.execute("SELECT DISTINCT sec FROM slidewin.rollups").fetchall()
            now = time.perf_counter()
            for (sec,) in rows:
                seen.setdefault(sec.astimezone(UTC), now)
            if not producer.is_alive() and all(s in seen for s in appeared):
                return
            time.sleep(0.05)


# ---------------------------------------------------------------- the whole run


def run_bench(dsn: str, opts: BenchOptions, progress: Callable[[str], None]) -> dict:
    """Run (a)-(d) and return the report (the JSON line's keys)."""
    from slidewin.ingest.java import check_java
    from slidewin.ingest.spark import build_session, class_cache_state, jvm_pid, stop_session

    check_java()
    work = Path(tempfile.mkdtemp(prefix="slidewin-bench-"))
    try:
        progress(f"generating {opts.events:,} events as {opts.format} files in {work}")
        table = make_events(opts.events, datetime.now(UTC) - timedelta(minutes=5), 10_000)
        write_landing(table, work / "generated", opts)
        report: dict = {
            "events": opts.events,
            "format": opts.format,
            "master": opts.master,
            "rollups": opts.rollups,
            "max_files_per_trigger": opts.max_files_per_trigger,
        }
        keyed = with_partitions(table, opts.partitions)
        for key, partials in (("copy_limit_rows_per_s", True),
                              ("copy_limit_triggers_rows_per_s", False)):
            with scratch_database(dsn, partitions=opts.partitions) as store:
                rate = copy_limit(store, keyed, opts.rows_per_file, partials=partials)
            report[key] = round(rate)
        del keyed
        progress(
            f"(a) COPY limit: {report['copy_limit_rows_per_s']:,} rows/s with the rollups from "
            f"partials, {report['copy_limit_triggers_rows_per_s']:,} from the triggers"
        )
        del table
        started = time.perf_counter()
        spark = build_session(opts.master)
        report["spark_startup_s"] = round(time.perf_counter() - started, 2)
        report["spark_class_cache"] = class_cache_state(spark)
        try:
            with RssSampler(jvm_pid(spark)) as rss:
                _measure_stream(spark, dsn, work, opts, report, progress)
            report["driver_rss_mb"] = round(rss.peak / 2**20)
        finally:
            if report["spark_class_cache"] == "created":
                progress(CLASS_CACHE_NOTE)
            stop_session(spark)
        copy_rate = report["copy_limit_rows_per_s"]
        for key, figure in (("ratio", "ingest_events_per_s"),
                            ("ratio_warm", "ingest_warm_events_per_s")):
            report[key] = round(report[figure] / copy_rate, 3) if copy_rate else None
        return report
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write_landing(table: pa.Table, folder: Path, opts: BenchOptions) -> None:
    folder.mkdir(parents=True)
    base = time.time() - 3600
    for i, offset in enumerate(range(0, table.num_rows, opts.rows_per_file)):
        path = write_file(
            table.slice(offset, opts.rows_per_file), folder, f"part-{i:05d}", opts.format
        )
        os.utime(path, (base + i, base + i))


def copy_landing(source: Path, target: Path, files: int | None = None) -> Path:
    """A copy of a generated landing folder for one run (the ingest deletes what it read),
    mtimes kept (the order Spark lists them in); ``files``: the first few only (a warm-up)."""
    target.mkdir(parents=True)
    for path in sorted(source.iterdir())[:files]:
        shutil.copy2(path, target / path.name)
    return target


def _measure_stream(spark, dsn, work, opts, report, progress) -> None:
    from slidewin.ingest.spark import jvm_pid

    cpu: dict[str, dict[str, float | None]] = {}
    for jvm, name in (("cold", "e2e"), ("warm", "e2e-warm")):
        copy_landing(work / "generated", work / name)
        with scratch_database(dsn, partitions=opts.partitions) as store, \
                CpuMeter(jvm_pid(spark)) as meter:
            figures = end_to_end(spark, store, ingest_config(work, name, opts, once=True),
                                 progress)
        cpu[jvm] = meter.seconds
        if jvm == "cold":
            report.update(figures)
        else:
            report["ingest_warm_events_per_s"] = figures["ingest_events_per_s"]
    report["cpu_s"] = cpu
    progress(
        f"(b) end to end: {report['ingest_events_per_s']:,} events/s on a fresh JVM "
        f"(after the first batch: {report['ingest_steady_events_per_s']}), "
        f"{report['ingest_batches']} batches; {report['ingest_warm_events_per_s']:,} events/s "
        f"the same again, warm; CPU s {cpu}"
    )
    with scratch_database(dsn, partitions=opts.partitions) as store:
        config = replace(
            ingest_config(work, "fresh", opts),
            trigger=opts.trigger,
            max_future=timedelta(minutes=1),
            grace=timedelta(minutes=10),
        )
        delays = freshness(spark, store, config, opts, progress)
    report["freshness_p95_s"] = round(percentile(delays, 95), 3) if delays else None
    report["freshness_median_s"] = round(median(delays), 3) if delays else None
    report["freshness_files"] = len(delays)
    progress(f"(c) freshness p95 {report['freshness_p95_s']} s over {len(delays)} files")


__all__ = ["BatchResult", "BenchOptions", "run_bench"]
