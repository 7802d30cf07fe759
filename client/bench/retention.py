"""The retention benchmark: insert at a fixed rate while the real retention job runs, and watch.

In a dedicated fresh database (created and dropped), an inserter *process* (so its Python work
doesn't share a GIL with the timings) COPYs events stamped with the wall clock, in small batches
every ``batch_ms``, at ``rate`` rows/s. Meanwhile this process runs the real scheduler
(``jobs.scheduler.run_scheduler``) with one retention job, timing every nibble call, and a
sampler reads every 100 ms, per partition: rows (rollups), the oldest row (one primary-key
probe), the row target, and table + index bytes.

Reported (JSON, the last line of ``slidewin bench retention --json``):
  max_overshoot_rows  largest rows - target over partitions and samples (null without --max-rows)
  oldest_age_over_s   largest (now - oldest row) - history over partitions and samples
  delete_ms_p99       99th percentile of the wall time of the nibble calls that deleted rows
                      (the empty ones before the first rows expire would flatter it)
  size_growth_pct     table + index bytes at the end vs the first sample after one full history
and the achieved insert rate, which on a loaded machine may fall short of the target.

``--stream wide`` runs the same over the declared benchmark stream of 8 typed columns
(client/bench/streams.py), declared with the run's --history and --max-rows as its own
retention: the inserter COPYs its rows, the same job nibbles it (its nibble calls timed as the
built-in stream's are), and the sampler reads its rollups, its oldest row and its table. A
declared stream's row limit is one target over the whole stream, not one per partition, and
its nibbles run one stream call at a time (--workers is the built-in stream's).
"""

from __future__ import annotations

import io
import multiprocessing as mp
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.csv as pacsv
from psycopg import sql

from slidewin.client.bench.stats import percentile
from slidewin.client.bench.streams import BenchStream, bench_stream
from slidewin.db.connect import connect
from slidewin.db.errors import SlidewinError
from slidewin.db.events import partition_of
from slidewin.db.retention import row_targets
from slidewin.db.schema import init_schema
from slidewin.db.scratch import scratch_database
from slidewin.jobs.config import RetentionPolicy
from slidewin.jobs.errors import PolicyError
from slidewin.jobs.retention import RoundResult
from slidewin.jobs.scheduler import run_scheduler
from slidewin.jobs.status import no_jit
from slidewin.jobs.store import add_retention

KEY_POOL = 200_000
SAMPLE_S = 0.1

Progress = Callable[[str], None]


@dataclass(frozen=True)
class RetentionBenchSpec:
    """What to run. Validated: every field is named in its error."""

    rate: int = 50_000
    seconds: float = 60.0
    history: timedelta | None = timedelta(seconds=10)
    max_rows: int | None = None
    chunk: int = 2000
    yield_: timedelta = timedelta(milliseconds=100)
    partitions: int = 8
    workers: int = 2
    batch_ms: int = 20
    keep: bool = False
    stream: str = "events"

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise PolicyError(f"--rate {self.rate} must be > 0 rows/s; use e.g. 50000")
        if self.seconds <= 0:
            raise PolicyError(f"--seconds {self.seconds} must be > 0; use e.g. 60")
        if not 1 <= self.batch_ms <= 1000:
            raise PolicyError(f"--batch-ms {self.batch_ms} must be from 1 to 1000; use e.g. 20")
        self.policy()  # validates history / max-rows / chunk / yield
        bench_stream(self.stream)  # an unknown name: the error lists the choices

    def policy(self) -> RetentionPolicy:
        return RetentionPolicy(self.history, self.max_rows, self.chunk, self.yield_,
                               workers=self.workers)


# -- the inserter (a separate process) -------------------------------------------------------


def insert_at_rate(dsn: str, rate: int, seconds: float, batch_ms: int, partitions: int,
                   stop: Any, sent: Any, ready: Any, stream: str = "events") -> None:
    """COPY ``rate`` rows/s of ``stream`` stamped with the wall clock, one batch every
    ``batch_ms``. Sets ``ready`` when it starts inserting (process start-up is not part of the
    run)."""
    rng = random.Random(7)  # noqa: S311 - benchmark data
    target = bench_stream(stream)
    if target.declared:
        copy = _declared_copier(target, np.random.default_rng(7))
    else:
        keys = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(KEY_POOL)]
        prefix = [f"{partition_of(k, partitions)}\t{k}\t".encode() for k in keys]

        def copy(conn: psycopg.Connection, first: int, count: int) -> None:
            _copy_batch(conn, prefix, first, count, rng)
    done = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        ready.set()
        start = time.monotonic()
        while not stop.is_set() and time.monotonic() - start < seconds:
            due = int(rate * (time.monotonic() - start)) - done
            if due > 0:
                copy(conn, done, due)
                done += due
                sent.value = done
            time.sleep(batch_ms / 1000.0)


