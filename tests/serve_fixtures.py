"""What the server's tests share: a store being written while they look, and a server on it.

``LiveWriter`` stands in for a running ingest: every ``every_s`` it commits one micro-batch
through the ingest's own sink (``ingest.sink.write_batch``: events, dead letters, the batch
marker and the stream state in one transaction, exactly as ``slidewin ingest`` commits them,
without Spark, whose start takes longer than these tests), with events timed at the wall clock
and a few malformed and late records among them; and into a declared stream, rows through SQL.
``ServedStore`` runs ``slidewin serve`` as a real process on a free port.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psycopg
import pyarrow as pa

from slidewin.client.processes import slidewin_argv
from slidewin.db import sessions, streams
from slidewin.db.streams import Column
from slidewin.ingest.batch import GOOD_SCHEMA
from slidewin.ingest.sink import BatchRows, write_batch

BAD_SCHEMA = pa.schema([("source", pa.string()), ("reason", pa.string()),
                        ("detail", pa.string()), ("raw", pa.string())])


def declare_sensors(conn: psycopg.Connection) -> None:
    streams.define(conn, "sensors", key="sensor", time="ts",
                   columns=[Column("sensor", "text"), Column("ts", "timestamptz"),
                            Column("temp", "double precision"), Column("hum", "bigint")],
                   measures=["temp", "hum"], history=timedelta(minutes=10))


def setup_store(conn: psycopg.Connection) -> None:
    """A session window, a retention policy and a declared stream, so every table has rows."""
    sessions.define(conn, sessions.SessionDef("visits", timedelta(seconds=2), timedelta(seconds=2)))
    conn.execute("INSERT INTO slidewin.retention_settings (name, history_s, chunk, yield_ms) "
                 "VALUES ('default', 600, 1000, 100) ON CONFLICT (name) DO NOTHING")
    declare_sensors(conn)


@dataclass
class LiveWriter:
    dsn: str
    every_s: float = 0.25
    per_batch: int = 40
    seed: int = 7
    batches: int = 0
    accepted: int = 0
    dead: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    paused: threading.Event = field(default_factory=threading.Event)
    errors: list[BaseException] = field(default_factory=list)
    _thread: threading.Thread | None = None

    def __enter__(self) -> LiveWriter:
        self._thread = threading.Thread(target=self._run, name="live-writer", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def wait_batches(self, n: int, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        target = self.batches + n
        while self.batches < target:
            assert not self.errors, self.errors
            assert time.monotonic() < deadline, f"only {self.batches} of {target} batches"
            time.sleep(0.05)

    def _run(self) -> None:
        rnd = random.Random(self.seed)
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                parts = conn.execute("SELECT partitions FROM slidewin.config").fetchone()[0]
                while not self.stop.wait(self.every_s):
                    if not self.paused.is_set():
                        self._batch(conn, rnd, parts)
        except BaseException as exc:  # the test asserts there was none
            self.errors.append(exc)

    def _batch(self, conn: psycopg.Connection, rnd: random.Random, parts: int) -> None:
        now = datetime.now(UTC)
        rows = []
        for i in range(self.per_batch):
            key = f"key-{rnd.randrange(50):03d}"
            rows.append({"part": _partition(key, parts), "uuid": key,
                         "val": rnd.randrange(1000), "copies": 1,
                         "ts": now - timedelta(milliseconds=rnd.randrange(900) + i)})
        good = pa.Table.from_pylist(rows, schema=GOOD_SCHEMA)
        bad_rows = []
        if self.batches % 3 == 0:
            bad_rows.append({"source": "live.jsonl", "reason": "malformed",
                             "detail": "not JSON", "raw": f'{{"uuid": "x{self.batches}", '})
        bad = pa.Table.from_pylist(bad_rows, schema=BAD_SCHEMA)
        result = write_batch(conn, "live/text/1", "events", self.batches,
                             lambda _state: BatchRows(good, bad), grace=timedelta(seconds=1))
        conn.execute(
            "INSERT INTO slidewin_streams.sensors (sensor, ts, temp, hum) "
            "SELECT 's' || (i %% 5), %s - i * interval '10 milliseconds', 20 + random() * 5, i "
            "FROM generate_series(1, 10) i", (now,))
        self.batches += 1
        self.accepted += result.accepted
        self.dead += len(bad_rows)


_PARTS: dict[tuple[str, int], int] = {}


def _partition(key: str, parts: int) -> int:
    from slidewin.db.events import partition_of

    if (key, parts) not in _PARTS:
        _PARTS[key, parts] = partition_of(key, parts)
    return _PARTS[key, parts]


URL = re.compile(r"dashboard (http://\S+/),")


class ServedStore:
    """``slidewin --dsn DSN serve --port 0`` as a child process; ``url`` once it listens."""

    def __init__(self, dsn: str, *extra: str, port: int = 0) -> None:
        self.dsn, self.extra, self.port = dsn, extra, port
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.stderr: list[str] = []

    def start(self, timeout_s: float = 60) -> ServedStore:
        env = {**os.environ, "SLIDEWIN_DSN": self.dsn}
        self.proc = subprocess.Popen(
            slidewin_argv("serve", "--port", str(self.port), *self.extra), env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + timeout_s
        assert self.proc.stderr is not None
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise AssertionError(f"serve ended: {self.proc.wait()} {''.join(self.stderr)}")
            self.stderr.append(line)
            found = URL.search(line)
            if found:
                self.url = found.group(1)
                threading.Thread(target=self._drain, daemon=True).start()
                self._wait_ready(deadline)
                return self
        raise AssertionError("serve did not say where it listens")

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def _wait_ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "api/v1/health", timeout=5).status_code in (200, 503):
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise AssertionError("serve does not answer")

    @property
    def port_number(self) -> int:
        return int(self.url.rstrip("/").rsplit(":", 1)[1])

    def stop(self, sig: int = signal.SIGINT, timeout_s: float = 30) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout_s)

    def __enter__(self) -> ServedStore:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def screenshot_path() -> Path:
    return Path(__file__).resolve().parent.parent / "docs" / "dashboard.png"
