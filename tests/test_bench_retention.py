"""``slidewin bench retention --stream wide`` on a tiny load: the declared stream is declared
with the run's retention, filled by the inserter and nibbled by the job, and the JSON names it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from slidewin.client.cli import cli

pytestmark = pytest.mark.slow  # a few seconds of load, Spark-free


def run(dsn: str, *args: str) -> dict:
    result = CliRunner().invoke(cli, ["--dsn", dsn, "-q", "bench", "retention", "--rate", "2k",
                                      "--seconds", "3", "--chunk", "500", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_wide_stream_is_filled_and_nibbled_by_its_own_history(pg_admin_dsn):
    doc = run(pg_admin_dsn, "--stream", "wide", "--history", "1s")
    assert doc["stream"] == "wide" and doc["spec"]["stream"] == "wide"
    assert doc["rows_inserted"] > 3000 and doc["rows_deleted"] > 0
    assert doc["nibble_calls"] > 0 and doc["delete_ms_p50"] > 0
    assert doc["oldest_age_over_s"] is not None and doc["bytes_end"] > 0


def test_the_wide_streams_row_limit_is_one_target(pg_admin_dsn):
    doc = run(pg_admin_dsn, "--stream", "wide", "--history", "0", "--max-rows", "2k")
    assert doc["stream"] == "wide" and doc["rows_deleted"] > 0
    assert doc["max_overshoot_rows"] is not None and doc["oldest_age_over_s"] is None


def test_the_built_in_stream_is_the_default(pg_admin_dsn):
    assert run(pg_admin_dsn, "--history", "1s")["stream"] == "events"