def _declared_copier(target: BenchStream, rng: np.random.Generator
                     ) -> Callable[[psycopg.Connection, int, int], None]:
    """COPY a batch of the declared stream's rows (its own generator's, keys from a pool of
    KEY_POOL taken in turn), stamped with the wall clock, each a distinct microsecond."""

    def copy(conn: psycopg.Connection, first: int, count: int) -> None:
        end_us = int(datetime.now(UTC).timestamp() * 1_000_000)
        keys = pa.array([f"{target.key_prefix}{(first + i) % KEY_POOL}" for i in range(count)])
        ts = pa.array(np.arange(end_us - count, end_us), pa.timestamp("us", tz="UTC"))
        rows = target.make_rows(keys, ts, rng)
        buf = io.BytesIO()
        pacsv.write_csv(rows, buf, pacsv.WriteOptions(include_header=False))
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in rows.column_names)
        with conn.cursor().copy(sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(
                target.table, cols)) as out:
            out.write(buf.getvalue())

    return copy


def _copy_batch(conn: psycopg.Connection, prefix: list[bytes], first: int, count: int,
                rng: random.Random) -> None:
    # distinct microsecond stamps within the batch keep (uuid, ts) unique
    base = datetime.now(UTC) - timedelta(microseconds=count)
    stamp = base.strftime("%Y-%m-%d %H:%M:%S")
    micro0 = base.microsecond
    lines = []
    for i in range(count):
        sec, micro = divmod(micro0 + i, 1_000_000)
        ts = stamp if sec == 0 else (base + timedelta(seconds=sec)).strftime("%Y-%m-%d %H:%M:%S")
        lines.append(b"%s%d\t%s.%06d+00\n" % (prefix[(first + i) % KEY_POOL],
                                              rng.randrange(1_000_000), ts.encode(), micro))
    with conn.cursor().copy("COPY slidewin.events (part, uuid, val, ts) FROM STDIN") as copy:
        copy.write(b"".join(lines))


# -- the sampler -----------------------------------------------------------------------------

SAMPLE_SQL = """
SELECT k.part,
       coalesce((SELECT sum(r.n) FROM slidewin.rollups r WHERE r.part = k.part), 0)::bigint,
       (SELECT e.ts FROM slidewin.events e WHERE e.part = k.part ORDER BY e.ts LIMIT 1)
  FROM generate_series(0, %s - 1) AS k(part)
"""

SIZE_SQL = """
SELECT coalesce(sum(pg_table_size(i.inhrelid)), 0)::bigint,
       coalesce(sum(pg_indexes_size(i.inhrelid)), 0)::bigint,
       coalesce(sum(s.n_dead_tup), 0)::bigint
  FROM pg_inherits i LEFT JOIN pg_stat_user_tables s ON s.relid = i.inhrelid
 WHERE i.inhparent = 'slidewin.events'::regclass
"""


@dataclass
class Sample:
    at_s: float
    rows: int
    max_over_rows: int | None
    max_age_over_s: float | None
    bytes: int
    dead: int
    index_bytes: int = 0


# a declared stream: its rows (rollups: one row per second), its oldest row (the primary key's
# first entry of each partition), one row target for the whole stream
STREAM_SAMPLE_SQL = """
SELECT 0, (SELECT coalesce(sum(n), 0)::bigint FROM {rollups}),
       (SELECT {time} FROM {table} ORDER BY {time} LIMIT 1)
"""
STREAM_SIZE_SQL = SIZE_SQL.replace("'slidewin.events'::regclass", "%s::regclass")


def _parts(conn: psycopg.Connection, spec: RetentionBenchSpec) -> list[tuple[int, int, Any]]:
    """(partition, rows, oldest row's time) of the stream: per partition for the built-in
    stream, one row for a declared one (its row limit is one target)."""
    target = bench_stream(spec.stream)
    if not target.declared:
        return conn.execute(SAMPLE_SQL, (spec.partitions,)).fetchall()
    query = sql.SQL(STREAM_SAMPLE_SQL).format(
        rollups=sql.Identifier("slidewin_rollups", target.name), time=sql.Identifier(target.time),
        table=target.table)
    return conn.execute(query).fetchall()


