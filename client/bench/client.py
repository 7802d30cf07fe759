"""``slidewin bench client``: can the simulator keep up, and what do its watchers cost?

1. Generator rate: the unthrottled generator writes into a temporary landing directory for a
   few seconds; events/s, median of the repeats (per format).
2. Reporter overhead: the same files are ingested by the real ingest (``slidewin ingest --once``,
   a subprocess, into a fresh database each run) with and without the reporter, the max tracker
   and the freshness poller running against that database (reports every second -- five times
   VoltDB's default -- max tracker and freshness poller looking every 10 ms). The ingest rate
   is measured between its first and last batch lines (Spark's start-up and first, JIT-heavy
   batch excluded): rows of batches 2..n over the time from batch 1's line to batch n's. Runs
   alternate with/without so drift on a shared machine hits both; overhead = median over pairs
   of 1 - with / without, in percent. Because a shared machine's noise can exceed the effect,
   the CPU the watchers used (their threads and their server backends) is also reported as a
   share of the ingest's CPU.

``--stream wide`` measures the same for the declared benchmark stream of 8 typed columns
(client/bench/streams.py): the generator of ``slidewin client --stream`` writing its files, the
ingest reading them from ``<landing>/wide/`` into a store where it is declared, and the watchers
that client runs for a declared stream -- its reporter (a stream has no max tracker or
freshness poller of its own yet), every second.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from slidewin.client.bench.stats import median
from slidewin.client.bench.streams import bench_stream
from slidewin.client.processes import Launch, slidewin_child, start_child
from slidewin.client.sim.freshness import FreshnessTracker
from slidewin.client.sim.generator import Batch, EventGenerator, GeneratorConfig, GeneratorStats
from slidewin.client.sim.maxtracker import MaxTracker
from slidewin.client.sim.reporter import Failures, Reporter, StoreWatch, stream_scope
from slidewin.client.sim.session import FRESHNESS_POLL_S
from slidewin.client.sim.typed_generator import TypedEventGenerator, TypedGeneratorConfig
from slidewin.client.sim.typed_session import StreamReporter
from slidewin.db.connect import connect
from slidewin.db.errors import SlidewinError
from slidewin.db.scratch import scratch_database
from slidewin.db.streams import Stream


class BenchError(SlidewinError):
    """The benchmark could not measure (the ingest failed or ran too few batches)."""


BATCH_LINE = re.compile(r"^\[text\] batch (\d+): in (\d+),")


def batch_line(stream: str) -> re.Pattern[str]:
    """The ingest's line for each batch of ``stream``: its number and the records in it."""
    if not bench_stream(stream).declared:
        return BATCH_LINE
    return re.compile(rf"^\[stream {re.escape(stream)}\] batch (\d+): in (\d+),")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class BenchSettings:
    seconds: float = 3.0
    repeats: int = 3
    events: int = 200_000
    file_events: int = 2500
    files_per_batch: int = 8
    ingest_repeats: int = 3
    max_interval_s: float = 0.01
    stream: str = "events"


def generator(folder: Path, stream: str, **config: Any) -> EventGenerator | TypedEventGenerator:
    """The client's generator of ``stream`` writing into the landing folder ``folder`` (a
    declared stream's files go to ``folder/<name>/``)."""
    target = bench_stream(stream)
    if target.declared:
        return TypedEventGenerator(TypedGeneratorConfig(folder, target.as_stream(), **config))
    return EventGenerator(GeneratorConfig(folder, **config))


def generator_rate(fmt: str, seconds: float, repeats: int, stream: str = "events"
                   ) -> list[float]:
    """Unthrottled events/s of the generator, one figure per repeat."""
    rates = []
    for i in range(repeats):
        with tempfile.TemporaryDirectory(prefix="slidewin-bench-gen-") as tmp:
            gen = generator(Path(tmp), stream, rate=0, fmt=fmt, seed=i)
            began = time.monotonic()
            gen.run(threading.Event(), until=began + seconds)
            rates.append(gen.stats.events / (time.monotonic() - began))
    return rates


