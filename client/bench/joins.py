"""``slidewin bench joins``: what an interval join of two declared streams costs the ingest, how
fast its answers read, how fresh its pairs are, whether its results are exact, and the same join
written by hand in plain Spark, side by side in one run.

Data: two declared streams, ``orders`` (order_id, customer, amount, ts) and ``shipments``
(shipment_id, customer, weight, ts), ``events`` records each over ``events / rate`` seconds of
event time ending 5 minutes ago, ``keys`` customers (the join's on-column; each stream's own key
is its id). The join ``orders_shipments``: ``customer`` equal and ``shipments.ts`` within
``within`` of ``orders.ts`` (``--within``), type left (or ``--type``), grace ``grace``. With the
defaults (1,000 records a second, 10,000 customers, within 5 s) an order meets one shipment on
average. Orders are written in time order; a share of the shipments (``disorder_share``, 30 %)
arrives up to ``disorder`` late (less than the grace): each is written into a later file than
records newer than it. Each stream's files go to its landing folder, ``rows_per_file`` records
each, named and dated in arrival order; the last file of each stream ends with a sentinel
record ``grace + within + 1 s`` after the data, so that W passes every record and every outer
row is final when the run ends (a live stream moves on in the same way).

Side by side, ``runs`` times in alternating order (one small run first, not counted, warms
Spark up), each in a fresh database on the same server:

(a) ``slidewin ingest --once``'s code path (``client.bench.ingest.end_to_end``) over a copy of
    the same files, with the join defined and without it: ``join_cost_pct`` = (median seconds
    with / median seconds without - 1) * 100. Both stores hold one record per stream before
    the run (as a store that has been running would): W ignores an input with no data, so in a
    cold start the stream whose first batch commits first moves W alone and the other stream's
    first records could be late for the join.
(b) After each run with the join: ``results_match`` -- the stored results (``db.joins.results``)
    equal the exact answer (``db.joins.exact`` over every record before the sentinels) as
    multisets; and the exact answer's pair and outer-row counts equal those computed here from
    the generated records (numpy, no database): ``exact_matches_generator``.
(c) On the last store with the join: ``slidewin.join_show(name, t - 1 min, t, 20)`` (20: the
    default limit of ``slidewin joins show``) at ``shows`` times t drawn over the data, timed
    through ``db.joins.show``: p50 / p95.
(d) The same files read by plain Spark Structured Streaming, the way a user would write the
    join by hand: two Parquet file streams, ``withWatermark(grace)`` on both, a stream-stream
    join on the customer with the event-time range condition, ``foreachBatch`` writing the
    joined rows to a PostgreSQL table with psycopg COPY (trigger availableNow, as ``--once``).
    Its seconds, its result count and whether its results equal the exact answer.

Then (e) freshness, on a live ingest (not ``--once``, trigger ``trigger``): for
``freshness_seconds`` a file per stream per second, ``freshness_rate`` records each (the late
shipments held back into the later file of their arrival second); per pair, the pair's
``emitted_at`` (the database's ``clock_timestamp()`` when the trigger wrote it, inside the batch
transaction, so a little before its commit) minus the wall time when the later of its two
records' files was renamed into its landing folder; and, from a poller reading new results
every 50 ms, when the pair was first seen committed. The server runs on this machine: one clock.

``--stream events|wide``: the left stream is that benchmark stream instead of ``orders``, its
generated rows (client/bench/streams.py) keyed by the customers, in time order, and the join is
on its key, which the side stream ``shipments`` holds under the same name (``uuid`` or
``device``). Without --stream the run is the one above.

Benchmarks report, they do not assert.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg
import pyarrow as pa
from psycopg import sql

from slidewin.client.bench.ingest import (
    BenchOptions,
    copy_landing,
    end_to_end,
    ingest_config,
    write_file,
    write_landing,
)
from slidewin.client.bench.stats import median, percentile
from slidewin.client.bench.streams import BenchStream, bench_stream, once_per_key
from slidewin.db import joins, streams
from slidewin.db.scratch import scratch_database
from slidewin.db.streams import Column
from slidewin.ingest.config import DEFAULT_MAX_FILES, DEFAULT_TRIGGER
from slidewin.ingest.runner import preflight, run
from slidewin.ingest.typed_arrow import csv_bytes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LEFT, RIGHT, JOIN = "orders", "shipments", "orders_shipments"
LEFT_COLUMNS = (Column("order_id", "text"), Column("customer", "text"),
                Column("amount", "double precision"), Column("ts", "timestamptz"))
SHOW_LIMIT = 20  # the default limit of `slidewin joins show`
SPARK_TYPES = {"text": "string", "double precision": "double", "timestamptz": "timestamp",
               "bigint": "long", "boolean": "boolean", "numeric(12,2)": "decimal(12,2)"}
EVENTS_COLUMNS = (Column("uuid", "text"), Column("val", "bigint"), Column("ts", "timestamptz"))
# in this order in the first run: the plain Spark runs are compared with the first run with the
# join
VARIANTS = ("without", "with", "plain_spark")
# tests: called with each store with the join, the range its results were compared over and
# the comparison
Check = Callable[[psycopg.Connection, datetime, datetime, dict[str, Any]], None]


@dataclass(frozen=True)
class Left:
    """The join's left stream: the bench's own ``orders`` (no --stream), or a benchmark
    stream's generated rows (--stream), joined on its key -- its keys are the customers."""

    name: str
    id: str  # the stream's key: what names a left record in the join's answers
    on: str  # the join's on-column, which the side stream holds under the same name
    columns: tuple[Column, ...]
    bench: BenchStream | None = None

    @property
    def table(self) -> sql.Composed:
        if self.bench is not None:
            return self.bench.table
        return sql.SQL("{}").format(sql.Identifier("slidewin_streams", self.name))

    def landing(self, root: Path) -> Path:
        """Where the ingest over ``root`` reads the stream's files."""
        return self.bench.landing(root) if self.bench is not None else root / self.name

    @property
    def right_columns(self) -> tuple[Column, ...]:
        return (Column("shipment_id", "text"), Column(self.on, "text"),
                Column("weight", "double precision"), Column("ts", "timestamptz"))


