"""``slidewin bench windows`` on a small load: every key the issue names, every answer checked
against the raw rows, and a wrong answer caught."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from slidewin.client.bench import windows as bench
from slidewin.client.cli import cli

KEYS = ["tumbling10s_1h_ms_p50", "hopping60s_10s_1h_ms_p50", "sliding30s_1h_ms_p50",
        "last10k_rows_ms_p50", "avg_1h_ms_p50", "max_1h_ms_p50", "avg_1h_naive_ms_p50",
        "speedup_avg_1h", "load_events_per_s", "hopping7d_1s_1d_ms_p50",
        "count_rows100k_adv1_ms_p50", "max_rss_mb"]


@pytest.mark.slow
def test_a_small_run_reports_every_figure(pg_admin_dsn):
    result = CliRunner().invoke(cli, ["--dsn", pg_admin_dsn, "-q", "bench", "windows",
                                      "--events", "20k", "--repeat", "2", "--naive-repeat", "1",
                                      "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    assert doc["answers_match"] is True
    # the long series, each window checked alone; the CLI wrote every one of the 86,400
    assert doc["bounded_answers_match"] is True and doc["cli_windows"] == 86400
    assert all(doc[k] > 0 for k in KEYS), {k: doc.get(k) for k in KEYS}
    assert doc["events"] == 20_000
    # the same hour in a declared stream with a double measure, checked and timed against it
    assert doc["stream_answers_match"] is True
    for kind in ("double_tumbling10s_1h", "double_avg_1h", "double_max_1h"):
        assert doc[f"{kind}_ms_p50"] > 0 and doc[f"{kind}_vs_events"] > 0


@pytest.mark.slow
def test_the_wide_stream_runs_every_kind_against_its_own_raw_rows(pg_admin_dsn):
    """``--stream wide``: the hour written into the declared stream (counted in its table),
    every kind -- one key's windows too -- and the long series checked against its raw rows."""
    result = CliRunner().invoke(cli, ["--dsn", pg_admin_dsn, "-q", "bench", "windows",
                                      "--stream", "wide", "--events", "20k", "--repeat", "2",
                                      "--naive-repeat", "1", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    assert (doc["stream"], doc["measure"], doc["key"]) == ("wide", "temp", "dev-0")
    assert doc["rows_stored"] == 20_000 and doc["spec"]["stream"] == "wide"
    assert doc["answers_match"] is True and doc["bounded_answers_match"] is True
    assert doc["cli_windows"] == 86400
    assert all(doc[k] > 0 for k in [*KEYS, "key_tumbling10s_1h_ms_p50"]), doc
    # the built-in stream is not loaded, so nothing is set against it
    assert not [k for k in doc if k.startswith("double_") or k == "stream_answers_match"]


def test_every_kind_reads_the_stream_it_is_given():
    """The kinds are written once; the built-in stream's text names slidewin.events and its
    functions, a declared stream's its own table and the stream_* functions -- no other's."""
    wide = bench.Source("wide", key="device", measure="temp", declared=True, double=True)
    for kind, (ours, naive) in bench.kinds(wide).items():
        for template in (ours, naive):
            text = repr(wide.render(template))
            assert "slidewin.events" not in text and "uuid" not in text, (kind, text)
        assert "slidewin.stream_" in repr(wide.render(ours)), kind
        assert "slidewin_streams" in repr(wide.render(naive)), kind
    assert "key_tumbling10s_1h" not in bench.kinds(bench.EVENTS)


def test_an_unknown_stream_is_a_usage_error_naming_the_choices():
    result = CliRunner().invoke(cli, ["bench", "windows", "--stream", "nope"])
    assert result.exit_code == 2
    assert "--stream" in result.output and "'events', 'wide'" in result.output


def test_the_check_catches_a_wrong_answer():
    right = [(1, 10, 1, 9)]
    assert bench.same(right, [(1, 10, 1, 9)])
    assert not bench.same(right, [(1, 11, 1, 9)])  # one sum off
    assert not bench.same(right, [])  # a window missing
    assert bench.same([(0.5,)], [(0.5 + 1e-12,)])  # averages to 1e-9
    assert not bench.same([(0.5,)], [(0.5001,)])
