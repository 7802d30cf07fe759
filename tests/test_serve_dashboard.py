"""What ``/api/v1/dashboard`` (and so every live update) says of a stream, in-process (and
``/api/v1/live`` through the real server):

- a declared stream without a measure is shown by its counts (200, no measure series), not
  refused;
- the built-in stream's "complete up to" is its own watermark, never past its stream time, however
  far another stream's data has gone;
- each stream's board shows the session windows of that stream alone;
- a stream whose windows the store refuses still gets its board -- the stream list above all,
  so another stream can be chosen -- with the refusal said beside it;
- the key filter: the measure's charts of one key's events alone (each key its own values), the
  keys of the newest events offered; a key with no events is empty charts and a note, a key on a
  stream without a measure or that its key column cannot hold a note too, never a failure;
- the newest results of a join, the one asked for (a join the store does not know: a note) or
  else one reading the stream.

Timeline (T0 = 2026-01-01 12:00:00Z):

    events   ●●●●●●●●●●●                       newest T0+10, grace 1 s: watermark T0+9;
                                               key ki holds one event, val i, at T0+i
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
from slidewin.db import joins, sessions, streams
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
                     "('s1', %s, 20.5), ('s2', %s, 30.5), ('s2', %s, 31.5)",
                     (T0, T0, T0 + timedelta(seconds=1)))
        streams.define(conn, "meters", key="meter", time="ts",
                       columns=[Column("meter", "bigint"), Column("kwh", "double precision")],
                       measures=["kwh"])
        conn.execute("INSERT INTO slidewin_streams.meters (meter, ts, kwh) VALUES (7, %s, 1.5)",
                     (T0,))
        for name in ("orders", "payments"):
            streams.define(conn, name, key="id", time="ts",
                           columns=[Column("id", "text"), Column("k", "text")])
        joins.define(conn, "paid", left="orders", right="payments", on="k",
                     before=timedelta(seconds=5), after=timedelta(seconds=5), now=T0)
        conn.execute("INSERT INTO slidewin_streams.orders (id, k, ts) VALUES ('o1', 'a', %s), "
                     "('o2', 'b', %s), ('o3', 'a', %s)", (T0, T0 + timedelta(seconds=1),
                                                         T0 + timedelta(seconds=3)))
        conn.execute("INSERT INTO slidewin_streams.payments (id, k, ts) VALUES "
                     "('p1', 'a', %s)", (T0 + timedelta(seconds=2),))
        for name, newest in (("orders", 3), ("payments", 2)):  # as the ingest records them
            conn.execute("SELECT slidewin.ingest_advance(%s, %s, %s, '0s')",
                         (name, T0 + timedelta(seconds=newest), T0))
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


def _snapshot(server: ServedStore, query: str) -> dict[str, Any]:
    """The first event of the live view ``query``: its snapshot."""
    with httpx.stream("GET", server.url + "api/v1/live" + query, timeout=30) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: "):
                return json.loads(line.removeprefix("data: "))
    raise AssertionError("no snapshot")


def test_a_stream_without_a_measure_and_a_key_are_followed_live(dsn):
    with ServedStore(dsn) as server:
        snapshot = _snapshot(server, "?stream=weather")
        assert snapshot["set"]["view"]["measured"] is False
        assert snapshot["set"]["gauges"]["rows"] == 3
        for key, val in (("k7", 7), ("k3", 3)):  # each key its own topic, its own windows
            keyed = _snapshot(server, f"?key={key}")
            assert keyed["view"]["key"] == keyed["set"]["view"]["key"] == key
            assert {row[2] for row in keyed["series"]["window"]} == {val}
        assert _snapshot(server, "?stream=orders")["set"]["join_results"]["rows"]


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
    assert [s["name"] for s in parts["streams"]] == ["events", "meters", "orders", "payments",
                                                     "sensors", "weather"]
    assert parts["window_problem"].startswith("windows of sensors: ")
    assert "longer than its history" in response.json()["error"]
    assert "longer than its history" in parts["window_problem"]  # the same refusal, said
    assert found["series"]["window"] == [] and parts["gauges"]["rows"] == 3


def _values(found: dict[str, Any]) -> tuple[set[Any], set[Any], int]:
    """The per-second averages, the windows' maxima and the events the windows count."""
    series = found["series"]
    return ({row[1] for row in series["live"]}, {row[2] for row in series["window"]},
            sum(row[3] for row in series["window"]))


@pytest.mark.parametrize(("stream", "keys"), [
    ("events", {"k3": 3, "k7": 7}), ("sensors", {"s1": 20.5, "s2": 31.5})])
def test_the_key_filter_shows_that_key_s_windows_alone(client, stream, keys):
    every = _values(board(client, f"?stream={stream}"))
    assert len(every[1]) > 1 or every[2] > 2  # the stream's other keys are in its own charts
    for key, top in keys.items():
        found = board(client, f"?stream={stream}&key={key}")
        assert found["parts"]["view"]["key"] == key and found["parts"]["key_note"] is None
        averages, maxima, n = _values(found)
        assert maxima == {top}, (key, found["series"]["window"])
        assert n == (2 if key == "s2" else 1) and max(averages) <= top


def test_the_key_filter_offers_the_keys_of_the_newest_events(client):
    assert board(client)["parts"]["keys"][:3] == ["k10", "k9", "k8"]
    assert board(client, "?stream=sensors")["parts"]["keys"] == ["s2", "s1"]
    assert board(client, "?stream=meters")["parts"]["keys"] == ["7"]  # a bigint key, as text


@pytest.mark.parametrize(("query", "said"), [
    ("?key=nope", "key 'nope': no events of stream events in the 5 min shown (its charts are "
                  "empty)"),
    ("?stream=sensors&key=s9&range=2m", "key 's9': no events of stream sensors in the 2 min "),
    ("?stream=weather&key=w99", "key 'w99': stream weather has no measure, so it has no key "
                                "windows to show (add one: slidewin streams alter weather "
                                "--measure COLUMN)"),
    ("?stream=meters&key=seven", "key 'seven': stream meters has no such key -- its key column "
                                 "meter is bigint (invalid input syntax for type bigint"),
])
def test_a_key_without_windows_is_empty_charts_and_a_note(client, query, said):
    found = board(client, query)
    assert said in found["parts"]["key_note"], found["parts"]["key_note"]
    assert found["series"]["live"] == [] and found["series"]["window"] == []
    assert found["parts"]["window_problem"] is None and found["parts"]["streams"]


def test_the_newest_join_results_are_listed(client):
    shown = board(client, "?stream=orders")["parts"]
    results = shown["join_results"]
    assert shown["view"]["join"] == "paid" and results["problem"] is None
    # o1 and o3 (key a) each paired with p1, the newest first; o2 (key b) has no payment
    assert [(a["l"]["id"], a["r"]["id"]) for a in results["rows"]] == [("o3", "p1"),
                                                                       ("o1", "p1")]
    assert results["results"]["pairs"] == 2
    # a stream no join reads: the first join's results all the same
    assert board(client, "?stream=weather")["parts"]["join_results"]["join"] == "paid"


def test_a_join_the_store_does_not_know_is_a_note_not_a_failure(client):
    shown = board(client, "?join=nope")["parts"]
    assert shown["view"]["join"] == "nope"
    assert shown["join_results"]["rows"] == []
    assert shown["join_results"]["problem"].startswith("no join named 'nope'")
    assert shown["joins"]["joins"][0]["name"] == "paid"  # the joins it could show
