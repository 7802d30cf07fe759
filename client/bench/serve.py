"""``slidewin bench serve``: what ``slidewin serve`` costs a live ingest, and how fast it answers.

Each phase runs on a fresh database: the generator writes ``rate`` events/s into a landing
folder while ``slidewin ingest`` streams them in; after the ingest's first batches (Spark's start
excluded) and once it has caught up with the files written meanwhile, a measured window of
``duration`` seconds. Phase *without*: nothing else. Phase
*with*: ``slidewin serve`` on the same database, ``clients`` browsers following ``/api/v1/live``
(server-sent events) and ``requests`` API requests per second, sent on a fixed schedule (open
loop: a slow answer does not slow the sending) over a mix of routes, for the whole window.

- ingest events/s: the events accepted in the batches committed during the window
  (``slidewin.ingest_batches``), per second; cost = 1 - with / without, in percent. At an
  offered rate the ingest keeps up with, both are that rate: the CPU figures then say what the
  server took -- the server and its database backends, as a share of the ingest's own CPU --
  and the lag says whether the ingest fell behind (files left when the window ended);
- API latency: p50 and p99 (nearest rank) of the requests sent in the window, and how many
  failed; event-stream events received;
- the server's peak RSS, sampled every second.

The load generator runs in this process and takes CPU of its own (counted nowhere): on a
two-core machine it competes with the ingest as the browsers' machines would not.

``--stream wide`` runs the same over the declared benchmark stream of 8 typed columns
(client/bench/streams.py): the generator of ``slidewin client --stream`` writes its files into
``<landing>/wide/``, the store declares it, and the browsers and API requests ask for that
stream (``stream=wide`` on every route that takes one; health and metrics are the store's).
"""

from __future__ import annotations

import asyncio
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from slidewin.client.bench.client import (
    BenchError,
    batch_line,
    generator,
    group_cpu_s,
    proc_cpu_s,
)
from slidewin.client.bench.stats import median, percentile
from slidewin.client.bench.streams import bench_stream
from slidewin.client.processes import Child, slidewin_child, start_child
from slidewin.db.connect import connect
from slidewin.db.scratch import scratch_database

Progress = Callable[[str], None]
CAUGHT_UP_FILES = 10  # files waiting in the landing folder: two seconds of the generator's
SERVING = re.compile(r"dashboard (http://\S+/),")
ROUTES = (
    "api/v1/query/avg?seconds=30",
    "api/v1/query/max?seconds=5&relative_to=stream",
    "api/v1/windows/tumbling?size=10s&last=5m",
    "api/v1/windows/current?size=10s&relative_to=stream",
    "api/v1/status",
    "api/v1/dead-letters?limit=20",
    "api/v1/ingest/batches?limit=20",
    "api/v1/health",
    "metrics",
)
STORE_WIDE = ("api/v1/health", "metrics")  # the routes that take no stream


MEASURED = ("api/v1/query/", "api/v1/windows/", "api/v1/live")  # the routes that take a measure


def for_stream(path: str, stream: str) -> str:
    """``path`` asking for ``stream`` (and the measure its per-key questions read, where the
    route takes one: a stream of several measures needs it): unchanged for the built-in stream
    (the default of every route) and for the routes that take no stream."""
    target = bench_stream(stream)
    if not target.declared or path in STORE_WIDE:
        return path
    asked = f"stream={stream}"
    if path.startswith(MEASURED):
        asked += f"&measure={target.measure}"
    return f"{path}{'&' if '?' in path else '?'}{asked}"


@dataclass(frozen=True)
class ServeSettings:
    rate: float = 15_000
    duration_s: float = 60.0
    clients: int = 50
    requests: float = 200.0
    warmup_batches: int = 3
    repeats: int = 1
    stream: str = "events"


@dataclass
class Load:
    """What the browsers and the API clients saw during the window."""

    latencies_ms: list[float] = field(default_factory=list)
    failures: int = 0
    events: int = 0
    streams_open: int = 0
    stream_failures: int = 0


@dataclass(frozen=True)
class Phase:
    served: bool
    events_per_s: float
    lag_files: int
    ingest_cpu_s: float
    server_cpu_s: float  # the server process and its database backends; 0 without
    server_rss_mb: float | None
    load: Load | None


def _wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise BenchError(f"{what} did not happen within {timeout_s:.0f} s")
        time.sleep(0.1)


def _accepted(dsn: str, since: float, until: float) -> int:
    with connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(accepted), 0) FROM slidewin.ingest_batches "
            "WHERE committed_at >= to_timestamp(%s) AND committed_at < to_timestamp(%s)",
            (since, until)).fetchone()
    return int(row[0]) if row else 0


