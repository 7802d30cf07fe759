"""``slidewin bench serve --stream wide``: the browsers and API requests ask for the stream the
run ingests, and a tiny run over the declared stream answers every request."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from slidewin.client.bench.serve import ROUTES, for_stream
from slidewin.client.cli import cli


def test_every_route_that_takes_a_stream_asks_for_the_runs():
    assert [for_stream(r, "events") for r in ROUTES] == list(ROUTES)  # as the runs before
    wide = [for_stream(r, "wide") for r in ROUTES]
    assert "api/v1/query/avg?seconds=30&stream=wide&measure=temp" in wide
    assert "api/v1/status?stream=wide" in wide
    assert "api/v1/health" in wide and "metrics" in wide  # the store's, of no stream
    assert for_stream("api/v1/live", "wide") == "api/v1/live?stream=wide&measure=temp"


@pytest.mark.slow
@pytest.mark.spark
def test_a_tiny_wide_run_answers_every_request_and_names_the_stream(pg_admin_dsn):
    result = CliRunner().invoke(
        cli, ["--dsn", pg_admin_dsn, "-q", "bench", "serve", "--stream", "wide", "--rate", "1k",
              "--duration", "5s", "--clients", "2", "--requests", "10", "--json"],
        catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output.strip().splitlines()[-1])
    assert doc["stream"] == "wide"
    assert doc["api"]["requests"] > 0 and doc["api"]["failed"] == 0, doc["api"]
    assert doc["ingest_events_per_s"]["without"] > 0 and doc["sse"]["events"] > 0