def make_source(folder: Path, events: int, per_file: int, stream: str = "events") -> int:
    """The fixed data set: ``events`` events in files of ``per_file``, timestamps of the last
    second (so no rule of the ingest rejects them: no late, expired or future events)."""
    gen = generator(folder, stream, seed=42)
    end = datetime.now(UTC)
    files = -(-events // per_file)
    span = timedelta(seconds=1) / files
    for i in range(files):
        gen.write_batch(per_file, end - span * (files - i), end - span * (files - i - 1))
    return files * per_file


def proc_cpu_s(pid: int) -> float | None:
    """utime + stime of a local process in seconds (Linux /proc), None when unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def group_cpu_s(pgid: int) -> dict[int, float]:
    """CPU seconds of every live process of group ``pgid`` (the ingest and its JVM)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) != pgid:
                    continue
            except OSError:
                continue
            cpu = proc_cpu_s(int(entry.name))
            if cpu is not None:
                found[int(entry.name)] = cpu
    return found


class Watchers:
    """The reporter, max tracker and freshness poller, running against ``dsn`` in threads.

    ``cpu_s`` afterwards: the CPU the watcher threads used (thread_time) plus what their server
    backends used (read from /proc when the server is local; else the threads only).
    """

    def __init__(self, dsn: str, max_interval_s: float = 0.01, stream: str = "events") -> None:
        self.stop = threading.Event()
        self.thread_cpu: list[float] = []
        self.cpu_s = 0.0
        self._spare: tempfile.TemporaryDirectory[str] | None = None  # a quiet generator's
        target = bench_stream(stream)
        self.conns = [connect(dsn, autocommit=True) for _ in range(2 if target.declared else 4)]
        self.backends = [int(c.info.backend_pid) for c in self.conns]
        self._backend_cpu0 = [proc_cpu_s(pid) for pid in self.backends]
        if target.declared:
            self._declared(target.as_stream())
            return
        fresh = FreshnessTracker(give_up_s=3600)
        # as in the client, a batch waits to become visible: this one never does, so the
        # poller queries after every insert the ingest commits, as it would for a real batch
        now = datetime.now(UTC)
        secs = {int(now.timestamp()) - i: 10**12 for i in range(60)}
        fresh.add_batch(Batch(Path(), 1, now - timedelta(seconds=60), now, secs))
        self.reporter = Reporter(self.conns[0], StoreWatch(self.conns[1]), GeneratorStats(),
                                 fresh, Failures())
        self.tracker = MaxTracker(self.conns[2], 30)
        fresh_step = fresh.poller(self.conns[3])
        self.threads = [
            threading.Thread(target=self._loop, args=(1.0, self.reporter.report), daemon=True),
            threading.Thread(target=self._loop, args=(max_interval_s, self.tracker.poll),
                             daemon=True),
            threading.Thread(target=self._loop, args=(FRESHNESS_POLL_S, fresh_step),
                             daemon=True),
        ]

    def _declared(self, stream: Stream) -> None:
        """What ``slidewin client --stream`` runs for a declared stream: its reporter, every
        second (its generator's counts are not part of the load: a generator of no files)."""
        spare = self._spare = tempfile.TemporaryDirectory(prefix="slidewin-bench-watch-")
        quiet = TypedEventGenerator(TypedGeneratorConfig(Path(spare.name), stream))
        watch = StoreWatch(self.conns[1], stream_scope(stream.name))
        reporter = StreamReporter(self.conns[0], watch, stream, quiet, 10.0, Failures())
        self.threads = [
            threading.Thread(target=self._loop, args=(1.0, reporter.report), daemon=True)]

    def _loop(self, interval: float, step: Callable[[], object]) -> None:
        began = time.thread_time()
        while not self.stop.wait(interval):
            step()
        self.thread_cpu.append(time.thread_time() - began)

    def __enter__(self) -> Watchers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)
        after = [proc_cpu_s(pid) for pid in self.backends]
        server = sum(b - a for a, b in zip(self._backend_cpu0, after, strict=True)
                     if a is not None and b is not None)
        self.cpu_s = sum(self.thread_cpu) + server
        for c in self.conns:
            c.close()
        if self._spare is not None:
            self._spare.cleanup()


@dataclass(frozen=True)
class IngestRun:
    rate: float  # rows/s between the first and the last batch line
    ingest_cpu_s: float  # CPU of the ingest process group (python + JVM)
    watcher_cpu_s: float  # CPU of the watchers (threads + their server backends); 0 without