ORDERS = Left(LEFT, "order_id", "customer", LEFT_COLUMNS)


def left_stream(name: str | None) -> Left:
    """``--stream``'s left stream (None: orders)."""
    if name is None:
        return ORDERS
    target = bench_stream(name)
    columns = target.columns if target.declared else EVENTS_COLUMNS
    return Left(target.name, target.key, target.key, columns, target)


@dataclass(frozen=True)
class JoinBenchOptions:
    events: int = 1_000_000  # per stream
    keys: int = 10_000
    rate: int = 1_000  # records a second of event time, per stream
    within: timedelta = timedelta(seconds=5)
    grace: timedelta = timedelta(seconds=30)
    join_type: str = "left"
    disorder_share: float = 0.3
    disorder: timedelta = timedelta(seconds=10)
    runs: int = 3
    rows_per_file: int = 5_000
    max_files_per_trigger: int = DEFAULT_MAX_FILES
    master: str = "local[*]"
    partitions: int = 8
    shows: int = 200
    freshness_seconds: int = 30
    freshness_rate: int = 1_000
    trigger: timedelta = DEFAULT_TRIGGER
    plain_spark: bool = True
    stream: str | None = None  # the left stream: a benchmark stream's rows (None: orders)

    @property
    def left(self) -> Left:
        return left_stream(self.stream)

    def bench(self) -> BenchOptions:
        """The ingest benchmark's options these runs share (files, batches, Spark)."""
        return BenchOptions(events=self.events, format="parquet",
                            rows_per_file=self.rows_per_file,
                            max_files_per_trigger=self.max_files_per_trigger, master=self.master,
                            partitions=self.partitions)

    @property
    def sentinel_after(self) -> timedelta:
        """How far after the data the sentinels lie: W = sentinel - grace then passes every
        record's time + within, so every outer row is final."""
        return self.grace + self.within + timedelta(seconds=1)


# ---------------------------------------------------------------- data


@dataclass(frozen=True)
class Side:
    """One stream's records in arrival (file) order, and what is needed to check them."""

    table: pa.Table  # in the stream's columns, arrival order
    ts_us: np.ndarray  # event times, arrival order
    arrival_us: np.ndarray  # event time + delay: the order the records are written in
    key: np.ndarray  # customer numbers, arrival order