def _sizes(conn: psycopg.Connection, spec: RetentionBenchSpec) -> tuple[int, int, int]:
    target = bench_stream(spec.stream)
    if not target.declared:
        row = conn.execute(SIZE_SQL).fetchone()
    else:
        row = conn.execute(STREAM_SIZE_SQL, (f'slidewin_streams."{target.name}"',)).fetchone()
    return row or (0, 0, 0)


def _targets(conn: psycopg.Connection, spec: RetentionBenchSpec) -> dict[int, int] | None:
    if not spec.max_rows:
        return None
    if bench_stream(spec.stream).declared:
        return {0: spec.max_rows}
    return row_targets(conn, spec.max_rows)


def take_sample(conn: psycopg.Connection, spec: RetentionBenchSpec, at_s: float) -> Sample:
    now = datetime.now(UTC)
    parts = _parts(conn, spec)
    targets = _targets(conn, spec)
    table, index, dead = _sizes(conn, spec)
    over = [rows - targets.get(part, 0) for part, rows, _ in parts] if targets else None
    history = spec.history
    ages = [(now - oldest - history).total_seconds()
            for _, _, oldest in parts if oldest is not None and history]
    return Sample(at_s, sum(r for _, r, _ in parts), max(over) if over else None,
                  max(ages) if ages else None, int(table + index), int(dead), int(index))


# -- the run ---------------------------------------------------------------------------------


def run_retention_bench(admin_dsn: str, spec: RetentionBenchSpec,
                        progress: Progress) -> dict[str, Any]:
    """Create a database, run the load and the retention job, sample; return the figures."""
    with scratch_database(admin_dsn, keep=spec.keep, progress=progress) as dsn:
        with connect(dsn) as conn:
            init_schema(conn, spec.partitions)
        with connect(dsn, autocommit=True) as conn:  # a declared stream keeps its own retention
            bench_stream(spec.stream).declare(conn, grace=timedelta(0), history=spec.history,
                                              max_rows=spec.max_rows, partitions=spec.partitions)
        add_retention(dsn, spec.policy(), "default")
        return _run(dsn, spec, progress)


def _run(dsn: str, spec: RetentionBenchSpec, progress: Progress) -> dict[str, Any]:
    nibble_ms: list[float] = []
    # nibbles before the first rows expire find nothing; only those that deleted count

    deleted = [0]

    def on_round(result: RoundResult) -> None:
        nibble_ms.extend(ms for p, ms in result.nibble_ms.items() if result.deleted.get(p))
        deleted[0] += result.total

    def on_nibble(_stream: str, rows: int, ms: float) -> None:
        if rows:
            nibble_ms.append(ms)
            deleted[0] += rows

    stop_jobs = threading.Event()
    jobs = threading.Thread(target=run_scheduler, kwargs={
        "dsn": dsn, "stop": stop_jobs, "on_round": on_round, "on_nibble": on_nibble},
        daemon=True)
    progress(f"inserting {spec.rate} rows/s of {spec.stream} for {spec.seconds:g}s; retention "
             f"{spec.policy().describe()}")
    inserter, stop_insert, sent, ready = start_inserter(dsn, spec)
    try:
        _wait_ready(inserter, ready)
        jobs.start()
        samples = _sample_loop(dsn, spec, inserter, progress)
    finally:
        stop_insert.set()
        inserter.join(timeout=30)
        stop_jobs.set()
        jobs.join(timeout=30)
    if inserter.exitcode not in (0, None):
        raise SlidewinError(f"the inserter process failed (exit code {inserter.exitcode})")
    figures = _figures(spec, samples, nibble_ms, deleted[0], int(sent.value))
    return {**figures, **_job_totals(dsn)}


def start_inserter(dsn: str, spec: RetentionBenchSpec) -> tuple[Any, Any, Any, Any]:
    """Start ``insert_at_rate`` in a spawned process; returns it and its (stop, sent, ready).
    Its arguments, the DSN among them, travel through a pipe, not its command line."""
    ctx = mp.get_context("spawn")
    stop, sent, ready = ctx.Event(), ctx.Value("q", 0), ctx.Event()
    inserter = ctx.Process(target=insert_at_rate, daemon=True, args=(
        dsn, spec.rate, spec.seconds, spec.batch_ms, spec.partitions, stop, sent, ready,
        spec.stream))
    inserter.start()
    return inserter, stop, sent, ready


