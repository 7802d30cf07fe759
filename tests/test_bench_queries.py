"""The query benchmark on a tiny size: the figures are all there and sane (no timing thresholds:
a benchmark reports, it doesn't assert), and its database is gone afterwards."""

from __future__ import annotations

import json
from dataclasses import replace

import psycopg
import pytest
from click.testing import CliRunner

from slidewin.client.bench.queries import QueryBenchSpec, copy_chunks, run_query_bench
from slidewin.client.bench.stats import percentile
from slidewin.client.cli import cli
from slidewin.db.errors import ConfigError
from tests.conftest import T0

TINY = QueryBenchSpec(rows=20_000, seconds=4, partitions=4, repeat=5, naive_repeat=2,
                      nibbles=8, nibble_chunk=1000, copy_rows=4_000, copy_rounds=1,
                      chunk_rows=5_000)
REQUIRED = ["rows", "avg30_rollup_ms_p50", "avg30_naive_ms_p50", "speedup_avg30", "max_ms_p50",
            "nibble1000_ms_p99", "nibble1000_call_ms_p99", "nibble1000_commit_ms_p99",
            "nibble1000_async_commit_ms_p99",
            "load_rows_per_s", "copy_rows_per_s_pk",
            "copy_rows_per_s_no_index", "copy_rows_per_s_pk_plus_val_index",
            *(f"avg{s}_{how}_ms_p50" for s in (1, 5, 10, 30) for how in ("rollup", "naive"))]


def _bench_databases(admin_dsn: str) -> list[str]:
    with psycopg.connect(admin_dsn) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'slidewin\\_bench\\_%'"
        ).fetchall()
    return sorted(r[0] for r in rows)


def test_tiny_run_has_every_figure_and_cleans_up(pg_admin_dsn):
    before = _bench_databases(pg_admin_dsn)
    messages: list[str] = []
    result = run_query_bench(pg_admin_dsn, TINY, messages.append)
    for key in REQUIRED:
        assert key in result, key
        assert result[key] > 0, (key, result[key])
    assert result["rows"] == result["rows_stored"] == 20_000
    assert result["answers_match"] is True
    assert result["speedup_avg30"] == pytest.approx(
        result["avg30_naive_ms_p50"] / result["avg30_rollup_ms_p50"], rel=0.01, abs=0.051)
    # 5,000 rows a partition, 2 x 8 nibbles over 4 partitions: every call deletes a full chunk
    assert result["nibble_rows_deleted"] == 8 * 1000
    assert result["nibble_rows_per_call_min"] == 1000
    for key in ("avg30_rollup", "avg30_naive", "nibble1000"):
        assert result[f"{key}_ms_p99"] >= result[f"{key}_ms_p50"]
    json.dumps(result)  # the --json line must serialise
    assert any("dropped" in m for m in messages)
    assert _bench_databases(pg_admin_dsn) == before


def test_the_wide_stream_runs_every_phase_on_its_own_table(pg_admin_dsn):
    """``stream="wide"``: the rows written into the declared stream (counted in its rollups),
    its avg and max from the rollups equal to the raw scan's, its own nibbles."""
    result = run_query_bench(pg_admin_dsn, replace(TINY, stream="wide"), lambda _m: None)
    assert (result["stream"], result["measure"]) == ("wide", "temp")
    assert result["rows_stored"] == 20_000 and result["answers_match"] is True
    for key in REQUIRED:
        assert result[key] > 0, (key, result[key])
    # its oldest rows, whichever partition holds them: every call deletes a full chunk
    assert result["nibble_rows_deleted"] == 8 * 1000
    assert result["nibble_rows_per_call_min"] == 1000


def test_an_unknown_stream_is_a_usage_error_naming_the_choices():
    result = CliRunner().invoke(cli, ["bench", "queries", "--stream", "nope"])
    assert result.exit_code == 2
    assert "--stream" in result.output and "'events', 'wide'" in result.output


def test_cli_json_last_line(pg_admin_dsn):
    result = CliRunner().invoke(cli, [
        "--dsn", pg_admin_dsn, "bench", "queries", "--rows", "8k", "--seconds", "2",
        "--partitions", "2", "--repeat", "3", "--naive-repeat", "1", "--nibbles", "2",
        "--copy-rows", "0", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)  # with --json, stdout is the JSON object alone
    assert body["rows"] == 8000 and body["partitions"] == 2
    assert "copy_rows_per_s_pk" not in body  # --copy-rows 0 skips the index comparison
    table = result.stderr.splitlines()  # the table is progress then, with the rest
    assert any(line.lstrip().startswith("30 s") for line in table)
    assert "loaded" in result.stderr


@pytest.mark.parametrize(("field", "value", "option"), [
    ("rows", 0, "--rows"), ("seconds", 0, "--seconds"), ("partitions", 0, "--partitions"),
    ("repeat", 0, "--repeat"), ("nibble_chunk", 0, "--nibble-chunk"),
    ("partitions", 2000, "--partitions"),
])
def test_spec_refuses_bad_values_naming_the_option(field, value, option):
    with pytest.raises(ConfigError, match=f"{option} must be at .* {value}"):
        QueryBenchSpec(**{field: value})


def test_generated_rows_are_spread_evenly_and_unique():
    chunks = list(copy_chunks(1000, 4, T0, 3, 300, seed=1))
    lines = b"".join(chunks).decode().splitlines()
    assert len(lines) == 1000 and [len(c.splitlines()) for c in chunks] == [300, 300, 300, 100]
    keys = {(f[1], f[3]) for f in (line.split("\t") for line in lines)}
    assert len(keys) == 1000  # (uuid, ts) unique: COPY would abort on a duplicate
    seconds = [line.split("\t")[3][:19] for line in lines]
    assert [seconds.count(s) for s in sorted(set(seconds))] == [250, 250, 250, 250]


def test_percentile_is_nearest_rank():
    samples = [float(i) for i in range(1, 101)]
    assert (percentile(samples, 50), percentile(samples, 99), percentile([3.0], 99)) == (
        50.0, 99.0, 3.0)