def make_side(prefix: str, count: int, keys: int, start: datetime, rate: int, *,
              share: float = 0.0, disorder: timedelta = timedelta(0),
              file_span: timedelta = timedelta(0), seed: int = 1, left: Left = ORDERS) -> Side:
    """``count`` records ``rate`` a second from ``start``, customers drawn from ``keys``; a
    ``share`` of them delayed by ``file_span`` (the event time one file holds: so that they
    land in a later file than newer records) up to ``disorder``, uniformly (from half of
    ``disorder`` when a file holds more), then put in arrival order."""
    rng = np.random.default_rng(seed)
    start_us = int(start.timestamp() * 1_000_000)
    span_us = max(1, count * 1_000_000 // rate)
    ts_us = start_us + np.sort(rng.integers(0, span_us, count))
    most = max(2, int(disorder.total_seconds() * 1e6))
    least = int(file_span.total_seconds() * 1e6)
    least = least if least < most else most // 2
    delay = np.where(rng.random(count) < share, rng.integers(least, most, count), 0)
    order = np.argsort(ts_us + delay, kind="stable")
    ts_us, arrival_us, key = ts_us[order], (ts_us + delay)[order], rng.integers(0, keys, count)
    ids = np.char.add(f"{prefix}-", np.char.zfill(np.arange(count).astype(str), 9))
    is_left = prefix == "o"
    if is_left and left.bench is not None:  # the benchmark stream's rows, a (key, time) once
        ts = pa.array(ts_us, pa.timestamp("us", tz="UTC"))
        customers = pa.array(customer_names(key))
        table = left.bench.make_rows(customers, once_per_key(customers, ts), rng)
        ts_us = table.column(left.bench.time).cast(pa.int64()).to_numpy()
        return Side(table, ts_us, ts_us, key)
    table = pa.table({
        "order_id" if is_left else "shipment_id": pa.array(ids),
        left.on: pa.array(customer_names(key)),
        "amount" if is_left else "weight": pa.array(np.round(rng.uniform(1, 500, count), 2)),
        "ts": pa.array(ts_us, pa.timestamp("us", tz="UTC")),
    })
    return Side(table, ts_us, arrival_us, key)


def customer_names(key: np.ndarray) -> np.ndarray:
    return np.char.add("c-", np.char.zfill(key.astype(str), 6))


def in_later_file_pct(ts_us: np.ndarray, rows_per_file: int) -> float:
    """The share of records written into a later file than a record newer than them: older
    than the newest record of every file before theirs."""
    if not len(ts_us):
        return 0.0
    file_max = np.maximum.accumulate(
        [ts_us[i:i + rows_per_file].max() for i in range(0, len(ts_us), rows_per_file)])
    before = np.concatenate([[np.iinfo(np.int64).min], file_max[:-1]])
    per_row = np.repeat(before, rows_per_file)[:len(ts_us)]
    return round(float(np.mean(ts_us < per_row)) * 100, 1)


def expected_counts(left: Side, right: Side, before: timedelta, after: timedelta
                    ) -> dict[str, int]:
    """The join's pairs, unmatched left and unmatched right records, counted from the generated
    records alone (sorted (customer, time) and binary search; no database)."""
    origin = min(int(left.ts_us.min()), int(right.ts_us.min())) - 3_600_000_000
    b_us, a_us = int(before.total_seconds() * 1e6), int(after.total_seconds() * 1e6)

    def code(key: np.ndarray, ts: np.ndarray) -> np.ndarray:
        return (key.astype(np.int64) << 40) + (ts - origin)

    rights = np.sort(code(right.key, right.ts_us))
    per_left = (np.searchsorted(rights, code(left.key, left.ts_us + a_us), "right")
                - np.searchsorted(rights, code(left.key, left.ts_us - b_us), "left"))
    lefts = np.sort(code(left.key, left.ts_us))
    per_right = (np.searchsorted(lefts, code(right.key, right.ts_us + b_us), "right")
                 - np.searchsorted(lefts, code(right.key, right.ts_us - a_us), "left"))
    return {"pairs": int(per_left.sum()), "left_only": int((per_left == 0).sum()),
            "right_only": int((per_right == 0).sum())}


def sentinel(side: Side, name: str, at: datetime, customer: str, left: Left = ORDERS
             ) -> pa.Table:
    """One record of ``side``'s shape at ``at``, with a customer nobody else has (a benchmark
    stream's: its own row for that key and time)."""
    when = pa.array([at], pa.timestamp("us", tz="UTC"))
    cols = side.table.column_names
    if left.bench is not None and left.id in cols and "shipment_id" not in cols:
        return left.bench.make_rows(pa.array([customer]), when, np.random.default_rng(0))
    return pa.table({cols[0]: [name], cols[1]: [customer], cols[2]: [0.0], "ts": when})


# ---------------------------------------------------------------- stores


def declare(conn: psycopg.Connection, opts: JoinBenchOptions, *, join: bool,
            seed_at: datetime, now: datetime) -> None:
    """The two streams (grace: the join's), one record each at ``seed_at`` (a batch's writes:
    insert, stream time raised), and the join when ``join``. ``conn``: autocommit. A benchmark
    stream as the left one is declared as its benchmarks declare it (the built-in one is there)."""
    left = opts.left
    if left.bench is not None:
        left.bench.declare(conn, grace=opts.grace)
    for name, key, cols in ((left.name, left.id, left.columns),
                            (RIGHT, "shipment_id", left.right_columns)):
        if name == RIGHT or left.bench is None:
            streams.define(conn, name, key=key, time="ts", columns=cols, grace=opts.grace)
        with conn.transaction():
            _seed(conn, left, name, key, seed_at)
            conn.execute("SELECT slidewin.ingest_advance(%s, %s, %s, %s)",
                         (name, seed_at, now, opts.grace))
    if join:
        joins.define(conn, JOIN, left=left.name, right=RIGHT, on=left.on,
                     join_type=opts.join_type, before=opts.within, after=opts.within,
                     grace=opts.grace)


def _seed(conn: psycopg.Connection, left: Left, name: str, key: str, at: datetime) -> None:
    """One record of stream ``name`` at ``at``, its key (and on-column) ``seed-<name>``."""
    seed = f"seed-{name}"
    if name == left.name and left.bench is not None and not left.bench.declared:
        conn.execute("INSERT INTO slidewin.events (part, uuid, val, ts) "
                     "VALUES (slidewin.partition_of(%s), %s, 0, %s)", (seed, seed, at))
        return
    table = left.table if name == left.name else sql.Identifier("slidewin_streams", name)
    if name == left.name and left.bench is not None:  # a whole row of it: its required columns
        row = left.bench.make_rows(pa.array([seed]), pa.array([at], pa.timestamp("us", tz="UTC")),
                                   np.random.default_rng(0)).to_pylist()[0]
    else:
        row = {**dict.fromkeys((key, left.on), seed), "ts": at}
    conn.execute(sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        table, sql.SQL(", ").join(map(sql.Identifier, row)),
        sql.SQL(", ").join(sql.Placeholder() * len(row))), list(row.values()))


