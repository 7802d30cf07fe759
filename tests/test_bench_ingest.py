"""``slidewin bench ingest`` on a small load: every figure it names, the warm run beside the
cold one, and where each run's CPU went."""

from __future__ import annotations

import json

import psycopg
import pytest
from click.testing import CliRunner

from slidewin.client.bench.ingest import CpuMeter, _postgres_processes
from slidewin.client.cli import cli

pytestmark = [pytest.mark.slow, pytest.mark.spark]
RATES = ["copy_limit_rows_per_s", "copy_limit_triggers_rows_per_s", "ingest_events_per_s",
         "ingest_warm_events_per_s", "ratio", "ratio_warm", "freshness_p95_s", "driver_rss_mb"]


def test_a_small_run_reports_cold_and_warm_rates_and_their_cpu(pg_admin_dsn):
    result = CliRunner().invoke(cli, ["--dsn", pg_admin_dsn, "-q", "bench", "ingest",
                                      "--events", "6k", "--rows-per-file", "1k",
                                      "--freshness-seconds", "5s", "--freshness-rate", "200",
                                      "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    assert all(doc[k] and doc[k] > 0 for k in RATES), {k: doc.get(k) for k in RATES}
    assert doc["ratio_warm"] == round(doc["ingest_warm_events_per_s"]
                                      / doc["copy_limit_rows_per_s"], 3)
    assert set(doc["cpu_s"]) == {"cold", "warm"}
    readable = bool(_postgres_processes())  # the server under test runs on this machine
    for run in doc["cpu_s"].values():
        assert set(run) == {"python", "jvm", "postgres"}
        assert run["jvm"] > 0 and run["python"] > 0, run
        # a few thousand rows cost PostgreSQL about one clock tick: present, not measurable
        assert run["postgres"] >= 0 if readable else run["postgres"] is None, run


def test_the_cpu_meter_counts_a_backend_that_ended_inside_it(pg_admin_dsn):
    """A connection opened, busy for a while and closed within the meter: its backend has
    ended (perhaps not yet reaped) when the meter reads last, and still counts."""
    if not _postgres_processes():
        pytest.skip("the server under test does not run on this machine")
    with CpuMeter(None) as meter, psycopg.connect(pg_admin_dsn) as conn:
        busy = conn.execute("SELECT count(*) FROM generate_series(1, 10000000)").fetchone()
    with psycopg.connect(pg_admin_dsn) as conn:  # the same work alone, timed by the server
        conn.execute("SELECT 1")
        started = _postgres_processes()
        conn.execute("SELECT count(*) FROM generate_series(1, 10000000)").fetchone()
        pid = conn.info.backend_pid
        alone = _postgres_processes()[pid] - started[pid]
    assert busy == (10_000_000,)
    assert meter.seconds["postgres"] >= 0.5 * alone > 0, (meter.seconds, alone)
