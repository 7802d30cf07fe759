"""``slidewin bench client``: can the simulator keep up, and what do its watchers cost?

1. Generator rate: the unthrottled generator writes into a temporary landing directory for a
   few seconds; events/s, median of the repeats (per format).
2. Reporter overhead: the same files are ingested by the real ingest (``slidewin ingest --once``,
   a subprocess, into a fresh database each run) with and without the reporter, the max tracker
   and the freshness poller running against that database (reports every second -- five times
   VoltDB's default -- max polled every 10 ms). The ingest rate is measured between its first
   and last batch lines (Spark's start-up and first, JIT-heavy batch excluded): rows of batches
   2..n over the time from batch 1's line to batch n's. Runs alternate with/without so drift on
   a shared machine hits both; overhead = 1 - median(with) / median(without), in percent.
"""

from __future__ import annotations

import re
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from client.freshness import FreshnessTracker
from client.generator import EventGenerator, GeneratorConfig, GeneratorStats
from client.maxtracker import MaxTracker
from client.processes import slidewin_argv, start_child
from client.reporter import Failures, Reporter, StoreWatch
from db.connect import connect
from db.errors import SlidewinError
from db.schema import init_schema


class BenchError(SlidewinError):
    """The benchmark could not measure (the ingest failed or ran too few batches)."""


BATCH_LINE = re.compile(r"^\[text\] batch (\d+): in (\d+),")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class BenchSettings:
    seconds: float = 3.0
    repeats: int = 3
    events: int = 200_000
    file_events: int = 2500
    files_per_batch: int = 8
    ingest_repeats: int = 2


def generator_rate(fmt: str, seconds: float, repeats: int) -> list[float]:
    """Unthrottled events/s of the generator, one figure per repeat."""
    rates = []
    for i in range(repeats):
        with tempfile.TemporaryDirectory(prefix="slidewin-bench-gen-") as tmp:
            gen = EventGenerator(GeneratorConfig(Path(tmp), rate=0, fmt=fmt, seed=i))
            began = time.monotonic()
            gen.run(threading.Event(), until=began + seconds)
            rates.append(gen.stats.events / (time.monotonic() - began))
    return rates


def make_source(folder: Path, events: int, per_file: int) -> int:
    """The fixed data set: ``events`` events in files of ``per_file``, timestamps of the last
    second (so no rule of the ingest rejects them: no late, expired or future events)."""
    gen = EventGenerator(GeneratorConfig(folder, seed=42))
    end = datetime.now(UTC)
    files = -(-events // per_file)
    span = timedelta(seconds=1) / files
    for i in range(files):
        gen.write_batch(per_file, end - span * (files - i), end - span * (files - i - 1))
    return files * per_file


def fresh_database(admin_dsn: str, name: str) -> str:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    params = {k: str(v) for k, v in conninfo_to_dict(admin_dsn).items()}
    params["dbname"] = name
    dsn = make_conninfo(**params)
    with psycopg.connect(dsn) as conn:
        init_schema(conn)
    return dsn


def drop_database(admin_dsn: str, name: str) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))


class Watchers:
    """The reporter, max tracker and freshness poller, running against ``dsn`` in threads."""

    def __init__(self, dsn: str) -> None:
        self.stop = threading.Event()
        self.conns = [connect(dsn, autocommit=True) for _ in range(4)]
        gen_stats = GeneratorStats()  # nothing generates here: only the ingest writes
        fresh = FreshnessTracker()
        self.reporter = Reporter(self.conns[0], StoreWatch(self.conns[1]), gen_stats, fresh,
                                 Failures())
        self.tracker = MaxTracker(self.conns[2], 30)
        self.fresh, self.polls = fresh, 0
        self.threads = [
            threading.Thread(target=self._loop, args=(1.0, self.reporter.report), daemon=True),
            threading.Thread(target=self.tracker.run, args=(self.stop,), daemon=True),
            threading.Thread(target=self._loop, args=(0.1, self._fresh_poll), daemon=True),
        ]

    def _fresh_poll(self) -> None:
        self.conns[3].execute("SELECT sum(n) FROM slidewin.rollups WHERE sec >= now() - "
                              "interval '5 seconds'").fetchone()

    def _loop(self, interval: float, step: Callable[[], object]) -> None:
        while not self.stop.wait(interval):
            step()

    def __enter__(self) -> Watchers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)
        for c in self.conns:
            c.close()