JOB_TOTALS_SQL = """
SELECT count(*), coalesce(sum(rounds), 0),
       coalesce(sum((detail->>'vacuum_ms')::float), 0),
       coalesce(sum(jsonb_array_length(coalesce(detail->'vacuumed', '[]'))), 0),
       coalesce(sum(extract(epoch FROM finished_at - started_at)), 0)
  FROM slidewin.job_runs WHERE kind = 'retention'
"""


def _job_totals(dsn: str) -> dict[str, Any]:
    """What the retention job recorded: runs, rounds, busy time, vacuums (see job_runs)."""
    with connect(dsn, autocommit=True) as conn:
        row = conn.execute(JOB_TOTALS_SQL).fetchone()
    assert row is not None  # an aggregate: always one row
    runs, rounds, vacuum_ms, vacuums, busy_s = row
    return {"job_runs": runs, "rounds": int(rounds), "vacuums": int(vacuums),
            "vacuum_s": round(float(vacuum_ms) / 1000, 2), "job_busy_s": round(float(busy_s), 2)}


def _wait_ready(inserter: Any, ready: Any) -> None:
    while not ready.wait(0.2):
        if not inserter.is_alive():
            raise SlidewinError(
                f"the inserter process exited before inserting (exit code {inserter.exitcode})"
            )


def _sample_loop(dsn: str, spec: RetentionBenchSpec, inserter: Any,
                 progress: Progress) -> list[Sample]:
    samples: list[Sample] = []
    start = time.monotonic()
    next_report = 5.0
    with connect(dsn, autocommit=True) as conn:
        no_jit(conn)
        while inserter.is_alive() or not samples:
            at = time.monotonic() - start
            samples.append(take_sample(conn, spec, at))
            if at >= next_report:
                s = samples[-1]
                progress(f"{at:5.1f}s rows {s.rows} size {s.bytes // 1024} kB dead {s.dead} "
                         f"age over {_fmt(s.max_age_over_s)} s rows over {_fmt(s.max_over_rows)}")
                next_report += 5.0
            time.sleep(max(0.0, SAMPLE_S - (time.monotonic() - start - at)))
    return samples


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def _figures(spec: RetentionBenchSpec, samples: list[Sample], nibble_ms: list[float],
             deleted: int, sent: int) -> dict[str, Any]:
    horizon = spec.history.total_seconds() if spec.history else _fill_time(spec, samples)
    steady = [s for s in samples if s.at_s >= horizon] or samples[-1:]
    first, last = steady[0], samples[-1]
    overs = [s.max_over_rows for s in samples if s.max_over_rows is not None]
    ages = [s.max_age_over_s for s in steady if s.max_age_over_s is not None]
    return {
        "benchmark": "retention",
        "stream": spec.stream,
        "spec": {k: (v.total_seconds() if isinstance(v, timedelta) else v)
                 for k, v in asdict(spec).items()},
        "rate_target": spec.rate,
        "rate_achieved": round(sent / spec.seconds),
        "rows_inserted": sent,
        "rows_deleted": deleted,
        "max_overshoot_rows": max(overs) if overs else None,
        "oldest_age_over_s": round(max(ages), 3) if ages else None,
        "delete_ms_p50": round(percentile(nibble_ms, 50), 3) if nibble_ms else None,
        "delete_ms_p99": round(percentile(nibble_ms, 99), 3) if nibble_ms else None,
        "delete_ms_max": round(max(nibble_ms), 3) if nibble_ms else None,
        "nibble_calls": len(nibble_ms),
        "bytes_first_full_history": first.bytes,
        "bytes_end": last.bytes,
        "index_bytes_first_full_history": first.index_bytes,
        "index_bytes_end": last.index_bytes,
        "size_growth_pct": round(100.0 * (last.bytes - first.bytes) / first.bytes, 1)
        if first.bytes else None,
        "dead_tuples_end": last.dead,
        "samples": len(samples),
    }


def _fill_time(spec: RetentionBenchSpec, samples: list[Sample]) -> float:
    """Without a history: the first time the store held its row target."""
    for s in samples:
        if spec.max_rows and s.rows >= spec.max_rows:
            return s.at_s
    return samples[-1].at_s if samples else 0.0
