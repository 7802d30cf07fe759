"""Exactly once for a join under crashes: ``slidewin ingest`` of two declared streams joined by
an interval join is killed with SIGKILL in the middle of a stream's first batch -- before its
commit, or after the commit but before Spark records the batch -- then restarted without the
fault. The join's results must be the exact answer of the records, each once, and its counters
must agree with its rows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from slidewin.db import joins, streams
from slidewin.db.streams import Column
from tests.test_ingest_crash import SLIDEWIN, assert_no_process_left, env_with
from tests.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]
BASE = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def command(dsn: str, tmp: Path, *extra: str) -> list[str]:
    return [SLIDEWIN, "--dsn", dsn, "--data-dir", str(tmp / "data"), "ingest", "--landing",
            str(tmp / "landing"), "--processed", "keep", "--max-files-per-trigger", "1",
            "--master", "local[1]", "--trigger", "500ms", *extra]


def write(folder: Path, name: str, records: list[dict], mtime: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    os.utime(path, (mtime, mtime))


def iso(seconds: float) -> str:
    return (BASE + timedelta(seconds=seconds)).isoformat()


def stream_batches(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM slidewin.ingest_batches "
                           "WHERE query_id LIKE '%/stream-%'").fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("fault", ["before_commit", "after_commit"])
def test_a_join_killed_mid_batch_then_restarted_is_exactly_once(make_store, tmp_path, fault):
    dsn = make_store(8)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in ("orders", "shipments"):
            streams.define(conn, name, key="id", time="ts", grace=timedelta(seconds=30),
                           columns=[Column("id", "text"), Column("k", "text")])
        joins.define(conn, "os", left="orders", right="shipments", on="k", join_type="full",
                     before=timedelta(seconds=2), after=timedelta(seconds=5),
                     grace=timedelta(seconds=30), idle=None)
    land = tmp_path / "landing"
    base = time.time() - 1000
    for i in range(3):
        orders = [{"id": f"o{i}_{j}", "k": f"k{j % 7}", "ts": iso(i * 10 + j * 0.2)}
                  for j in range(40)]
        ships = [{"id": f"s{i}_{j}", "k": f"k{j % 9}", "ts": iso(i * 10 + j * 0.25 + 1)}
                 for j in range(30)]
        ships.append(ships[0])  # a record sent twice
        write(land / "orders", f"o{i}.jsonl", orders, base + i)
        write(land / "shipments", f"s{i}.jsonl", ships, base + i)
    tag = uuid.uuid4().hex
    crashed = subprocess.run(command(dsn, tmp_path, "--once"), env=env_with(tag, fault),
                             capture_output=True, text=True, timeout=300)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert_no_process_left(tag)
    assert stream_batches(dsn) == (0 if fault == "before_commit" else 1)

    proc = subprocess.Popen(command(dsn, tmp_path), env=env_with(tag, None),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    def six_batches() -> bool:
        assert proc.poll() is None, f"the ingest exited {proc.poll()}"
        return stream_batches(dsn) >= 6

    try:
        wait_until(six_batches, 240, interval_s=0.2, what="six committed stream batches")
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    assert_no_process_left(tag)
    assert stream_batches(dsn) == 6, err[-3000:]

    with psycopg.connect(dsn, autocommit=True) as conn:
        # both streams are done: move W past every record, as the scheduler's tick would
        for name in ("orders", "shipments"):
            conn.execute("SELECT slidewin.ingest_advance(%s, %s, now(), '0s')",
                         (name, BASE + timedelta(hours=1)))
        joins.advance(conn, datetime.now(UTC))
        got = joins.results(conn, "os")
        want = joins.exact(conn, "os", BASE - timedelta(days=1), BASE + timedelta(days=1))
        st = joins.status(conn, "os")
    assert sorted(got, key=repr) == sorted(want, key=repr)
    assert len(got) == len(set(got))
    assert st.pairs + st.left_only + st.right_only == len(got)
    assert st.pairs > 100 and st.late_left + st.late_right == 0