def match(conn: psycopg.Connection, name: str, start: datetime, end: datetime) -> dict[str, Any]:
    """The stored results of join ``name`` against its exact answer over [start, end), as
    multisets of both sides' (time, key): ``results_match``, the counts, and how many results
    are missing from the store or extra in it."""
    stored = Counter(joins.results(conn, name))
    exact = Counter(joins.exact(conn, name, start, end))
    return {"results_match": stored == exact, "result_count": sum(stored.values()),
            "exact_count": sum(exact.values()), "missing": sum((exact - stored).values()),
            "extra": sum((stored - exact).values())}


def shape(answer: Counter) -> dict[str, int]:
    """Pairs and outer rows of an answer of (l_ts, l_key, r_ts, r_key)."""
    out = {"pairs": 0, "left_only": 0, "right_only": 0}
    for (l_ts, _lk, r_ts, _rk), n in answer.items():
        out["pairs" if l_ts is not None and r_ts is not None
            else "left_only" if r_ts is None else "right_only"] += n
    return out


def show_times(conn: psycopg.Connection, start: datetime, end: datetime, calls: int
               ) -> dict[str, Any]:
    """``slidewin.join_show(JOIN, t - 1 min, t, SHOW_LIMIT)`` at ``calls`` times t over
    [start + 1 min, end], each timed through db.joins.show: ms p50 / p95, rows returned."""
    rng = np.random.default_rng(3)
    lo = start + timedelta(minutes=1)
    span = max(0.0, (end - lo).total_seconds())
    times, rows = [], []
    for offset in rng.uniform(0, span, calls):
        t = lo + timedelta(seconds=float(offset))
        began = time.perf_counter()
        answers = joins.show(conn, JOIN, t - timedelta(minutes=1), t, SHOW_LIMIT)
        times.append((time.perf_counter() - began) * 1000)
        rows.append(len(answers))
    return {"joins_show_1m_ms_p50": round(median(times), 3),
            "joins_show_1m_ms_p95": round(percentile(times, 95), 3),
            "joins_show_limit": SHOW_LIMIT, "joins_show_calls": calls,
            "joins_show_rows_median": median(rows)}


# ---------------------------------------------------------------- (d) the plain Spark peer


def _spark_schema(columns: Sequence[Column]) -> str:
    return ", ".join(f"`{c.name}` {SPARK_TYPES[c.type]}" for c in columns)


