"""``slidewin bench sessions``: what keeping session windows costs the ingest, and how fast they
and one key's windows answer.

Data: ``events`` events of ``keys`` keys over the hour before now, each key active in a few
bursts (events a few seconds apart) with long pauses, so sessions form; written as Parquet files
in time order, as a live stream lands them.

Side by side, in alternating order, ``rounds`` times, each into a fresh store on the same
server: (a) the sink's COPY (no Spark: the database's own cost), and (b) the whole
``slidewin ingest --once`` path, each for a plain store, one with a session definition (gap
30 s, grace 5 s, retention 2 h) and one with the key index (``slidewin.key_index``). A cost is
``1 - with / without`` of the medians. Then, on the last store with sessions: a key's sessions
(``slidewin.sessions(key)``) and a tumbling 10 s series over one key's last hour
(``slidewin.key_window``) without and with the key index, each timed for ``lookups`` random
keys. A first end-to-end run, not counted, warms Spark up.

``stream``: the same over a declared benchmark stream (``--stream wide``, client/bench/streams.py)
-- the same keys and times, the stream's own columns, its files under ``<landing>/<stream>/``,
the definition over it (summing the stream's ``session_measure``: ``count``, the required
bigint column of ``wide``, so its sessions sum, as the built-in stream's sum ``val``) and the
copy phase through its own COPY. Its key
windows are ``slidewin.stream_tumbling`` over one key, and its key index is the stream's own
(``slidewin.key_index(true, stream)``: its table (key, time) INCLUDE (its measures)).
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg
import pyarrow as pa
from psycopg import sql

from slidewin.client.bench.ingest import BenchOptions, end_to_end, ingest_config, write_landing
from slidewin.client.bench.stats import median, percentile
from slidewin.client.bench.streams import BenchStream, bench_stream
from slidewin.db import key_windows, sessions, streams
from slidewin.db.scratch import scratch_database

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFINITION = sessions.SessionDef(
    "bench", timedelta(seconds=30), timedelta(seconds=5), timedelta(hours=2)
)


@dataclass(frozen=True)
class SessionBenchOptions:
    events: int = 1_000_000
    keys: int = 10_000
    rounds: int = 3
    lookups: int = 200
    rows_per_file: int = 100_000
    master: str = "local[*]"
    partitions: int = 8
    stream: str = "events"


def make_keyed_events(count: int, keys: int, end: datetime, seed: int = 11,
                      stream: BenchStream | None = None) -> pa.Table:
    """``count`` events of ``keys`` keys over the hour before ``end``, in time order: each
    event picks a key and one of its 4 bursts, and lies within 20 s of the burst's centre.
    ``stream``: that stream's rows for these keys and times (default: the built-in's)."""
    rng = np.random.default_rng(seed)
    names = np.array([f"key-{i:06d}" for i in range(keys)], dtype=object)
    centres = rng.uniform(20, 3580, size=(keys, 4))
    key = rng.integers(0, keys, count)
    burst = rng.integers(0, 4, count)
    at_s = centres[key, burst] + rng.uniform(-20, 20, count)
    order = np.argsort(at_s, kind="stable")
    start_us = int((end - timedelta(hours=1)).timestamp() * 1_000_000)
    ts = (at_s[order] * 1_000_000).astype(np.int64) + start_us
    return (stream or bench_stream("events")).make_rows(
        pa.array(names[key[order]], pa.string()), pa.array(ts, pa.timestamp("us", tz="UTC")),
        rng)


def variants(stream: BenchStream) -> tuple[str, ...]:
    """What the store keeps besides the rollups, one variant each (the key index: the
    stream's own)."""
    return ("plain", "sessions", "key_index")


def _prepare(dsn: str, variant: str, stream: BenchStream) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        stream.declare(conn)
        if variant == "sessions":
            sessions.define(conn, replace(DEFINITION, stream=stream.name,
                                          measure=stream.session_measure))
        elif variant == "key_index":
            key_windows.set_index(conn, True, stream.name)


def _copy_rate(admin: str, rows: pa.Table, opts: SessionBenchOptions, variant: str,
               stream: BenchStream) -> float:
    with scratch_database(admin, partitions=opts.partitions) as store:
        _prepare(store, variant, stream)
        return stream.copy_rate(store, rows, opts.rows_per_file)


def _e2e_rate(
    spark: SparkSession, admin: str, work: Path, opts: SessionBenchOptions, variant: str,
    keep: Callable[[str], None] | None, progress: Callable[[str], None],
) -> float:
    bench = BenchOptions(rows_per_file=opts.rows_per_file, master=opts.master,
                         partitions=opts.partitions)
    name = f"e2e-{variant}-{time.monotonic_ns()}"
    shutil.copytree(work / "landing", work / name)
    with scratch_database(admin, partitions=opts.partitions) as store:
        _prepare(store, variant, bench_stream(opts.stream))
        result = end_to_end(spark, store, ingest_config(work, name, bench, once=True), progress)
        if keep is not None:
            keep(store)
    return float(result["ingest_events_per_s"])


def _timed_ms(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def lookups(dsn: str, names: list[str], now: datetime,
            stream: BenchStream | None = None) -> dict[str, Any]:
    """p50 / p95 ms of a key's sessions and of a tumbling 10 s series over the key's last hour
    (without and with the stream's key index)."""
    stream = stream or bench_stream("events")
    out: dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        times = [_timed_ms(partial(sessions.sessions, conn, k)) for k in names]
        out["session_lookup_ms_p50"] = round(median(times), 3)
        out["session_lookup_ms_p95"] = round(percentile(times, 95), 3)
        found = [len(sessions.sessions(conn, k)) for k in names]
        out["sessions_per_key_median"] = median(found)
        stats = sessions.stats(conn)
        out["sessions_merges"] = stats.merges
        out.update(_key_windows(conn, names, now, stream))
        if stream.declared:
            out.update(_declared_figures(conn, stream, stats))
    return out


def _key_windows(conn: psycopg.Connection, names: list[str], now: datetime,
                 stream: BenchStream) -> dict[str, Any]:
    """A tumbling 10 s series over each key's last hour, without and then with the stream's key
    index."""
    start, end, size = now - timedelta(hours=1), now, timedelta(seconds=10)
    out: dict[str, Any] = {}
    for suffix, on in (("_noindex", False), ("", True)):
        key_windows.set_index(conn, on, stream.name)
        conn.execute(sql.SQL("ANALYZE {}").format(stream.table))  # as autovacuum would
        times = [_timed_ms(partial(_key_series, conn, stream, k, size, start, end))
                 for k in names]
        out[f"key_window{suffix}_ms_p50"] = round(median(times), 3)
        out[f"key_window{suffix}_ms_p95"] = round(percentile(times, 95), 3)
    return out


def _key_series(conn: psycopg.Connection, stream: BenchStream, key: str, size: timedelta,
                start: datetime, end: datetime) -> object:
    return streams.windows(conn, stream.name, "tumbling", size=size, start=start, end=end,
                           measure=stream.measure, key=key)


def _declared_figures(conn: psycopg.Connection, stream: BenchStream,
                      stats: sessions.SessionStats) -> dict[str, Any]:
    """What a declared stream's report adds: the rows its table holds, the sessions made from
    them and the definition's measure, with notes on what does not apply to it."""
    stored = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(stream.table)).fetchone()
    measure = sessions.definition(conn, DEFINITION.name).definition.measure
    notes = []
    if measure is None:
        notes.append(f"{stream.name} has no required bigint or integer measure, so its "
                     "sessions count events only (sum, min, max and avg NULL)")
    return {"rows_stored": int(stored[0]) if stored else 0, "sessions_created": stats.created,
            "session_measure": measure, "notes": notes}


def run_bench(admin: str, opts: SessionBenchOptions, progress: Callable[[str], None]) -> dict:
    """Run (a) and (b) side by side, then the lookups; the report (the JSON line's keys)."""
    from slidewin.ingest.java import check_java
    from slidewin.ingest.spark import build_session, stop_session

    stream = bench_stream(opts.stream)
    check_java()
    now = datetime.now(UTC)
    work = Path(tempfile.mkdtemp(prefix="slidewin-bench-sessions-"))
    try:
        table = make_keyed_events(opts.events, opts.keys, now - timedelta(seconds=5),
                                  stream=stream)
        write_landing(table, stream.landing(work / "landing"),
                      BenchOptions(rows_per_file=opts.rows_per_file, format="parquet"))
        copied = stream.copy_input(table, opts.partitions)
        kinds = variants(stream)
        rates: dict[str, list[float]] = {
            f"{phase}_{v}": [] for phase in ("copy", "e2e") for v in kinds
        }
        spark = build_session(opts.master)
        kept: list[str] = []
        try:
            progress("warming Spark up (one run, not counted)")
            _e2e_rate(spark, admin, work, opts, "plain", None, progress)
            for r in range(opts.rounds):
                order = kinds if r % 2 == 0 else tuple(reversed(kinds))
                for variant in order:
                    rates[f"copy_{variant}"].append(
                        _copy_rate(admin, copied, opts, variant, stream))
                for variant in order:
                    keep = None
                    if variant == "sessions" and r == opts.rounds - 1:  # the lookups' store

                        def keep(store: str) -> None:
                            kept.append(_lookups_now(store, table, opts, now, progress,
                                                     stream))

                    rate = _e2e_rate(spark, admin, work, opts, variant, keep, progress)
                    rates[f"e2e_{variant}"].append(rate)
                progress(f"round {r + 1}/{opts.rounds}: " + ", ".join(
                    f"{k} {v[-1]:,.0f}/s" for k, v in rates.items()))
        finally:
            stop_session(spark)
        return _report(opts, rates, kept, stream)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _lookups_now(store: str, table: pa.Table, opts: SessionBenchOptions, now: datetime,
                 progress: Callable[[str], None], stream: BenchStream) -> Any:
    names = random.Random(5).sample(  # noqa: S311 - a reproducible sample, not a secret
        sorted(set(table[stream.key].to_pylist())), opts.lookups)
    found = lookups(store, names, now, stream)
    progress(f"lookups: {found}")
    return found


def _cost(with_: float, without: float) -> float:
    return round((1 - with_ / without) * 100, 1)


def _report(opts: SessionBenchOptions, rates: dict[str, list[float]], kept: list,
            stream: BenchStream) -> dict:
    med = {k: median(v) for k, v in rates.items()}
    report: dict[str, Any] = {"events": opts.events, "keys": opts.keys, "rounds": opts.rounds}
    if stream.declared:
        report["stream"] = stream.name
    report.update({
        "gap_s": DEFINITION.gap.total_seconds(), "grace_s": DEFINITION.grace.total_seconds(),
        "copy_events_per_s": round(med["copy_plain"]),
        "copy_sessions_events_per_s": round(med["copy_sessions"]),
        "copy_key_index_events_per_s": round(med["copy_key_index"]),
        "session_copy_cost_pct": _cost(med["copy_sessions"], med["copy_plain"]),
        "key_index_copy_cost_pct": _cost(med["copy_key_index"], med["copy_plain"]),
        "ingest_events_per_s": round(med["e2e_plain"]),
        "ingest_sessions_events_per_s": round(med["e2e_sessions"]),
        "ingest_key_index_events_per_s": round(med["e2e_key_index"]),
        "session_ingest_cost_pct": _cost(med["e2e_sessions"], med["e2e_plain"]),
        "key_index_ingest_cost_pct": _cost(med["e2e_key_index"], med["e2e_plain"]),
        "runs": {k: [round(x) for x in v] for k, v in rates.items()},
    })
    if kept:
        report.update(kept[-1])
    return report