def _backends_cpu(dsn: str, application: str) -> dict[int, float]:
    with connect(dsn, autocommit=True) as conn:
        pids = [r[0] for r in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name LIKE %s", (application + "%",))]
    return {pid: cpu for pid in pids if (cpu := proc_cpu_s(pid)) is not None}


async def _drive(url: str, settings: ServeSettings, stop: threading.Event, load: Load) -> None:
    import httpx

    limits = httpx.Limits(max_connections=settings.clients + 400, max_keepalive_connections=100)
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0), limits=limits) as client:

        routes = [for_stream(path, settings.stream) for path in ROUTES]

        async def browser(i: int) -> None:
            view = "api/v1/live" if i % 2 == 0 else "api/v1/live?kind=sliding&size=5s"
            try:
                async with client.stream("GET", url + for_stream(view, settings.stream),
                                         timeout=httpx.Timeout(30.0, read=None)) as r:
                    load.streams_open += 1
                    async for line in r.aiter_lines():
                        if line.startswith("event:"):
                            load.events += 1
                        if stop.is_set():
                            return
            except (httpx.HTTPError, asyncio.CancelledError):
                if not stop.is_set():
                    load.stream_failures += 1

        async def ask(path: str) -> None:
            began = time.perf_counter()
            try:
                response = await client.get(url + path)
                ok = response.status_code == 200
            except httpx.HTTPError:
                ok = False
            if ok:
                load.latencies_ms.append((time.perf_counter() - began) * 1000)
            else:
                load.failures += 1

        browsers = [asyncio.create_task(browser(i)) for i in range(settings.clients)]
        pending: set[asyncio.Task[None]] = set()
        step = 1.0 / settings.requests if settings.requests > 0 else None
        n = 0
        began = time.perf_counter()
        while not stop.is_set():
            if step is None:
                await asyncio.sleep(0.1)
                continue
            task = asyncio.create_task(ask(routes[n % len(routes)]))
            pending.add(task)
            task.add_done_callback(pending.discard)
            n += 1
            await asyncio.sleep(max(0.0, began + n * step - time.perf_counter()))
        await asyncio.gather(*pending, return_exceptions=True)
        for task in browsers:
            task.cancel()
        await asyncio.gather(*browsers, return_exceptions=True)


def _start_ingest(dsn: str, work: Path, landing: Path, marks: list[float],
                  stream: str) -> Child:
    line = batch_line(stream)

    def on_line(text: str) -> None:
        if line.match(text):
            marks.append(time.time())

    launch = slidewin_child(dsn, "--data-dir", str(work), "ingest", "--landing", str(landing),
                            "--checkpoint-dir", str(work / "ckpt"), "--processed", "delete",
                            "--query-id", "bench", "--trigger", "500ms")
    return start_child("ingest", launch.argv, work / "ingest.log", env=launch.env,
                       on_line=on_line)


def _start_server(dsn: str, work: Path) -> tuple[Child, str]:
    found: list[str] = []

    def on_line(text: str) -> None:
        m = SERVING.search(text)
        if m:
            found.append(m.group(1))

    launch = slidewin_child(dsn, "serve", "--port", "0")
    child = start_child("serve", launch.argv, work / "serve.log", env=launch.env, on_line=on_line)
    _wait(lambda: bool(found) or not child.alive(), 60, "slidewin serve starting")
    if not found:
        raise BenchError(f"slidewin serve exited {child.stop()}; see {work / 'serve.log'}")
    return child, found[0]


