"""``slidewin bench ingest --stream wide`` on a small load: every figure it names, the wide
stream's rows all stored, and its COPY limit measured on the same rows."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from slidewin.client.bench.streams import BENCH_STREAMS, WIDE_COLUMNS, make_wide
from slidewin.client.cli import cli

pytestmark = [pytest.mark.slow, pytest.mark.spark]
KEYS = ["wide_copy_limit_rows_per_s", "wide_plain_copy_rows_per_s", "wide_vs_plain_copy",
        "events_copy_limit_rows_per_s", "wide_ingest_events_per_s",
        "events_ingest_events_per_s", "wide_ratio", "events_ratio", "wide_vs_events",
        "three_streams_at_once_events_per_s", "three_streams_one_at_a_time_events_per_s",
        "three_streams_at_once_vs_alone"]


def test_the_wide_rows_have_every_declared_column_and_unique_identities():
    table = make_wide(5000, datetime(2026, 1, 1, tzinfo=UTC), 1000)
    assert table.column_names == [c.name for c in WIDE_COLUMNS]
    pairs = set(zip(table.column("device").to_pylist(), table.column("ts").to_pylist(),
                    strict=True))
    assert len(pairs) == 5000
    assert max(table.column("ts").to_pylist()) <= datetime(2026, 1, 1, tzinfo=UTC)
    assert min(table.column("ts").to_pylist()) >= datetime(2026, 1, 1, tzinfo=UTC) - timedelta(
        seconds=6)


def test_a_small_run_reports_every_figure(pg_admin_dsn):
    result = CliRunner().invoke(cli, ["--dsn", pg_admin_dsn, "-q", "bench", "ingest",
                                      "--stream", "wide", "--events", "6k",
                                      "--rows-per-file", "1k", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    assert all(doc[k] and doc[k] > 0 for k in KEYS), {k: doc.get(k) for k in KEYS}
    assert doc["columns"] == 8 and doc["measures"] == ["temp", "pressure"]


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_the_wide_stream_alone_stores_every_row_and_reports_the_drivers_memory(pg_admin_dsn, fmt):
    """``--no-baselines``: the wide ingest alone, files appended a million rows at a time."""
    result = CliRunner().invoke(cli, ["--dsn", pg_admin_dsn, "-q", "bench", "ingest",
                                      "--stream", "wide", "--events", "25k", "--format", fmt,
                                      "--rows-per-file", "10k", "--no-baselines", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    assert doc["wide_rows_stored"] == 25_000
    assert doc["wide_driver_rss_mb"] > 100 and doc["wide_ingest_events_per_s"] > 0
    assert doc["input_mb"] >= 1


def test_no_baselines_is_for_the_wide_stream(pg_admin_dsn):
    result = CliRunner().invoke(cli, ["--dsn", pg_admin_dsn, "bench", "ingest",
                                      "--no-baselines"])
    assert result.exit_code == 2 and "--no-baselines" in result.output


def test_the_clis_stream_choices_are_the_defined_benchmark_streams():
    from slidewin.client.bench.streams import bench_stream
    from slidewin.client.cli.options import BENCH_STREAMS as CHOICES
    from slidewin.db.errors import ConfigError

    assert CHOICES == tuple(BENCH_STREAMS)
    with pytest.raises(ConfigError, match="--stream 'nope'.*events, wide"):
        bench_stream("nope")


def test_a_declared_streams_rows_hold_a_key_once_per_time():
    """Keys and times drawn with a (key, time) twice: the wide rows move the repeat on by 1 µs
    (its table, and a COPY into it, take each pair once)."""
    import numpy as np
    import pyarrow as pa

    keys = pa.array(["a", "a", "a", "b"])
    ts = pa.array([5, 5, 5, 5], pa.timestamp("us", tz="UTC"))
    table = BENCH_STREAMS["wide"].make_rows(keys, ts, np.random.default_rng(1))
    assert table.column("ts").cast(pa.int64()).to_pylist() == [5, 6, 7, 5]
    assert table.column_names == [c.name for c in WIDE_COLUMNS]
