"""``slidewin bench client`` reports (never asserts) its figures; here only their shape."""

from __future__ import annotations

import json

from click.testing import CliRunner

from slidewin.client.bench.client import IngestRun, summarize
from slidewin.client.cli import cli


def test_generator_only_run_ends_with_the_json_line():
    result = CliRunner().invoke(
        cli, ["-q", "bench", "client", "--skip-ingest", "--seconds", "0.5", "--repeats", "1",
              "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    last = json.loads(result.output.strip().splitlines()[-1])
    assert last["generator_events_per_s"] > 0
    assert set(last["generator_events_per_s_by_format"]) == {"csv", "jsonl", "parquet"}


def test_summary_pairs_runs_and_names_the_targets():
    pairs = [(IngestRun(1000.0, 50.0, 0.0), IngestRun(950.0, 50.0, 1.0)),
             (IngestRun(800.0, 40.0, 0.0), IngestRun(800.0, 40.0, 0.8)),
             (IngestRun(900.0, 45.0, 0.0), IngestRun(990.0, 45.0, 0.9))]
    out = summarize({"csv": [600_000.0], "jsonl": [1.0], "parquet": [2.0]}, pairs)
    assert out["reporter_overhead_pct_by_pair"] == [5.0, 0.0, -10.0]
    assert out["reporter_overhead_pct"] == 0.0  # the median pair
    assert out["watcher_cpu_pct_of_ingest_cpu"] == 2.0
    assert out["generator_events_per_s"] == 600_000
    assert out["generator_vs_ingest"] == round(600_000 / 900, 1)