def ingest_rate(dsn: str, source: Path, work: Path, files_per_batch: int,
                watch: bool, progress: Progress) -> float:
    """Rows/s of one ``slidewin ingest --once`` over a copy of ``source`` (see module doc)."""
    landing = work / "landing"
    shutil.copytree(source, landing)
    marks: list[tuple[float, int]] = []

    def on_line(text: str) -> None:
        found = BATCH_LINE.match(text)
        if found:
            marks.append((time.monotonic(), int(found.group(2))))

    argv = slidewin_argv("--dsn", dsn, "--data-dir", str(work), "ingest", "--once",
                         "--landing", str(landing), "--checkpoint-dir", str(work / "ckpt"),
                         "--processed", "keep", "--query-id", "bench",
                         "--max-files-per-trigger", str(files_per_batch))
    if watch:
        with Watchers(dsn):
            code = _run_child(argv, work, on_line)
    else:
        code = _run_child(argv, work, on_line)
    if code != 0 or len(marks) < 3:
        raise BenchError(
            f"the ingest exited {code} after {len(marks)} batches (3 needed: raise --events); "
            f"see {work / 'ingest.log'}"
        )
    rows = sum(n for _, n in marks[1:])
    rate = rows / (marks[-1][0] - marks[0][0])
    progress(f"  ingest {'with' if watch else 'without'} watchers: {rate:,.0f} rows/s "
             f"({len(marks)} batches)")
    return rate


def _run_child(argv: list[str], work: Path, on_line: Callable[[str], None]) -> int | None:
    child = start_child("ingest", argv, work / "ingest.log", on_line=on_line)
    child.proc.wait()
    return child.stop()


def reporter_overhead(admin_dsn: str, settings: BenchSettings,
                      progress: Progress) -> tuple[list[float], list[float]]:
    """Ingest rates without and with the watchers, alternating."""
    without: list[float] = []
    with_: list[float] = []
    with tempfile.TemporaryDirectory(prefix="slidewin-bench-client-") as tmp:
        source = Path(tmp) / "source"
        make_source(source, settings.events, settings.file_events)
        for i in range(settings.ingest_repeats):
            for watch in (False, True) if i % 2 == 0 else (True, False):
                name = f"slidewin_bench_client_{int(time.time())}_{i}_{int(watch)}"
                dsn = fresh_database(admin_dsn, name)
                work = Path(tmp) / name
                try:
                    rate = ingest_rate(dsn, source, work, settings.files_per_batch, watch,
                                       progress)
                finally:
                    drop_database(admin_dsn, name)
                (with_ if watch else without).append(rate)
    return without, with_


def summarize(
    gen: dict[str, list[float]], without: list[float], with_: list[float]
) -> dict[str, Any]:
    base, loaded = statistics.median(without), statistics.median(with_)
    return {
        "generator_events_per_s": round(statistics.median(gen["csv"])),
        "generator_events_per_s_by_format": {
            k: round(statistics.median(v)) for k, v in gen.items()},
        "ingest_rows_per_s_without_watchers": round(base),
        "ingest_rows_per_s_with_watchers": round(loaded),
        "reporter_overhead_pct": round((1 - loaded / base) * 100, 2),
        "generator_vs_ingest": round(statistics.median(gen["csv"]) / base, 1),
        "runs": {"without": [round(r) for r in without], "with": [round(r) for r in with_]},
        "targets": {"generator_events_per_s": ">= 500000", "reporter_overhead_pct": "<= 5"},
    }
