"""The ingest on a real Spark standalone cluster: a master and two one-core workers started here
from the installed PySpark (``ingest.cluster``), ``slidewin ingest --master spark://...`` run as
a user runs it, over JSON Lines, CSV and Parquet. Exactly once (a second run over the same files
adds nothing), bad rows dead-lettered, rollups exact -- then a worker is killed and the next
batch still commits exactly once on the survivor. The cluster is stopped at the end, every
process of it gone."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from client.processes import slidewin_argv
from ingest.cluster import LocalCluster
from tests.conftest import T0
from tests.ingest_fixtures import (
    clean_ingest_state,
    event,
    stored_rows,
    write_jsonl,
    write_lines,
)
from tests.invariants import assert_rollups_exact

pytestmark = [pytest.mark.spark, pytest.mark.slow]


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


def ingest(dsn: str, url: str, land: Path, work: Path) -> dict:
    argv = slidewin_argv(
        "--dsn", dsn, "--data-dir", str(work), "ingest", "--once", "--json",
        "--master", url, "--landing", str(land), "--checkpoint-dir", str(work / "cp"),
        "--processed", "keep", "--grace", "1h", "--max-future", "1000d",
    )
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


def test_a_lost_worker_loses_nothing(cluster, store_dsn, iconn, tmp_path):
    """A worker killed (its executor with it) before the run: the master hands the
    application to the one left, and the batch commits exactly once."""
    land = tmp_path / "landing"
    land.mkdir()
    parquet(land, "a.parquet", [(f"k{i}", i, i / 100) for i in range(500)])
    cluster.kill_worker(1)
    done = ingest(store_dsn, cluster.url, land, tmp_path / "w")
    assert done["accepted"] == 500 and len(stored_rows(iconn)) == 500
    assert_rollups_exact(iconn)
