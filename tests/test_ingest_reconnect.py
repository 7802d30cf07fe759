"""The ingest outlives its database: a streaming ``slidewin ingest`` (not ``--once``) keeps
running while its PostgreSQL -- the test's own, never the shared one -- is stopped for a few
seconds and started again, with files arriving before, during and after. The store must end up
holding exactly the ground truth computed from the files (raw rows and rollups), every line
counted once in the batch markers, and the output must say the database was lost and back."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from tests.conftest import T0
from tests.ingest_fixtures import (
    event,
    stored_rollups,
    stored_rows,
    truth_from_jsonl,
    truth_rollups,
    write_jsonl,
)
from tests.invariants import assert_rollups_exact
from tests.restartable_pg import answers
from tests.test_ingest_crash import SLIDEWIN, assert_no_process_left, env_with
from tests.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]
EVENTS_PER_FILE = 40



def ingest_command(dsn: str, tmp: Path) -> list[str]:
    return [
        SLIDEWIN, "--dsn", dsn, "--data-dir", str(tmp / "data"), "ingest",
        "--landing", str(tmp / "landing"), "--format", "json", "--processed", "keep",
        "--master", "local[1]", "--trigger", "200ms",
        "--grace", "1h", "--reconnect-timeout", "2m",
    ]


class Producer:
    """Drops one JSON Lines file every ``every_s`` (event times rising, keys repeating across
    files so duplicates are exercised) until stopped."""

    def __init__(self, land: Path, every_s: float = 0.5) -> None:
        self.land, self.every_s = land, every_s
        self.files: list[Path] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def write(self) -> None:
        k = len(self.files)
        events = [event(f"u{(k * 7 + i) % 60}", k * 100 + i, k + i / EVENTS_PER_FILE)
                  for i in range(EVENTS_PER_FILE)]
        if k % 5 == 4:  # now and then a file repeats an event of the one before
            events.append(event(f"u{((k - 1) * 7) % 60}", (k - 1) * 100, k - 1))
        self.files.append(write_jsonl(self.land, f"f{k:04d}.jsonl", events))

    def _run(self) -> None:
        while not self.stop.wait(self.every_s):
            self.write()

    def __enter__(self) -> Producer:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


def committed_lines(dsn: str) -> int | None:
    """Lines the ingest has committed (accepted + duplicates + rejected); None while down."""
    try:
        with psycopg.connect(dsn, connect_timeout=2) as conn:
            row = conn.execute(
                "SELECT coalesce(sum(rows_in), 0) FROM slidewin.ingest_batches"
            ).fetchone()
    except psycopg.OperationalError:
        return None
    return int(row[0])


def wait_for_lines(dsn: str, lines: int, proc: subprocess.Popen, timeout_s: float) -> None:
    def committed() -> int | None:
        assert proc.poll() is None, f"the ingest exited {proc.poll()}"
        done = committed_lines(dsn)
        return done if (done or 0) >= lines else None

    wait_until(committed, timeout_s, interval_s=0.3, what=f"{lines} committed lines")


def wait_for_files(producer: Producer, more: int, what: str) -> None:
    """``more`` files from the producer from now on (at its pace: one every half second)."""
    want = len(producer.files) + more
    wait_until(lambda: len(producer.files) >= want, 30, what=what)


def line_count(files: list[Path]) -> int:
    return sum(len(f.read_text(encoding="utf-8").splitlines()) for f in files)


def test_streaming_ingest_survives_a_postgres_restart(own_server, tmp_path):
    dsn = own_server.store(8)
    land = tmp_path / "landing"
    land.mkdir()
    tag = uuid.uuid4().hex
    proc = subprocess.Popen(
        ingest_command(dsn, tmp_path), env=env_with(tag, None),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    producer = Producer(land)
    try:
        for _ in range(3):
            producer.write()
        wait_for_lines(dsn, line_count(producer.files), proc, timeout_s=180)
        with producer:
            own_server.stop()  # files keep arriving while the database is down
            wait_for_files(producer, 8, "files during the outage")  # about 4 s down
            assert not answers(dsn)
            own_server.start()
            wait_for_files(producer, 4, "files after it is back")
        wait_for_lines(dsn, line_count(producer.files), proc, timeout_s=120)
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    assert_no_process_left(tag)
    assert "database lost (" in err, err[-3000:]
    assert "database back after " in err, err[-3000:]
    assert err.index("database lost (") < err.index("database back after ")

    files = producer.files
    truth = truth_from_jsonl(files)
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert stored_rows(conn) == truth
        assert stored_rollups(conn) == truth_rollups(truth, 8)
        assert_rollups_exact(conn)
        rows_in, accepted, duplicates, rejected = conn.execute(
            "SELECT sum(rows_in), sum(accepted), sum(duplicates), sum(rejected) "
            "FROM slidewin.ingest_batches"
        ).fetchone()
    # every line of every file counted exactly once: none lost, no batch or file written twice
    assert (rows_in, accepted, rejected) == (line_count(files), len(truth), 0)
    assert duplicates == line_count(files) - len(truth)


def outage_with_reconnect_timeout_3s(own_server, tmp_path, partitions: int,
                                     file_after_outage: bool) -> tuple[int, str, str]:
    """A streaming ingest (--reconnect-timeout 3s) stores a first file, then its database stops
    and stays down, with one more file arriving then or none; its exit code, stderr and tag."""
    dsn = own_server.store(partitions)
    land = tmp_path / "landing"
    land.mkdir()
    tag = uuid.uuid4().hex
    command = [*ingest_command(dsn, tmp_path)[:-1], "3s"]  # --reconnect-timeout 3s
    proc = subprocess.Popen(command, env=env_with(tag, None),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    producer = Producer(land)
    try:
        producer.write()
        wait_for_lines(dsn, line_count(producer.files), proc, timeout_s=180)
        own_server.stop()
        if file_after_outage:
            producer.write()  # a batch that meets the outage
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err, tag


def assert_gave_up_after_3s(returncode: int, err: str, tag: str) -> None:
    assert returncode == 1, err[-3000:]
    assert_no_process_left(tag)
    assert "database lost (" in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: lost the database at "), err[-3000:]
    assert "not back within 3s" in last and "--reconnect-timeout" in last, last


def test_streaming_ingest_gives_up_after_the_reconnect_timeout(own_server, tmp_path):
    assert_gave_up_after_3s(*outage_with_reconnect_timeout_3s(own_server, tmp_path, 8, True))


def test_both_streams_give_up_at_one_deadline(own_server, tmp_path):
    """``--reconnect-timeout`` is one deadline for the whole process: with JSON Lines and
    Parquet streaming, a database that stays down ends the ingest once the timeout has passed,
    not after each stream has waited it out in turn (15 s gave up after 38 s)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    dsn = own_server.store(8)
    land = tmp_path / "landing"
    land.mkdir()
    tag = uuid.uuid4().hex
    command = ingest_command(dsn, tmp_path)
    command[command.index("--format") + 1] = "auto"
    command[-1] = "8s"  # --reconnect-timeout
    proc = subprocess.Popen(command, env=env_with(tag, None),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    written = [0]

    def drop_both() -> None:
        k = written[0]
        written[0] += 1
        write_jsonl(land, f"j{k:03d}.jsonl", [event(f"j{k}", k, k)])
        when = pa.array([T0 + timedelta(seconds=k)], pa.timestamp("us", tz="UTC"))
        table = pa.table({"uuid": [f"p{k}"], "val": pa.array([k], pa.int64()), "ts": when})
        pq.write_table(table, land / f".p{k:03d}.tmp")
        os.replace(land / f".p{k:03d}.tmp", land / f"p{k:03d}.parquet")

    try:
        drop_both()
        wait_for_lines(dsn, 2, proc, timeout_s=180)
        own_server.stop()
        lost_at = time.monotonic()
        while proc.poll() is None and time.monotonic() - lost_at < 90:
            drop_both()  # both streams keep getting batches that meet the outage
            time.sleep(0.5)  # the producer's pace until the ingest gives up: not a wait
        _out, err = proc.communicate(timeout=60)
        took = time.monotonic() - lost_at
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err[-3000:]
    assert_no_process_left(tag)
    assert err.count("database lost (") == 1, err[-3000:]
    # the 8 s wait, the batch that noticed, and the stop of the queries and of Spark; each
    # stream waiting in turn took at least two waits
    assert took < 8 + 7, f"gave up {took:.1f}s after the database went away"


def test_an_idle_streaming_ingest_notices_its_database_died_and_gives_up(own_server, tmp_path):
    """No file arrives after the outage begins: the ingest's heartbeat finds the database gone,
    says so, and exits 1 after --reconnect-timeout (it once ran on, silent, for minutes)."""
    assert_gave_up_after_3s(*outage_with_reconnect_timeout_3s(own_server, tmp_path, 2, False))