def plain_spark_join(spark: SparkSession, land: Path, checkpoint: Path, dsn: str,
                     opts: JoinBenchOptions) -> float:
    """The join written by hand in plain Spark (see (d) above), into table ``plain_spark`` of
    ``dsn``; the seconds from the query's start to its end."""
    from pyspark.sql import functions as F

    def read(name: str, columns: Sequence[Column], prefix: str) -> DataFrame:
        df = (spark.readStream.schema(_spark_schema(columns))
              .option("maxFilesPerTrigger", opts.max_files_per_trigger)
              .parquet(str(land / name)))
        df = df.select(*[F.col(c.name).alias(f"{prefix}_{c.name}") for c in columns])
        return df.withWatermark(f"{prefix}_ts", f"{int(opts.grace.total_seconds())} seconds")

    left = opts.left
    within = int(opts.within.total_seconds() * 1000)
    condition = F.expr(
        f"r_{left.on} = l_{left.on} AND r_ts BETWEEN l_ts - INTERVAL {within} MILLISECONDS "
        f"AND l_ts + INTERVAL {within} MILLISECONDS")
    how = {"inner": "inner", "left": "leftOuter", "right": "rightOuter",
           "full": "fullOuter"}[opts.join_type]
    joined = read(left.name, left.columns, "l").join(read(RIGHT, left.right_columns, "r"),
                                                     condition, how)
    both = [("l", c) for c in left.columns] + [("r", c) for c in left.right_columns]
    columns = [f"{side}_{c.name}" for side, c in both]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE plain_spark ({})").format(sql.SQL(", ").join(
            sql.SQL("{} {}").format(sql.Identifier(f"{side}_{c.name}"), sql.SQL(c.type))
            for side, c in both)))
        copy_sql = f"COPY plain_spark ({', '.join(columns)}) FROM STDIN (FORMAT csv)"

        def write(batch: DataFrame, _batch_id: int) -> None:
            rows = batch.select(*columns).toArrow()
            if rows.num_rows:
                with conn.transaction(), conn.cursor() as cur, cur.copy(copy_sql) as copy:
                    copy.write(csv_bytes(rows))

        started = time.perf_counter()
        query = (joined.writeStream.foreachBatch(write)
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        return time.perf_counter() - started


def plain_spark_answer(dsn: str, left: Left = ORDERS) -> Counter:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(sql.SQL("SELECT l_ts, {}, r_ts, r_shipment_id FROM plain_spark")
                            .format(sql.Identifier(f"l_{left.id}"))).fetchall()
    return Counter(tuple(r) for r in rows)


# ---------------------------------------------------------------- (e) freshness


class _Producer:
    """One file per stream per second: the orders of that second, and the shipments whose
    arrival second it is; when each record's file became visible (wall clock)."""

    def __init__(self, land: Path, opts: JoinBenchOptions, start: datetime) -> None:
        self.land, self.opts = land, opts
        n = opts.freshness_rate * opts.freshness_seconds
        self.left = make_side("o", n, opts.keys, start, opts.freshness_rate, seed=31,
                              left=opts.left)
        self.right = make_side("s", n, opts.keys, start, opts.freshness_rate,
                               share=opts.disorder_share, disorder=opts.disorder,
                               file_span=timedelta(seconds=1), seed=32, left=opts.left)
        self.start_us = int(start.timestamp() * 1_000_000)
        # (a record's key, its time in µs) -> when its file was renamed in
        self.visible: dict[tuple[str, int], float] = {}
        self.written = 0

    def run(self, stop: threading.Event) -> None:
        parts = []
        left = self.opts.left
        for folder, side in ((left.landing(self.land), self.left),
                             (self.land / RIGHT, self.right)):
            folder.mkdir(parents=True, exist_ok=True)
            second = np.minimum((side.arrival_us - self.start_us) // 1_000_000,
                                self.opts.freshness_seconds - 1)
            parts.append((folder, side, second))
        tick = time.perf_counter()
        for k in range(self.opts.freshness_seconds):
            if stop.is_set():
                return
            for folder, side, second in parts:
                rows = np.flatnonzero(second == k)
                if not len(rows):
                    continue
                chunk = side.table.take(pa.array(rows))
                write_file(chunk, folder, f"live-{k:05d}", "parquet")
                now = time.time()
                ids = chunk.column(0).to_pylist()
                for rid, us in zip(ids, side.ts_us[rows].tolist(), strict=True):
                    self.visible[(rid, us)] = now
                self.written += len(rows)
            stop.wait(max(0.0, tick + k + 1 - time.perf_counter()))


class _Poller:
    """When each result was first seen committed (wall clock), reading new ones every 50 ms."""

    def __init__(self, dsn: str) -> None:
        self.dsn, self.stop = dsn, threading.Event()
        self.seen: dict[int, float] = {}
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        last = 0
        query = sql.SQL("SELECT seq FROM {} WHERE seq > %s").format(
            sql.Identifier("slidewin_joins", JOIN))
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self.stop.is_set():
                rows = conn.execute(query, (last,)).fetchall()
                now = time.time()
                for (seq,) in rows:
                    self.seen.setdefault(seq, now)
                    last = max(last, seq)
                self.stop.wait(0.05)


def freshness(spark: SparkSession, admin: str, work: Path, opts: JoinBenchOptions,
              progress: Callable[[str], None]) -> dict[str, Any]:
    """(e) above: a live ingest of files appearing once a second; pair freshness p50 / p95."""
    start = datetime.now(UTC).replace(microsecond=0)
    with scratch_database(admin, partitions=opts.partitions) as store:
        with psycopg.connect(store, autocommit=True) as conn:
            declare(conn, opts, join=True, seed_at=start - timedelta(seconds=1),
                    now=datetime.now(UTC))
        config = replace(ingest_config(work, "live", opts.bench()), trigger=opts.trigger,
                         max_future=timedelta(minutes=1), grace=timedelta(minutes=10))
        prepared = preflight(config, store)
        producer = _Producer(config.landing, opts, start + timedelta(seconds=3))
        stop = threading.Event()
        runner = threading.Thread(target=run, args=(prepared, store, lambda _l: None, stop,
                                                    spark), daemon=True)
        runner.start()
        poller = _Poller(store)
        poller.thread.start()
        try:
            time.sleep(3.0)  # let the queries start before the first files land
            producer.run(stop)
            _drained(store, opts.left, producer.written + 2, timeout_s=120)
            time.sleep(0.2)
        finally:
            stop.set()
            runner.join(timeout=120)
            poller.stop.set()
            poller.thread.join(timeout=10)
        with psycopg.connect(store, autocommit=True) as conn:
            pairs = conn.execute(sql.SQL(
                "SELECT seq, {}, l_ts, r_shipment_id, r_ts, "
                "extract(epoch FROM emitted_at)::float8 "
                "FROM {} WHERE l_ts IS NOT NULL AND r_ts IS NOT NULL").format(
                    sql.Identifier(f"l_{opts.left.id}"),
                    sql.Identifier("slidewin_joins", JOIN))).fetchall()
            offset = _clock_offset(conn)
    emitted, visible = [], []
    for seq, lid, l_ts, rid, r_ts, at in pairs:
        lkey, rkey = (lid, _us(l_ts)), (rid, _us(r_ts))
        if lkey not in producer.visible or rkey not in producer.visible:
            continue
        later = max(producer.visible[lkey], producer.visible[rkey])
        emitted.append(at - offset - later)
        if seq in poller.seen:
            visible.append(poller.seen[seq] - later)
    progress(f"(e) freshness: {len(emitted):,} pairs over {opts.freshness_seconds} s")
    return {
        "result_freshness_p50_s": _pct(emitted, 50), "result_freshness_p95_s": _pct(emitted, 95),
        "result_visible_p50_s": _pct(visible, 50), "result_visible_p95_s": _pct(visible, 95),
        "result_freshness_pairs": len(emitted), "freshness_seconds": opts.freshness_seconds,
        "freshness_rate": opts.freshness_rate, "db_clock_offset_ms": round(offset * 1000, 3),
    }


def _pct(samples: list[float], q: float) -> float | None:
    return round(percentile(samples, q), 3) if samples else None


def _us(t: datetime) -> int:
    """A time as microseconds since the epoch (the generated records' times)."""
    return (t - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def _drained(dsn: str, left: Left, rows: int, timeout_s: float) -> None:
    """Until both streams hold ``rows`` records together (or the timeout)."""
    deadline = time.monotonic() + timeout_s
    query = sql.SQL("SELECT (SELECT count(*) FROM {}) + (SELECT count(*) FROM {})").format(
        left.table, sql.Identifier("slidewin_streams", RIGHT))
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(query).fetchone()
            if row and row[0] >= rows:
                return
            time.sleep(0.1)


def _clock_offset(conn: psycopg.Connection) -> float:
    """The database's clock minus this process's wall clock, seconds (about 0 on one host)."""
    before = time.time()
    row = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
    after = time.time()
    return float(row[0]) - (before + after) / 2 if row else 0.0


# ---------------------------------------------------------------- the whole run


@dataclass
class _Data:
    left: Side
    right: Side
    start: datetime  # the first generated record's time (the seeds lie a second before)
    newest: datetime  # the newest generated record's time
    end: datetime  # the sentinels' time: every record before it is checked
    expected: dict[str, int]  # the join's pairs and outer rows of its type, from the records


def _generate(work: Path, opts: JoinBenchOptions, progress: Callable[[str], None]) -> _Data:
    span = timedelta(seconds=opts.events / opts.rate)
    start = (datetime.now(UTC) - timedelta(minutes=5) - span).replace(microsecond=0)
    progress(f"generating {opts.events:,} orders and as many shipments ({opts.keys:,} customers, "
             f"{span.total_seconds():,.0f} s of event time) in {work}")
    left = make_side("o", opts.events, opts.keys, start, opts.rate, seed=21, left=opts.left)
    right = make_side("s", opts.events, opts.keys, start, opts.rate, share=opts.disorder_share,
                      disorder=opts.disorder,
                      file_span=timedelta(seconds=opts.rows_per_file / opts.rate), seed=22,
                      left=opts.left)
    newest = datetime.fromtimestamp(max(left.ts_us.max(), right.ts_us.max()) / 1e6, UTC)
    end = (newest + opts.sentinel_after).replace(microsecond=0)
    for name, side in ((opts.left.name, left), (RIGHT, right)):
        last = pa.concat_tables([side.table, sentinel(side, f"end-{name}", end, f"end-{name}",
                                                      opts.left)])
        write_landing(last, work / "landing" / name, opts.bench())
    counts = expected_counts(left, right, opts.within, opts.within)
    if opts.join_type not in ("left", "full"):
        counts["left_only"] = 0
    if opts.join_type not in ("right", "full"):
        counts["right_only"] = 0
    return _Data(left, right, start, newest, end, counts)


def _landing_copy(work: Path, name: str, left: Left, files: int | None = None, *,
                  by_name: bool = False) -> str:
    """A copy of the generated landing folders (the ingest deletes what it read), mtimes kept;
    ``files``: the first few files of each stream only. The left stream's files go where the
    ingest reads them (the built-in stream's: the landing folder itself), or with ``by_name``
    to a folder of its name as the right stream's (the plain Spark join's)."""
    for stream in (left.name, RIGHT):
        into = work / name / stream
        if stream == left.name and not by_name:
            into = left.landing(work / name)
        copy_landing(work / "landing" / stream, into, files)
    return name


def run_bench(admin: str, opts: JoinBenchOptions, progress: Callable[[str], None],
              check: Check | None = None) -> dict[str, Any]:
    """(a)-(e) above; the report (the JSON line's keys). ``check(conn, start, end, result)`` is
    called on each store with the join once its results over [start, end) were compared."""
    from slidewin.ingest.java import check_java
    from slidewin.ingest.spark import build_session, stop_session

    check_java()
    work = Path(tempfile.mkdtemp(prefix="slidewin-bench-joins-"))
    try:
        data = _generate(work, opts, progress)
        seconds: dict[str, list[float]] = {v: [] for v in VARIANTS}
        # the comparisons of each run; "reference": the exact answer of the first run with the
        # join over the generated records (the plain Spark runs are compared with it)
        found: dict[str, Any] = {"matches": [], "peer": []}
        spark = build_session(opts.master)
        try:
            progress("warming Spark up (one small run, not counted)")
            _ingest(spark, admin, work, opts, data, "without",
                    _landing_copy(work, "warm", opts.left, 2), found, None)
            if opts.plain_spark:
                _peer(spark, admin, work,
                      _landing_copy(work, "warm-peer", opts.left, 2, by_name=True), opts, None)
            variants = VARIANTS if opts.plain_spark else VARIANTS[:2]
            for r in range(opts.runs):
                for variant in variants if r % 2 == 0 else tuple(reversed(variants)):
                    land = _landing_copy(work, f"{variant}-{r}", opts.left,
                                         by_name=variant == "plain_spark")
                    if variant == "plain_spark":
                        took = _peer(spark, admin, work, land, opts, found)
                    else:
                        took = _ingest(spark, admin, work, opts, data, variant, land, found,
                                       check, last=r == opts.runs - 1)
                    seconds[variant].append(took)
                progress(f"run {r + 1}/{opts.runs}: " + ", ".join(
                    f"{v} {s[-1]:.1f} s" for v, s in seconds.items() if s))
            report = _report(opts, data, seconds, found)
            if opts.freshness_seconds > 0:
                report.update(freshness(spark, admin, work, opts, progress))
        finally:
            stop_session(spark)
        return report
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _ingest(spark: SparkSession, admin: str, work: Path, opts: JoinBenchOptions, data: _Data,
            variant: str, land: str, found: dict[str, Any], check: Check | None, *,
            last: bool = False) -> float:
    """One ``--once`` run over ``land``; with the join, its results compared afterwards (and,
    on the last run, join_show timed). The seconds of the run."""
    with scratch_database(admin, partitions=opts.partitions) as store:
        with psycopg.connect(store, autocommit=True) as conn:
            declare(conn, opts, join=variant == "with",
                    seed_at=data.start - timedelta(seconds=1), now=datetime.now(UTC))
        config = ingest_config(work, land, opts.bench(), once=True)
        took = float(end_to_end(spark, store, config, lambda _l: None)["ingest_seconds"])
        if variant == "with" and not land.startswith("warm"):
            with psycopg.connect(store, autocommit=True) as conn:
                found["matches"].append(_check_join(conn, opts, data, found, check))
                if last:
                    found.update(show_times(conn, data.start, data.newest, opts.shows))
    return took


def _check_join(conn: psycopg.Connection, opts: JoinBenchOptions, data: _Data,
                found: dict[str, Any], check: Check | None) -> dict[str, Any]:
    # stream time has passed every record already (the sentinels); an advance with a clock far
    # ahead changes nothing then, and would finish the job if it had not
    joins.advance(conn, datetime.now(UTC) + timedelta(days=1))
    seeds = data.start - timedelta(seconds=1)
    result = match(conn, JOIN, seeds, data.end)
    reference = Counter(joins.exact(conn, JOIN, data.start, data.end))
    result["exact_shape"] = shape(reference)
    result["exact_matches_generator"] = result["exact_shape"] == data.expected
    status = joins.status(conn, JOIN)
    complete = bool(status.complete_up_to and status.complete_up_to > data.newest)
    result.update(late_left=status.late_left, late_right=status.late_right,
                  **_stored(conn, opts.left), complete_past_every_record=complete)
    found.setdefault("reference", reference)
    if check is not None:
        check(conn, seeds, data.end, result)
    return result


def _stored(conn: psycopg.Connection, left: Left = ORDERS) -> dict[str, int]:
    """Records stored per stream and dead letters (a generated record never is one)."""
    out = {}
    for name, table in ((left.name, left.table),
                        (RIGHT, sql.Identifier("slidewin_streams", RIGHT))):
        row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
        out[f"{name}_stored"] = int(row[0]) if row else 0
    row = conn.execute("SELECT count(*) FROM slidewin.dead_letters").fetchone()
    out["dead_letters"] = int(row[0]) if row else 0
    return out


def _peer(spark: SparkSession, admin: str, work: Path, land: str, opts: JoinBenchOptions,
          found: dict[str, Any] | None) -> float:
    """One run of the plain Spark join over ``land``; its answer compared with the exact
    answer of the first run with the join (which the alternating order runs before it)."""
    with scratch_database(admin) as target:
        took = plain_spark_join(spark, work / land, work / f"{land}-checkpoint", target, opts)
        if found is not None:
            answer, reference = plain_spark_answer(target, opts.left), found["reference"]
            found["peer"].append({
                "match": answer == reference, "count": sum(answer.values()),
                "shape": shape(answer), "missing": sum((reference - answer).values()),
                "extra": sum((answer - reference).values()),
                "reference_count": sum(reference.values())})
    return took


def _report(opts: JoinBenchOptions, data: _Data, seconds: dict[str, list[float]],
            found: dict[str, Any]) -> dict[str, Any]:
    med = {v: median(s) for v, s in seconds.items() if s}
    matches: list[dict[str, Any]] = found["matches"]
    last = matches[-1] if matches else {}
    report: dict[str, Any] = {
        "stream": opts.left.name,
        "events": opts.events, "keys": opts.keys, "runs": opts.runs, "rate_per_s": opts.rate,
        "join": {"type": opts.join_type, "within_s": opts.within.total_seconds(),
                 "grace_s": opts.grace.total_seconds(), "on": opts.left.on,
                 "left": opts.left.name, "right": RIGHT},
        "disorder_share": opts.disorder_share, "disorder_max_s": opts.disorder.total_seconds(),
        "right_in_later_file_pct": in_later_file_pct(data.right.ts_us, opts.rows_per_file),
        "rows_per_file": opts.rows_per_file,
        "files_per_stream": -(-(opts.events + 1) // opts.rows_per_file),
        "max_files_per_trigger": opts.max_files_per_trigger, "master": opts.master,
        "ingest_seconds_without_join": round(med["without"], 2),
        "ingest_seconds_with_join": round(med["with"], 2),
        "ingest_events_per_s_without_join": round(2 * opts.events / med["without"]),
        "ingest_events_per_s_with_join": round(2 * opts.events / med["with"]),
        "join_cost_pct": round((med["with"] / med["without"] - 1) * 100, 1),
        "seconds_per_run": {v: [round(x, 2) for x in s] for v, s in seconds.items() if s},
        "results_match": bool(matches) and all(m["results_match"] for m in matches),
        "results_match_runs": [m["results_match"] for m in matches],
        "exact_matches_generator": bool(matches) and all(
            m["exact_matches_generator"] for m in matches),
        "result_count": last.get("result_count"), "exact_count": last.get("exact_count"),
        "results_missing": last.get("missing"), "results_extra": last.get("extra"),
        "generated": data.expected, "exact": last.get("exact_shape"),
        "late_left": last.get("late_left"), "late_right": last.get("late_right"),
        "complete_past_every_record": bool(matches) and all(
            m["complete_past_every_record"] for m in matches),
        f"{opts.left.name}_stored": last.get(f"{opts.left.name}_stored"),
        "shipments_stored": last.get("shipments_stored"),
        "dead_letters": last.get("dead_letters"),
    }
    for key in ("joins_show_1m_ms_p50", "joins_show_1m_ms_p95", "joins_show_limit",
                "joins_show_calls", "joins_show_rows_median"):
        report[key] = found.get(key)
    if found["peer"]:
        peer = found["peer"][-1]
        report.update({
            "plain_spark_join_seconds": round(med["plain_spark"], 2),
            "plain_spark_result_count": peer["count"],
            "plain_spark_results_match": all(p["match"] for p in found["peer"]),
            "plain_spark_shape": peer["shape"], "plain_spark_missing": peer["missing"],
            "plain_spark_extra": peer["extra"], "reference_count": peer["reference_count"],
            "speedup_vs_plain_spark_join": round(med["plain_spark"] / med["with"], 3),
        })
    report["targets"] = TARGETS
    report["notes"] = NOTES
    return report


TARGETS = {"join_cost_pct": "<= 25", "joins_show_1m_ms_p50": "<= 5",
           "results_match": "true"}
NOTES = [
    "ingest seconds: slidewin ingest --once's code path from the queries' start to the last "
    "batch's commit, both streams at once, the same files; medians of the runs",
    "both stores hold one record per stream before the run, as a running store would; a cold "
    "start can make the first records of the stream whose first batch commits second late for "
    "the join (W ignores an input with no data)",
    "results_match: every stored result against slidewin.join_exact over every record before "
    "the sentinels, as multisets of both sides' (time, key), after each run with the join",
    f"joins_show: slidewin.join_show(name, t - 1 min, t, {SHOW_LIMIT}), {SHOW_LIMIT} being the "
    "default limit of slidewin joins show; t drawn over the data",
    "result_freshness: pair's emitted_at (clock_timestamp() in the batch transaction, before its "
    "commit) minus the wall time the later of its two records' files was renamed into the "
    "landing folder; result_visible: the same to when a poller (every 50 ms) first read it",
    "plain_spark: the same files, two Parquet file streams, withWatermark(grace) on both, a "
    "stream-stream join with the range condition, foreachBatch COPY of the joined rows into one "
    "PostgreSQL table; it keeps neither stream's records nor rollups, and its results are "
    "compared with the exact answer of the records it read (the stores' seeds left out)",
    "both joins need stream time to pass the last records before their outer rows are final: "
    "the files end with a sentinel record per stream for that, read by both; whether Spark's "
    "availableNow run wrote every outer row shows in plain_spark_missing",
    "generated: the join's pairs and outer rows counted from the generated records in numpy, "
    "without the database; exact_matches_generator: slidewin.join_exact gives the same counts",
]
