"""A window request is checked against its own stream's state, and ``--limit`` with ``--last``
keeps the newest windows.

- check_window_spec took the largest grace over every row of slidewin.stream_state, and
  complete_up_to the largest watermark: after declaring a stream with --grace 2m, every 10 s
  window of ``events`` was refused under a 30 s history ("use a --size of at most 0s"), and the
  built-in stream's "complete up to" followed the other stream's time.
- ``windows tumbling --last 3h --relative-to stream --limit 2`` returned 0 windows: the range was
  cut to its first two window starts, three hours before the data.

    events      . . . . . . . . . . . . . . . . . . . . . . . . .  [x x x]   (the last 30 s)
    --last 3h   [------------------------------------------------------------)
    before      [--)                                                  (the oldest 2: empty)
    now                                                          [--------)  (the newest 2)
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from click.testing import CliRunner

from slidewin.client.cli import cli
from slidewin.db import streams, windows
from slidewin.db.retention_settings import RetentionSettings, upsert_settings
from slidewin.db.streams import Column
from tests import store_fixtures
from tests.store_fixtures import at, put

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn
S = timedelta(seconds=1)


def _other_stream_with_grace(conn, grace: timedelta) -> None:
    streams.define(conn, "alerts", key="id", time="ts", grace=grace,
                   columns=[Column("id", "text"), Column("level", "bigint")], measures=["level"])
    conn.execute("INSERT INTO slidewin_streams.alerts (id, ts, level) VALUES ('a', %s, 1)",
                 (at(500),))
    conn.execute("SELECT slidewin.ingest_advance('alerts', %s, %s, %s)",
                 (at(500), at(500), grace))


def test_another_stream_s_grace_never_shrinks_the_events_windows(sconn):
    upsert_settings(sconn, RetentionSettings("default", 30.0, None, 100, 0))
    put(sconn, [("k", i, at(i)) for i in range(20)])
    sconn.execute("SELECT slidewin.ingest_advance('events', %s, %s, '0s')", (at(19), at(19)))
    _other_stream_with_grace(sconn, timedelta(minutes=2))
    found = windows.tumbling(sconn, 10 * S, at(0), at(20))
    assert [w.n for w in found] == [10, 10]
    sconn.execute("SELECT slidewin.check_window_spec(10, 10)")  # the events' own grace: 0
    # its own grace still counts: 25 s of grace leave 5 s of the 30 s history
    sconn.execute("SELECT slidewin.ingest_advance('events', %s, %s, '25s')", (at(19), at(19)))
    with pytest.raises(Exception, match="use a size of at most 5s"):
        sconn.execute("SELECT slidewin.check_window_spec(10, 10)")


def test_events_are_complete_up_to_their_own_watermark_not_another_stream_s(sconn):
    put(sconn, [("k", i, at(i)) for i in range(20)])
    sconn.execute("SELECT slidewin.ingest_advance('events', %s, %s, '5s')", (at(19), at(19)))
    _other_stream_with_grace(sconn, timedelta(0))  # its watermark: at(500)
    assert sconn.execute("SELECT slidewin.complete_up_to()").fetchone() == (at(14),)
    state = windows.status(sconn, at(0), at(20))
    assert state.complete_up_to == at(14)
    assert [w.final for w in windows.tumbling(sconn, 10 * S, at(0), at(20))] == [True, False]


@pytest.fixture
def runner(sconn, small_store_dsn, monkeypatch):
    monkeypatch.setenv("SLIDEWIN_DSN", small_store_dsn)
    return CliRunner()


def _json(runner, *args: str) -> dict:
    res = runner.invoke(cli, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_limit_with_last_keeps_the_newest_windows(sconn, runner):
    """Data only in the last 30 s of a 3 h range; --limit 2 gives the two newest windows."""
    put(sconn, [("k", i, at(10_800 - 30 + i)) for i in range(30)])
    doc = _json(runner, "windows", "tumbling", "--size", "10s", "--last", "3h",
                "--relative-to", "stream", "--limit", "2")
    assert [(w["start"][11:19], w["n"]) for w in doc["windows"]] == [
        ("14:59:40", 10), ("14:59:50", 10)]
    assert (doc["from"][11:19], doc["to"][11:19], doc["limit"]) == ("14:59:40", "15:00:00", 2)
    text = runner.invoke(cli, ["windows", "tumbling", "--size", "10s", "--last", "3h",
                               "--relative-to", "stream", "--limit", "2"])
    assert text.exit_code == 0, text.output
    assert ("2 windows (--limit 2: the range cut to its newest 2 window starts)"
            in text.output.splitlines()[0])
    # sliding windows: the newest seconds; hopping: the newest starts
    doc = _json(runner, "windows", "sliding", "--size", "5s", "--last", "3h",
                "--relative-to", "stream", "--limit", "3")
    assert [w["end"][11:19] for w in doc["windows"]] == ["14:59:57", "14:59:58", "14:59:59"]
    doc = _json(runner, "windows", "hopping", "--size", "20s", "--advance", "10s", "--last",
                "3h", "--relative-to", "stream", "--limit", "2")
    assert [w["start"][11:19] for w in doc["windows"]] == ["14:59:40", "14:59:50"]
    # --from/--to keep the first windows, as before
    doc = _json(runner, "windows", "tumbling", "--size", "10s", "--from",
                at(10_800 - 30).isoformat(), "--to", at(10_800).isoformat(), "--limit", "1")
    assert [w["start"][11:19] for w in doc["windows"]] == ["14:59:30"]


def test_limit_with_last_keeps_the_newest_windows_of_a_declared_stream(sconn, runner):
    streams.define(sconn, "temps", key="id", time="ts",
                   columns=[Column("id", "text"), Column("t", "bigint")], measures=["t"])
    sconn.execute("INSERT INTO slidewin_streams.temps (id, ts, t) SELECT 'k', %s + i * "
                  "interval '1 second', i FROM generate_series(0, 29) i", (at(10_800 - 30),))
    doc = _json(runner, "windows", "tumbling", "--stream", "temps", "--size", "10s", "--last",
                "3h", "--relative-to", "stream", "--limit", "2")
    assert [(w["start"][11:19], w["n"]) for w in doc["windows"]] == [
        ("14:59:40", 10), ("14:59:50", 10)]