def phase(admin_dsn: str, settings: ServeSettings, served: bool, progress: Progress) -> Phase:
    """One phase on a fresh database (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="slidewin-bench-serve-") as tmp, \
            scratch_database(admin_dsn, prefix="slidewin_bench_serve", partitions=8) as dsn:
        work = Path(tmp)
        landing = work / "landing"
        landing.mkdir()
        target = bench_stream(settings.stream)
        with connect(dsn, autocommit=True) as conn:
            target.declare(conn)
        files = target.landing(landing)  # where the generator's files wait for the ingest
        stop_gen = threading.Event()
        gen = generator(landing, settings.stream, rate=settings.rate, seed=7)
        writer = threading.Thread(target=gen.run, args=(stop_gen,), daemon=True)
        writer.start()
        marks: list[float] = []
        ingest = _start_ingest(dsn, work, landing, marks, settings.stream)
        server: Child | None = None
        try:
            _wait(lambda: len(marks) >= settings.warmup_batches or not ingest.alive(), 180,
                  "the ingest's first batches")
            if not ingest.alive():
                raise BenchError(f"the ingest exited {ingest.stop()}; see {work / 'ingest.log'}")
            # the files written while Spark started are a backlog: the window opens once the
            # ingest has caught up with the offered rate, so it measures the steady state
            _wait(lambda: sum(1 for _ in files.iterdir()) <= CAUGHT_UP_FILES, 300,
                  f"the ingest catching up with {settings.rate:,.0f} events/s (it is slower: "
                  "lower --rate)")
            url = ""
            if served:
                server, url = _start_server(dsn, work)
            load = Load() if served else None
            stop_load = threading.Event()
            driver = None
            if served:
                assert load is not None

                def drive() -> None:
                    asyncio.run(_drive(url, settings, stop_load, load))

                driver = threading.Thread(target=drive, daemon=True)
                driver.start()
                time.sleep(1.0)  # the browsers connect before the window opens
            ingest_cpu0 = sum(group_cpu_s(ingest.pgid).values())
            server_cpu0 = _server_cpu(dsn, server)
            rss: list[float] = []
            began = time.time()
            while time.time() - began < settings.duration_s:
                if server is not None:
                    rss.append(psutil.Process(server.proc.pid).memory_info().rss / 2**20)
                time.sleep(1.0)
            ended = time.time()
            ingest_cpu = sum(group_cpu_s(ingest.pgid).values()) - ingest_cpu0
            server_cpu = _server_cpu(dsn, server) - server_cpu0
            stop_load.set()
            if driver is not None:
                driver.join(timeout=60)
            lag = sum(1 for _ in files.iterdir())
            time.sleep(2.0)  # batches of the window commit
            rate = _accepted(dsn, began, ended) / (ended - began)
        finally:
            stop_gen.set()
            writer.join(timeout=30)
            if server is not None:
                server.stop()
            ingest.stop()
    result = Phase(served, rate, lag, ingest_cpu, server_cpu, max(rss) if rss else None, load)
    said = f"ingest {'with' if served else 'without'} the server: {rate:,.0f} events/s, " \
           f"{lag} files behind, ingest CPU {ingest_cpu:.1f} s"
    if load is not None:
        said += (f"; server CPU {server_cpu:.1f} s, API p50 "
                 f"{_pct(load.latencies_ms, 50)} ms p99 {_pct(load.latencies_ms, 99)} ms over "
                 f"{len(load.latencies_ms)} requests ({load.failures} failed), "
                 f"{load.events} events to {load.streams_open} browsers")
    progress(said)
    return result


def _server_cpu(dsn: str, server: Child | None) -> float:
    if server is None:
        return 0.0
    own = proc_cpu_s(server.proc.pid) or 0.0
    return own + sum(_backends_cpu(dsn, "slidewin serve").values())


def _pct(samples: list[float], q: float) -> float | None:
    return round(percentile(samples, q), 2) if samples else None


def run(admin_dsn: str, settings: ServeSettings, progress: Progress) -> dict[str, Any]:
    """Repeated pairs of phases (the order alternating) and their summary."""
    if shutil.which("java") is None:
        raise BenchError("the benchmark runs the real ingest, which needs Java 17+")
    pairs = []
    for i in range(settings.repeats):
        done = {}
        for served in (False, True) if i % 2 == 0 else (True, False):
            done[served] = phase(admin_dsn, settings, served, progress)
        pairs.append((done[False], done[True]))
    return summarize(settings, pairs)


def summarize(settings: ServeSettings, pairs: list[tuple[Phase, Phase]]) -> dict[str, Any]:
    without = median(p[0].events_per_s for p in pairs)
    with_ = median(p[1].events_per_s for p in pairs)
    latencies = [ms for _, w in pairs if w.load for ms in w.load.latencies_ms]
    loads = [w.load for _, w in pairs if w.load is not None]
    return {
        "stream": settings.stream,
        "rate": settings.rate, "duration_s": settings.duration_s, "clients": settings.clients,
        "requests_per_s": settings.requests, "repeats": settings.repeats,
        "ingest_events_per_s": {"without": round(without), "with": round(with_)},
        "cost_pct": round(100 * (1 - with_ / without), 2) if without else None,
        "ingest_behind_files": {"without": max(p[0].lag_files for p in pairs),
                                "with": max(p[1].lag_files for p in pairs)},
        "server_cpu_share_of_ingest_pct": round(100 * median(
            w.server_cpu_s / w.ingest_cpu_s for _, w in pairs if w.ingest_cpu_s), 2),
        "api": {"requests": len(latencies), "p50_ms": _pct(latencies, 50),
                "p99_ms": _pct(latencies, 99), "failed": sum(x.failures for x in loads)},
        "sse": {"browsers": settings.clients, "events": sum(x.events for x in loads),
                "streams_failed": sum(x.stream_failures for x in loads)},
        "server_rss_mb": round(max(w.server_rss_mb or 0 for _, w in pairs), 1),
    }