def ingest_rate(dsn: str, source: Path, work: Path, settings: BenchSettings,
                watch: bool, progress: Progress) -> IngestRun:
    """One ``slidewin ingest --once`` over a copy of ``source`` (see the module docstring)."""
    landing = work / "landing"
    shutil.copytree(source, landing)
    marks: list[tuple[float, int]] = []
    line = batch_line(settings.stream)

    def on_line(text: str) -> None:
        found = line.match(text)
        if found:
            marks.append((time.monotonic(), int(found.group(2))))

    launch = slidewin_child(dsn, "--data-dir", str(work), "ingest", "--once",
                            "--landing", str(landing), "--checkpoint-dir", str(work / "ckpt"),
                            "--processed", "keep", "--query-id", "bench",
                            "--max-files-per-trigger", str(settings.files_per_batch))
    watchers = Watchers(dsn, settings.max_interval_s, settings.stream) if watch else None
    if watchers is not None:
        with watchers:
            code, cpu = _run_child(launch, work, on_line)
    else:
        code, cpu = _run_child(launch, work, on_line)
    if code != 0 or len(marks) < 3:
        raise BenchError(
            f"the ingest exited {code} after {len(marks)} batches (3 needed: raise --events); "
            f"see {work / 'ingest.log'}"
        )
    rate = sum(n for _, n in marks[1:]) / (marks[-1][0] - marks[0][0])
    run = IngestRun(rate, cpu, watchers.cpu_s if watchers else 0.0)
    progress(f"  ingest {'with' if watch else 'without'} watchers: {rate:,.0f} rows/s "
             f"({len(marks)} batches), ingest CPU {cpu:.1f} s, watchers CPU "
             f"{run.watcher_cpu_s:.2f} s")
    return run


def _run_child(launch: Launch, work: Path, on_line: Callable[[str], None]) -> tuple[int, float]:
    """Run the ingest to the end; sample its process group's CPU while it runs."""
    child = start_child("ingest", launch.argv, work / "ingest.log", env=launch.env,
                        on_line=on_line)
    cpu: dict[int, float] = {}
    while child.proc.poll() is None:
        cpu.update(group_cpu_s(child.pgid))
        time.sleep(0.5)
    code = child.stop()
    return (code if code is not None else -1), sum(cpu.values())


def reporter_overhead(admin_dsn: str, settings: BenchSettings,
                      progress: Progress) -> list[tuple[IngestRun, IngestRun]]:
    """(without, with) ingest runs, in adjacent pairs, the order alternating per pair."""
    pairs = []
    with tempfile.TemporaryDirectory(prefix="slidewin-bench-client-") as tmp:
        source = Path(tmp) / "source"
        make_source(source, settings.events, settings.file_events, settings.stream)
        for i in range(settings.ingest_repeats):
            runs = {}
            for watch in (False, True) if i % 2 == 0 else (True, False):
                with scratch_database(admin_dsn, prefix="slidewin_bench_client",
                                      partitions=8) as dsn:
                    with connect(dsn, autocommit=True) as conn:
                        bench_stream(settings.stream).declare(conn)
                    folder = Path(tmp) / f"run-{i}-{int(watch)}"
                    runs[watch] = ingest_rate(dsn, source, folder, settings, watch, progress)
            pairs.append((runs[False], runs[True]))
    return pairs


def summarize(
    gen: dict[str, list[float]], pairs: list[tuple[IngestRun, IngestRun]]
) -> dict[str, Any]:
    """Throughput overhead: the median over adjacent pairs of 1 - with/without (pairs share the
    machine's load of the moment better than all-runs medians). CPU overhead: the watchers' CPU
    as a share of the ingest's own CPU in the same run -- steadier on a noisy machine."""
    base = median(p[0].rate for p in pairs)
    loaded = median(p[1].rate for p in pairs)
    gen_csv = median(gen["csv"])
    return {
        "generator_events_per_s": round(gen_csv),
        "generator_events_per_s_by_format": {
            k: round(median(v)) for k, v in gen.items()},
        "ingest_rows_per_s_without_watchers": round(base),
        "ingest_rows_per_s_with_watchers": round(loaded),
        "reporter_overhead_pct": round(
            median((1 - w.rate / wo.rate) * 100 for wo, w in pairs), 2),
        "reporter_overhead_pct_by_pair": [round((1 - w.rate / wo.rate) * 100, 1)
                                          for wo, w in pairs],
        "watcher_cpu_pct_of_ingest_cpu": round(
            median(w.watcher_cpu_s / w.ingest_cpu_s * 100 for _, w in pairs), 2),
        "generator_vs_ingest": round(gen_csv / base, 1),
        "targets": {"generator_events_per_s": ">= 500000", "reporter_overhead_pct": "<= 5"},
    }
