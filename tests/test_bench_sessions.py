"""``slidewin bench sessions`` on a small load: the built-in stream's report keeps its keys, and
``--stream wide`` runs the same measures over the declared stream -- its rows stored in its own
table, sessions made from them, its key windows timed without and with its own key index."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from slidewin.client.cli import cli

SMALL = ["--events", "3k", "--keys", "60", "--rounds", "1", "--lookups", "5", "--json"]
# the built-in stream's report, key for key (what earlier runs and the README compare against)
EVENTS_KEYS = {
    "events", "keys", "rounds", "gap_s", "grace_s", "copy_events_per_s",
    "copy_sessions_events_per_s", "copy_key_index_events_per_s", "session_copy_cost_pct",
    "key_index_copy_cost_pct", "ingest_events_per_s", "ingest_sessions_events_per_s",
    "ingest_key_index_events_per_s", "session_ingest_cost_pct", "key_index_ingest_cost_pct",
    "runs", "session_lookup_ms_p50", "session_lookup_ms_p95", "sessions_per_key_median",
    "sessions_merges", "key_window_noindex_ms_p50", "key_window_noindex_ms_p95",
    "key_window_ms_p50", "key_window_ms_p95"}


def _run(dsn: str, *args: str) -> dict:
    result = CliRunner().invoke(cli, ["--dsn", dsn, "-q", "bench", "sessions", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.spark
def test_the_built_in_streams_report_keeps_its_keys(pg_admin_dsn):
    doc = _run(pg_admin_dsn, *SMALL)
    assert set(doc) == EVENTS_KEYS
    assert doc["ingest_sessions_events_per_s"] > 0 and doc["key_window_ms_p50"] > 0


@pytest.mark.slow
@pytest.mark.spark
def test_the_wide_stream_is_measured_with_its_own_rows_and_sessions(pg_admin_dsn):
    doc = _run(pg_admin_dsn, *SMALL, "--stream", "wide")
    assert doc["stream"] == "wide"
    # every event landed in slidewin_streams.wide (counted there), and made sessions
    assert doc["rows_stored"] == 3000
    assert doc["sessions_created"] > 0 and doc["sessions_per_key_median"] >= 1
    for key in ("copy_events_per_s", "copy_sessions_events_per_s", "ingest_events_per_s",
                "ingest_sessions_events_per_s", "session_lookup_ms_p50",
                "key_window_noindex_ms_p50", "copy_key_index_events_per_s",
                "ingest_key_index_events_per_s", "key_window_ms_p50"):
        assert doc[key] > 0, key
    assert isinstance(doc["session_ingest_cost_pct"], float)
    # the key index is the stream's own (its table's (key, time)): the built-in stream's
    # figures, key for key
    assert set(doc["runs"]) == {f"{phase}_{v}" for phase in ("copy", "e2e")
                                for v in ("plain", "sessions", "key_index")}
    assert EVENTS_KEYS <= set(doc)
    assert not any("key_index" in note for note in doc["notes"])
    # its sessions sum its required bigint column, as the built-in stream's sum val: a
    # count-only session would cost the ingest less than the built-in stream's
    assert doc["session_measure"] == "count"
    assert not any("count events only" in note for note in doc["notes"])


def test_an_unknown_stream_is_a_usage_error_naming_the_choices():
    result = CliRunner().invoke(cli, ["bench", "sessions", "--stream", "nope"])
    assert result.exit_code == 2
    assert "--stream" in result.output and "'events', 'wide'" in result.output
