"""What ``/api/v1/dashboard`` (and so every live update) says of a stream, in-process (and
``/api/v1/live`` through the real server):

- a declared stream without a measure is shown by its counts (200, no measure series), not
  refused;
- the built-in stream's "complete up to" is its own watermark, never past its stream time, however
  far another stream's data has gone;
- each stream's board shows the session windows of that stream alone;
- a stream whose windows the store refuses still gets its board -- the stream list above all,
  so another stream can be chosen -- with the refusal said beside it.

Timeline (T0 = 2026-01-01 12:00:00Z):

    events   ●●●●●●●●●●●                       newest T0+10, grace 1 s: watermark T0+9
    weather                          ●●●        newest T0+100, grace 0: watermark T0+100
             T0        T0+10   ...       T0+100
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import psycopg
import pyarrow as pa
import pytest

from slidewin.client.serve.app import create_app
from slidewin.db import sessions, streams
from slidewin.db.streams import Column
from slidewin.ingest.batch import GOOD_SCHEMA
from slidewin.ingest.sink import BatchRows, write_batch
from tests.conftest import T0
from tests.serve_fixtures import ServedStore

with warnings.catch_warnings():  # starlette's TestClient asks for httpx's successor; httpx works
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

BAD = pa.schema([(c, pa.string()) for c in ("source", "reason", "detail", "raw")])


@pytest.fixture(scope="module")
def dsn(make_store) -> str:
    dsn = make_store(2)
    with psycopg.connect(dsn, autocommit=True) as conn:
        good = pa.Table.from_pylist(
            [{"part": conn.execute("SELECT slidewin.partition_of('k')").fetchone()[0],
              "uuid": f"k{i}", "val": i, "ts": T0 + timedelta(seconds=i), "copies": 1}
             for i in range(11)], schema=GOOD_SCHEMA)
        write_batch(conn, "dash/text/1", "events", 0,
                    lambda _s: BatchRows(good, pa.Table.from_pylist([], schema=BAD)),
                    grace=timedelta(seconds=1))
        streams.define(conn, "weather", key="station", time="ts",
                       columns=[Column("station", "text")])
        sessions.define(conn, sessions.SessionDef("showers", timedelta(seconds=10),
                                                  stream="weather"))
        conn.execute("INSERT INTO slidewin_streams.weather (station, ts) SELECT 'w' || i, "
                     "%s + i * interval '1 second' FROM generate_series(98, 100) i", (T0,))
        conn.execute("SELECT slidewin.ingest_advance('weather', %s, %s, '0s')",
                     (T0 + timedelta(seconds=100), T0))
        streams.define(conn, "sensors", key="sensor", time="ts",
                       columns=[Column("sensor", "text"), Column("temp", "double precision")],
                       measures=["temp"], history=timedelta(minutes=2))
        conn.execute("INSERT INTO slidewin_streams.sensors (sensor, ts, temp) VALUES "
                     "('s1', %s, 20.5)", (T0,))
    return dsn


@pytest.fixture(scope="module")
def client(dsn) -> Iterator[TestClient]:
    with TestClient(create_app(dsn)) as c:
        yield c


def board(client: TestClient, query: str = "") -> dict[str, Any]:
    response = client.get("/api/v1/dashboard" + query)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_stream_without_a_measure_shows_its_counts(client):
    found = board(client, "?stream=weather")
    parts = found["parts"]
    assert parts["view"]["measured"] is False and parts["view"]["measure"] is None
    assert found["series"]["live"] == [] and found["series"]["window"] == []
    assert parts["gauges"]["rows"] == 3 and parts["partitions"][0]["rows"] == 3
    assert parts["window_problem"] is None
    assert board(client)["parts"]["view"]["measured"] is True  # the built-in stream has val


def test_each_streams_board_shows_its_own_session_windows(client):
    shown = board(client, "?stream=weather")["parts"]["sessions"]["sessions"]
    # one open session per station: w98, w99, w100
    assert [(d["name"], d["stream"], d["open"]) for d in shown] == [("showers", "weather", 3)]
    assert board(client)["parts"]["sessions"]["sessions"] == []  # events has none
    assert board(client, "?stream=sensors")["parts"]["sessions"]["sessions"] == []


@pytest.mark.parametrize(("query", "said"), [
    ("?stream=weather&measure=temp", "it has none (add one: slidewin streams alter weather"),
    ("?stream=sensors&measure=hum", "choose one of: temp"),
    ("?measure=temp", "the events stream has one measure, val"),
])
def test_a_measure_the_stream_lacks_is_refused_not_shown_as_a_window_problem(client, query,
                                                                               said):
    response = client.get("/api/v1/dashboard" + query)
    assert response.status_code == 400 and said in response.json()["error"], response.text


def test_a_stream_without_a_measure_is_followed_live(dsn):
    with ServedStore(dsn) as server, httpx.stream(
            "GET", server.url + "api/v1/live?stream=weather", timeout=30) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():  # the first event is the snapshot
            if line.startswith("data: "):
                snapshot = json.loads(line.removeprefix("data: "))
                break
    assert snapshot["set"]["view"]["measured"] is False
    assert snapshot["set"]["gauges"]["rows"] == 3


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_events_are_complete_up_to_their_own_watermark_not_past_their_stream_time(client):
    gauges = board(client)["parts"]["gauges"]
    assert _time(gauges["stream_time"]) == T0 + timedelta(seconds=10)
    assert _time(gauges["complete_up_to"]) == T0 + timedelta(seconds=9)  # not weather's T0+100
    assert _time(gauges["complete_up_to"]) <= _time(gauges["stream_time"])
    windows = client.get("/api/v1/windows/tumbling?size=5s&from=2026-01-01T12:00:00Z"
                         "&to=2026-01-01T12:00:15Z").json()
    assert _time(windows["complete_up_to"]) == T0 + timedelta(seconds=9)
    assert [w["final"] for w in windows["windows"]] == [True, False, False]


def test_every_stream_is_listed_when_one_stream_s_windows_are_refused(client):
    response = client.get("/api/v1/windows/tumbling?size=5m&last=10m&stream=sensors")
    assert response.status_code == 400, response.text  # the store refuses these windows
    found = board(client, "?stream=sensors&size=5m&range=10m")
    parts = found["parts"]
    assert [s["name"] for s in parts["streams"]] == ["events", "sensors", "weather"]
    assert parts["window_problem"].startswith("windows of sensors: ")
    assert "longer than its history" in response.json()["error"]
    assert "longer than its history" in parts["window_problem"]  # the same refusal, said
    assert found["series"]["window"] == [] and parts["gauges"]["rows"] == 1
