"""The ingest on a real Spark standalone cluster: a master and two one-core workers started here
from the installed PySpark (``ingest.cluster``), ``slidewin ingest --master spark://...`` run as
a user runs it, over JSON Lines, CSV and Parquet. Exactly once (a second run over the same files
adds nothing), bad rows dead-lettered, rollups exact -- then a worker is killed during a batch,
which still commits exactly once. The cluster is stopped at the end, every
process of it gone."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from slidewin.client.processes import slidewin_argv
from slidewin.ingest.cluster import LocalCluster
from tests.conftest import T0
from tests.ingest_fixtures import (
    clean_ingest_state,
    event,
    stored_rows,
    write_jsonl,
    write_lines,
)
from tests.invariants import assert_rollups_exact
from tests.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@pytest.fixture
def iconn(conn):
    return clean_ingest_state(conn)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster"), workers=2, cores=1) as running:
        pids = [p.pid for p in running.procs]
        yield running
    assert not [pid for pid in pids if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


def ingest_argv(dsn: str, url: str, land: Path, work: Path) -> list[str]:
    return slidewin_argv(
        "--dsn", dsn, "--data-dir", str(work), "ingest", "--once", "--json",
        "--master", url, "--landing", str(land), "--checkpoint-dir", str(work / "cp"),
        "--processed", "keep", "--grace", "1h", "--max-future", "1000d",
        "--verbose",  # Spark's own log: the lost-worker test reads its "Lost executor" line
    )


def ingest(dsn: str, url: str, land: Path, work: Path) -> dict:
    argv = ingest_argv(dsn, url, land, work)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def parquet(folder: Path, name: str, rows: list[tuple[str, int, float]]) -> None:
    pq.write_table(pa.table({
        "uuid": [u for u, _v, _s in rows],
        "val": pa.array([v for _u, v, _s in rows], pa.int64()),
        "ts": pa.array([T0 + timedelta(seconds=s) for _u, _v, s in rows],
                       pa.timestamp("us", tz="UTC")),
    }), folder / name)


def test_ingest_on_a_standalone_cluster_is_exactly_once(cluster, store_dsn, iconn, tmp_path):
    land = tmp_path / "landing"
    land.mkdir()
    write_jsonl(land, "a.jsonl", [event(f"j{i}", i, i / 10) for i in range(40)]
                + [event("j1", 99, 0.1)])  # an in-batch duplicate: the first val is kept
    write_lines(land, "b.csv", ["uuid,val,ts"]
                + [f"c{i},{i},{(T0 + timedelta(seconds=i)).isoformat()}" for i in range(30)]
                + ["c-bad,not-a-number,2026-01-01T12:00:00Z"])
    parquet(land, "c.parquet", [(f"p{i}", -i, i / 4) for i in range(50)])
    first = ingest(store_dsn, cluster.url, land, tmp_path / "w")
    # the application's executors ran on both workers (each keeps an app-* directory)
    assert len({p.parent for p in cluster.work_dir.glob("worker-*/app-*")}) == 2
    assert (first["accepted"], first["duplicates"], first["rejected"]) == (120, 1, 1)
    assert ("j1", 1, T0 + timedelta(seconds=0.1)) in stored_rows(iconn)
    bad = iconn.execute("SELECT reason, raw FROM slidewin.dead_letters").fetchall()
    assert bad == [("bad_type", "c-bad,not-a-number,2026-01-01T12:00:00Z")]
    assert_rollups_exact(iconn)

    # the same files under new names, plus one stored event resent with another value: all
    # duplicates of stored rows -- nothing changes
    again = tmp_path / "again"
    again.mkdir()
    write_jsonl(again, "a2.jsonl", [event(f"j{i}", i, i / 10) for i in range(40)])
    parquet(again, "c2.parquet", [(f"p{i}", 7, i / 4) for i in range(50)])
    before = stored_rows(iconn)
    second = ingest(store_dsn, cluster.url, again, tmp_path / "w2")
    assert (second["accepted"], second["duplicates"]) == (0, 90)
    assert stored_rows(iconn) == before
    assert_rollups_exact(iconn)


def big_parquet(folder: Path, name: str, prefix: str, count: int, start_s: float) -> None:
    pq.write_table(pa.table({
        "uuid": pa.array([f"{prefix}{i}" for i in range(count)], pa.string()),
        "val": pa.array(np.arange(count, dtype=np.int64) % 1000 - 500),
        "ts": pa.array(
            np.int64((T0 - EPOCH) // timedelta(microseconds=1) + start_s * 1e6)
            + np.arange(count, dtype=np.int64) * 100, pa.timestamp("us", tz="UTC")),
    }), folder / name)


def copying(conn) -> bool:
    """Has the ingest's sink begun a COPY into the events (its statement, running or done)?"""
    found = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND query LIKE 'COPY slidewin.events%'").fetchone()
    return bool(found and found[0])


def test_a_worker_lost_during_a_batch_loses_nothing(cluster, store_dsn, iconn, tmp_path):
    """One worker is killed (its executor with it) while the batch runs: Spark runs the lost
    tasks again on the other worker, and the batch commits exactly once, rollups exact."""
    land = tmp_path / "landing"
    land.mkdir()
    for k in range(24):
        big_parquet(land, f"f{k:02d}.parquet", f"w{k}-", 50_000, k * 5.0)
    work = tmp_path / "w"
    proc = subprocess.Popen(ingest_argv(store_dsn, cluster.url, land, work),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    def under_way() -> bool:  # the sink writes the first partition: the batch is under way
        assert proc.poll() is None, "the ingest ended before its batch was seen copying"
        return copying(iconn)

    wait_until(under_way, 120, what="the batch's first COPY")
    assert proc.poll() is None, "the kill must land while the batch runs"
    cluster.kill_worker(1)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert "Lost executor" in err, err[-3000:]  # Spark noticed, and ran its tasks elsewhere
    totals = json.loads(out.strip().splitlines()[-1])
    assert (totals["accepted"], totals["duplicates"], totals["rejected"]) == (1_200_000, 0, 0)
    count = iconn.execute("SELECT count(*), count(DISTINCT (uuid, ts)) FROM slidewin.events")
    assert count.fetchone() == (1_200_000, 1_200_000)
    assert_rollups_exact(iconn)
