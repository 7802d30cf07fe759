"""``slidewin bench ingest`` on a small load: every figure it names, the warm run beside the
cold one, and where each run's CPU went."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from slidewin.client.bench.ingest import _postgres_cpu
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
    readable = _postgres_cpu() is not None  # the server under test runs on this machine
    for run in doc["cpu_s"].values():
        assert set(run) == {"python", "jvm", "postgres"}
        assert run["jvm"] > 0 and run["python"] > 0, run
        assert run["postgres"] > 0 if readable else run["postgres"] is None, run
