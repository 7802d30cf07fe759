"""``slidewin windows`` through click's CliRunner against a real PostgreSQL: the window kinds on
a drawn timeline, the --json shape, the watermark from the ingest's stream state, and bad input
naming the option.

    second (after T0 = 12:00:00):  0    3    9   10   12   25        (3 partitions)
    events                         a=1  b=2  c=3 d=4  e=5  f=6
    newest 12:00:25, grace 5 s  -> complete up to 12:00:20: windows ending by then are final
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from click.testing import CliRunner, Result

from slidewin.client.cli import cli
from tests import store_fixtures
from tests.conftest import T0
from tests.store_fixtures import at, keys_in, put

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn

KEYS = keys_in(0, 3, "c") + keys_in(1, 3, "c")
EVENTS = [(KEYS[0], 1, at(0)), (KEYS[3], 2, at(3)), (KEYS[1], 3, at(9.5)),
          (KEYS[4], 4, at(10)), (KEYS[2], 5, at(12)), (KEYS[5], 6, at(25))]
RANGE = ["--from", T0.isoformat(), "--to", at(60).isoformat()]
COMMANDS = [["tumbling"], ["hopping"], ["sliding"], ["rows"], ["current"]]


@pytest.fixture
def timeline(sconn, small_store_dsn, monkeypatch):
    monkeypatch.setenv("SLIDEWIN_DSN", small_store_dsn)
    put(sconn, EVENTS)
    sconn.execute("INSERT INTO slidewin.stream_state (stream, newest_ts, grace, watermark) "
                  "VALUES ('events', %s, '5 s', %s)", (at(25), at(20)))
    return sconn


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["windows", *args])


def as_json(result: Result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def rows(doc: dict) -> list[tuple]:
    return [(w["start"][11:19], w["end"][11:19], w["n"], w["sum"], w["final"])
            for w in doc["windows"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_subcommand_has_help_with_an_example(command):
    result = run(*command, "--help")
    assert result.exit_code == 0
    assert "Example" in result.output and f"slidewin windows {command[0]}" in result.output


def test_tumbling_json_and_the_watermark(timeline):
    doc = as_json(run("tumbling", "--size", "10s", *RANGE, "--json"))
    assert doc["complete_up_to"].startswith("2026-01-01T12:00:20")
    assert rows(doc) == [
        ("12:00:00", "12:00:10", 3, 6, True),  # a b c; 12:00:10 itself is the next window's
        ("12:00:10", "12:00:20", 2, 9, True),  # ends exactly at the watermark: final
        ("12:00:20", "12:00:30", 1, 6, False),
    ]


def test_hopping_and_sliding(timeline):
    doc = as_json(run("hopping", "--size", "20s", "--advance", "10s", *RANGE, "--json"))
    assert rows(doc) == [
        ("12:00:00", "12:00:20", 5, 15, True),
        ("12:00:10", "12:00:30", 3, 15, False),
        ("12:00:20", "12:00:40", 1, 6, False),
    ]
    doc = as_json(run("sliding", "--size", "3s", *RANGE, "--json"))
    # one window per second holding events; both ends inclusive
    assert rows(doc) == [
        ("11:59:57", "12:00:00", 1, 1, True), ("12:00:00", "12:00:03", 2, 3, True),
        ("12:00:06", "12:00:09", 1, 3, True), ("12:00:07", "12:00:10", 2, 7, True),
        ("12:00:09", "12:00:12", 3, 12, True), ("12:00:22", "12:00:25", 1, 6, False),
    ]


def test_last_relative_to_a_time_and_to_the_stream(timeline):
    doc = as_json(run("tumbling", "--size", "10s", "--last", "20s",
                      "--relative-to", at(20).isoformat(), "--json"))
    assert (doc["from"][11:19], doc["to"][11:19]) == ("12:00:00", "12:00:20")
    assert [w["start"][11:19] for w in doc["windows"]] == ["12:00:00", "12:00:10"]
    doc = as_json(run("tumbling", "--size", "10s", "--last", "10s", "--relative-to", "stream",
                      "--json"))
    # stream time is the newest second holding events (12:00:25): the range ends after it
    assert doc["to"][11:19] == "12:00:26"
    assert [w["start"][11:19] for w in doc["windows"]] == ["12:00:20"]


def test_count_windows_and_lookups(timeline):
    doc = as_json(run("rows", "--size", "2", "--rows", "6", "--json"))
    assert [(w["number"], w["n"], w["sum"]) for w in doc["windows"]] == [
        (1, 2, 11), (2, 2, 7), (3, 2, 3)]
    doc = as_json(run("current", "--size", "20s", "--advance", "10s", "--all",
                      "--relative-to", at(12).isoformat(), "--json"))
    assert rows(doc) == [("12:00:00", "12:00:20", 5, 15, True),
                         ("12:00:10", "12:00:30", 3, 15, False)]
    doc = as_json(run("current", "--size", "10s", "--delta", "10s",
                      "--relative-to", at(12).isoformat(), "--json"))
    assert rows(doc) == [("12:00:00", "12:00:10", 3, 6, True)]


def test_human_output_carries_every_window(timeline):
    result = run("tumbling", "--size", "10s", *RANGE)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "complete up to 2026-01-01 12:00:20" in lines[0] and "0 late" in lines[0]
    assert [line.split()[-1] for line in lines[2:]] == ["final", "final", "open"]


BAD = [
    (["tumbling", "--size", "1.5s"], "--size must be a whole number of seconds"),
    (["hopping", "--size", "10s", "--advance", "20s"], "--advance 20s is larger than --size 10s"),
    (["tumbling", "--size", "10s", "--from", T0.isoformat()], "--from and --to go together"),
    (["tumbling", "--size", "10s", "--last", "1m", *RANGE], "--last and --from/--to"),
    (["tumbling", "--size", "10s", "--relative-to", "yesterday"],
     "--relative-to: 'yesterday' is neither now, stream nor an ISO-8601 time"),
    (["rows", "--size", "5", "--rows", "3"], "--rows must be from --size (5)"),
    (["tumbling", "--size", "1s", "--from", T0.isoformat(), "--to",
      (T0 + timedelta(days=2)).isoformat()], "more than 100000 windows"),
]


@pytest.mark.parametrize(("args", "message"), BAD, ids=[m for _, m in BAD])
def test_bad_input_names_the_option_and_the_fix(timeline, args, message):
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_a_window_longer_than_retention_is_refused(timeline):
    timeline.execute("INSERT INTO slidewin.retention_settings (name, history_s) "
                     "VALUES ('default', 60)")
    result = run("tumbling", "--size", "1m", *RANGE)
    assert result.exit_code == 2
    assert "--size 60s plus the ingest's grace 5s is longer than the retention history 60s" \
        in result.output
    assert "use a size of at most 55s" in result.output.replace("--size", "size")
