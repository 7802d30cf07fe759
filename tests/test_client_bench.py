"""``slidewin bench client`` reports (never asserts) its figures; here only their shape."""

from __future__ import annotations

import json

import pytest
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


def test_the_wide_streams_generator_writes_its_own_files(tmp_path):
    """``--stream wide``: the generator of ``slidewin client --stream`` for the wide stream --
    its files under ``<landing>/wide/``, holding its columns -- and the JSON names the stream."""
    from slidewin.client.bench.client import make_source

    assert make_source(tmp_path, 5000, 2500, "wide") == 5000
    files = sorted((tmp_path / "wide").iterdir())
    assert len(files) == 2 and not [p for p in tmp_path.iterdir() if p.is_file()]
    first = json.loads(files[0].read_text().splitlines()[0])
    assert {"device", "ts", "temp", "pressure", "amount", "count", "label", "ok"} >= set(first)
    assert {"device", "ts"} <= set(first)
    result = CliRunner().invoke(
        cli, ["-q", "bench", "client", "--stream", "wide", "--skip-ingest", "--seconds", "0.5",
              "--repeats", "1", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    last = json.loads(result.output.strip().splitlines()[-1])
    assert last["stream"] == "wide" and last["generator_events_per_s"] > 0


def test_the_wide_streams_watcher_is_its_reporter(make_store):
    """The watchers ``slidewin client --stream wide`` runs: its reporter, reading the store
    where the stream is declared (a store without it fails the reporter's first read)."""
    import time

    import psycopg

    from slidewin.client.bench.client import Watchers, batch_line
    from slidewin.client.bench.streams import WIDE

    dsn = make_store(2)
    with psycopg.connect(dsn, autocommit=True) as conn:
        WIDE.declare(conn)
    with Watchers(dsn, stream="wide") as watchers:
        time.sleep(1.3)
    assert len(watchers.thread_cpu) == 1 and watchers.cpu_s > 0
    assert batch_line("wide").match("[stream wide] batch 4: in 2500, accepted 2500")
    assert batch_line("events").match("[text] batch 4: in 2500, accepted 2500")


@pytest.mark.slow
@pytest.mark.spark
def test_a_tiny_wide_run_ingests_its_files_and_names_the_stream(pg_admin_dsn):
    """The whole ``--stream wide`` run on a tiny load (3 batches: 20 files of 2,500, 8 a
    batch): both ingests of the pair counted their batches and the JSON names the stream."""
    result = CliRunner().invoke(
        cli, ["--dsn", pg_admin_dsn, "-q", "bench", "client", "--stream", "wide", "--seconds",
              "0.5", "--repeats", "1", "--events", "50k", "--ingest-repeats", "1", "--json"],
        catch_exceptions=False)
    assert result.exit_code == 0, result.output
    last = json.loads(result.output.strip().splitlines()[-1])
    assert last["stream"] == "wide"
    assert last["ingest_rows_per_s_without_watchers"] > 0
    assert last["ingest_rows_per_s_with_watchers"] > 0
