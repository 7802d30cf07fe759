"""The JSON API of ``slidewin serve``: every route returns exactly what the matching command's
``--json`` prints for the same question (integers beyond 2**53 as strings, the one rule the
API adds), failures are the CLI's error object with an HTTP status, an OpenAPI document lists
the routes, health has ksqlDB's shape, and no response -- not even a failure's -- holds the DSN.

The app runs in this process (FastAPI's TestClient) against a store written at pinned times;
the clock is pinned too, so "now" is the same instant for the command and the route.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pyarrow as pa
import pytest
from click.testing import CliRunner

from slidewin.client.cli import cli
from slidewin.client.serve.app import create_app
from slidewin.client.serve.jsonout import SAFE_INT, browser_safe, plain
from slidewin.db import joins, key_windows, sessions, streams
from slidewin.db.config import redact
from slidewin.db.schema import init_schema
from slidewin.db.streams import Column
from slidewin.ingest.batch import GOOD_SCHEMA
from slidewin.ingest.sink import BatchRows, write_batch
from slidewin.jobs import store as job_store
from slidewin.jobs.config import RetentionPolicy
from tests.conftest import T0
from tests.pgfixture import create_database, drop_database

with warnings.catch_warnings():  # starlette's TestClient asks for httpx's successor; httpx works
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

NOW = T0 + timedelta(seconds=120)
PASSWORD = "Sw0rdfish-42"  # trust auth ignores it; no response may show it
BIG = 2**62  # two of these in a window sum beyond what a browser number holds



def _events(conn: psycopg.Connection, batch: int, rows: list[tuple[str, int, float]],
            bad: list[tuple[str, str]]) -> None:
    good = pa.Table.from_pylist(
        [{"part": conn.execute("SELECT slidewin.partition_of(%s)", (k,)).fetchone()[0],
          "uuid": k, "val": v, "ts": T0 + timedelta(seconds=s), "copies": 1}
         for k, v, s in rows], schema=GOOD_SCHEMA)
    dead = pa.Table.from_pylist(
        [{"source": "in.jsonl", "reason": r, "detail": f"why {r}", "raw": raw} for r, raw in bad],
        schema=pa.schema([(c, pa.string()) for c in ("source", "reason", "detail", "raw")]))
    write_batch(conn, "api/text/1", "events", batch, lambda _s: BatchRows(good, dead),
                grace=timedelta(seconds=5))


@pytest.fixture(scope="module")
def dsn(pg_admin_dsn: str) -> Iterator[str]:
    """A store written at pinned times: events in batches with dead letters, a session window,
    a declared stream with two measures, two joined streams, a retention job and its runs."""
    made = create_database(pg_admin_dsn)
    with psycopg.connect(made) as conn:
        init_schema(conn, 4)
    with psycopg.connect(made, autocommit=True) as conn:
        sessions.define(conn, sessions.SessionDef("visits", timedelta(seconds=5)))
        for b in range(6):
            rows = [(f"k{i % 7}", i * 10 + b, b * 10 + i * 0.5) for i in range(15)]
            bad = [("malformed", "{oops"), ("late", '{"uuid": "x"}')] if b % 2 else []
            _events(conn, b, rows, bad)
        _events(conn, 6, [("big1", BIG, 61.0), ("big2", BIG, 61.5)], [])
        streams.define(conn, "sensors", key="sensor", time="ts",
                       columns=[Column("sensor", "text"), Column("temp", "double precision"),
                                Column("hum", "bigint")], measures=["temp", "hum"])
        conn.execute("INSERT INTO slidewin_streams.sensors (sensor, ts, temp, hum) "
                     "SELECT 's' || (i %% 3), %s + i * interval '700 milliseconds', i / 4.0, i "
                     "FROM generate_series(0, 80) i", (T0,))
        conn.execute("SELECT slidewin.ingest_advance('sensors', %s, %s, '1s')",
                     (T0 + timedelta(seconds=56), T0))
        conn.execute("INSERT INTO slidewin.dead_letters (source, reason, raw, stream) "
                     "VALUES ('s.jsonl', 'bad_type', '{\"temp\": \"hot\"}', 'sensors')")
        for name in ("orders", "payments"):
            streams.define(conn, name, key="id", time="ts",
                           columns=[Column("id", "text"), Column("k", "text")])
        joins.define(conn, "paid", left="orders", right="payments", on="k",
                     before=timedelta(seconds=5), after=timedelta(seconds=5), now=T0)
        conn.execute("INSERT INTO slidewin_streams.orders (id, k, ts) VALUES "
                     "('o1', 'a', %s), ('o2', 'b', %s)", (T0, T0 + timedelta(seconds=1)))
        conn.execute("INSERT INTO slidewin_streams.payments (id, k, ts) VALUES "
                     "('p1', 'a', %s)", (T0 + timedelta(seconds=2),))
        for name, newest in (("orders", 1), ("payments", 2)):  # as the ingest records them
            conn.execute("SELECT slidewin.ingest_advance(%s, %s, %s, '0s')",
                         (name, T0 + timedelta(seconds=newest), T0))
        for i in range(3):
            conn.execute("SELECT slidewin.record_job_run('default', 'retention', %s, %s, 1, "
                         "'{\"0\": 4}', true, false, '{}', NULL)",
                         (T0 + timedelta(seconds=i), T0 + timedelta(seconds=i, milliseconds=5)))
    job_store.add_retention(made, RetentionPolicy(history=timedelta(minutes=10)))
    yield f"{made} password={PASSWORD}"
    drop_database(pg_admin_dsn, made)


@pytest.fixture(scope="module")
def client(dsn: str) -> Iterator[TestClient]:
    with TestClient(create_app(dsn)) as c:
        yield c


@pytest.fixture(autouse=True)
def pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("slidewin.db.clock.utc_now", lambda: NOW)


def cli_json(dsn: str, *args: str) -> Any:
    result = CliRunner().invoke(cli, ["--dsn", dsn, *args, "--json"])
    assert result.exit_code == 0, (args, result.output)
    return json.loads(result.stdout.strip().splitlines()[-1])


def api_json(client: TestClient, path: str, status: int = 200) -> Any:
    response = client.get(path)
    assert response.status_code == status, (path, response.text)
    assert response.headers["content-type"].startswith("application/json")
    return response.json()


FROM_TO = "from=2026-01-01T12:00:00Z&to=2026-01-01T12:01:10Z"

# (route, the command asking the same question): each pair must answer the same object
SAME = [
    ("/api/v1/status", ["db", "status"]),
    ("/api/v1/status?stream=events", ["db", "status", "--stream", "events"]),
    ("/api/v1/status?stream=sensors", ["db", "status", "--stream", "sensors"]),
    ("/api/v1/streams", ["streams", "list"]),
    ("/api/v1/streams/sensors", ["streams", "show", "sensors"]),
    *[(f"/api/v1/query/{q}?seconds=90", ["query", q, "--seconds", "90"])
      for q in ("avg", "max", "min", "sum", "count")],
    ("/api/v1/query/avg?seconds=10&relative_to=stream",
     ["query", "avg", "--seconds", "10", "--relative-to", "stream"]),
    ("/api/v1/query/max?seconds=60&stream=sensors&measure=hum&relative_to=stream",
     ["query", "max", "--seconds", "60", "--stream", "sensors", "--measure", "hum",
      "--relative-to", "stream"]),
    ("/api/v1/windows/tumbling?size=10s&last=2m",
     ["windows", "tumbling", "--size", "10s", "--last", "2m"]),
    (f"/api/v1/windows/tumbling?size=10s&{FROM_TO}&key=k3",
     ["windows", "tumbling", "--size", "10s", "--from", "2026-01-01T12:00:00Z",
      "--to", "2026-01-01T12:01:10Z", "--key", "k3"]),
    ("/api/v1/windows/hopping?size=20s&advance=5s&last=1m&relative_to=stream",
     ["windows", "hopping", "--size", "20s", "--advance", "5s", "--last", "1m",
      "--relative-to", "stream"]),
    ("/api/v1/windows/sliding?size=5s&last=30s&relative_to=2026-01-01T12:00:40Z",
     ["windows", "sliding", "--size", "5s", "--last", "30s",
      "--relative-to", "2026-01-01T12:00:40Z"]),
    (f"/api/v1/windows/tumbling?size=10s&{FROM_TO}&stream=sensors&measure=temp",
     ["windows", "tumbling", "--size", "10s", "--from", "2026-01-01T12:00:00Z",
      "--to", "2026-01-01T12:01:10Z", "--stream", "sensors", "--measure", "temp"]),
    ("/api/v1/windows/rows?size=10", ["windows", "rows", "--size", "10"]),
    ("/api/v1/windows/rows?size=10&advance=5&rows=40",
     ["windows", "rows", "--size", "10", "--advance", "5", "--rows", "40"]),
    ("/api/v1/windows/rows?size=5&stream=sensors&measure=hum&key=s1",
     ["windows", "rows", "--size", "5", "--stream", "sensors", "--measure", "hum",
      "--key", "s1"]),
    ("/api/v1/windows/current?size=10s&relative_to=stream",
     ["windows", "current", "--size", "10s", "--relative-to", "stream"]),
    ("/api/v1/windows/current?size=20s&advance=5s&all=true&delta=10s&relative_to=stream",
     ["windows", "current", "--size", "20s", "--advance", "5s", "--all", "--delta", "10s",
      "--relative-to", "stream"]),
    ("/api/v1/windows/current?size=10s&relative_to=stream&stream=sensors&measure=temp",
     ["windows", "current", "--size", "10s", "--relative-to", "stream", "--stream", "sensors",
      "--measure", "temp"]),
    ("/api/v1/windows/key-index", ["windows", "key-index"]),
    ("/api/v1/windows/key-index?stream=sensors", ["windows", "key-index", "--stream", "sensors"]),
    ("/api/v1/sessions", ["windows", "list"]),
    ("/api/v1/sessions/visits?limit=5", ["windows", "sessions", "visits", "--limit", "5"]),
    ("/api/v1/sessions/visits?key=k2&last=30s",
     ["windows", "sessions", "visits", "--key", "k2", "--last", "30s"]),
    ("/api/v1/dead-letters?limit=3", ["db", "dead-letters", "--limit", "3"]),
    ("/api/v1/dead-letters?reason=late&limit=2&before=4",
     ["db", "dead-letters", "--reason", "late", "--limit", "2", "--before", "4"]),
    ("/api/v1/dead-letters?stream=sensors", ["db", "dead-letters", "--stream", "sensors"]),
    ("/api/v1/ingest/batches?limit=2", ["db", "batches", "--limit", "2"]),
    ("/api/v1/joins", ["joins", "list"]),
    ("/api/v1/joins/paid", ["joins", "show", "paid"]),
    ("/api/v1/joins/paid?last=30s&limit=1", ["joins", "show", "paid", "--last", "30s",
                                             "--limit", "1"]),
    ("/api/v1/joins/paid?from=2026-01-01T11:59:00Z&to=2026-01-01T12:01:00Z",
     ["joins", "show", "paid", "--from", "2026-01-01T11:59:00Z", "--to",
      "2026-01-01T12:01:00Z"]),
    ("/api/v1/jobs", ["jobs", "status"]),
    ("/api/v1/jobs/runs?limit=2", ["jobs", "runs", "--limit", "2"]),
]


@pytest.mark.parametrize(("path", "args"), SAME, ids=[p for p, _ in SAME])
def test_each_route_returns_what_the_command_prints(client, dsn, path, args):
    assert api_json(client, path) == browser_safe(plain(cli_json(dsn, *args)))


def test_a_keys_count_windows_need_the_key_index_and_then_answer_as_the_command(client, dsn):
    path = "/api/v1/windows/rows?size=3&advance=1&rows=6&key=k2"
    refused = client.get(path)
    assert refused.status_code == 400 and "key-index enable" in refused.json()["error"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        key_windows.set_index(conn, True)
        try:
            args = ["windows", "rows", "--size", "3", "--advance", "1", "--rows", "6", "--key",
                    "k2"]
            assert api_json(client, path) == browser_safe(plain(cli_json(dsn, *args)))
        finally:
            key_windows.set_index(conn, False)


def test_a_second_page_follows_the_first(client, dsn):
    first = api_json(client, "/api/v1/ingest/batches?limit=3")
    cursor = first["next_before"]
    second = api_json(client, f"/api/v1/ingest/batches?limit=3&before={cursor}")
    assert second == plain(cli_json(dsn, "db", "batches", "--limit", "3", "--before", cursor))
    ids = [b["batch_id"] for b in first["batches"] + second["batches"]]
    assert ids == sorted(ids, reverse=True) == list(range(6, 0, -1))
    letters = api_json(client, "/api/v1/dead-letters?limit=4")
    rest = api_json(client, f"/api/v1/dead-letters?limit=100&before={letters['next_before']}")
    seen = [d["id"] for d in letters["dead_letters"] + rest["dead_letters"]]
    assert seen == sorted(seen, reverse=True) and len(seen) == len(set(seen)) == 7
    assert rest["next_before"] is None


def test_integers_a_browser_cannot_hold_go_out_as_strings(client, dsn):
    command = cli_json(dsn, "query", "sum", "--seconds", "90")
    route = api_json(client, "/api/v1/query/sum?seconds=90")
    assert command["value"] > SAFE_INT and route["value"] == str(command["value"])
    windows = api_json(client, "/api/v1/windows/tumbling?size=10s&last=2m")["windows"]
    big = [w for w in windows if w["max"] == str(BIG)]
    assert big and big[0]["sum"] == str(2 * BIG)


def test_joins_say_where_they_stand(client):
    [paid] = api_json(client, "/api/v1/joins")["joins"]
    assert (paid["name"], paid["left"], paid["right"], paid["results"]["pairs"]) == (
        "paid", "orders", "payments", 1)
    found = api_json(client, "/api/v1/joins/paid?from=2026-01-01T11:59:00Z"
                             "&to=2026-01-01T12:01:00Z")
    assert [(a["l"]["id"], a["r"]["id"]) for a in found["rows"]] == [("o1", "p1")]


def _z(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize("stream", ["sensors", "events"])
def test_the_dashboard_s_key_windows_are_the_windows_route_s(client, stream):
    """The dashboard's charts of a key are ``windows tumbling --key`` over the same range."""
    shown = {}
    keys, measure = (("s1", "s2"), "&measure=hum") if stream == "sensors" else (("k1", "k2"), "")
    for key in keys:
        asked = f"stream={stream}&key={key}{measure}"
        found = api_json(client, f"/api/v1/dashboard?{asked}&size=10s")
        start = found["start"]["window"]
        route = api_json(client, f"/api/v1/windows/tumbling?size=10s&{asked}"
                                 f"&from={_z(start)}&to={_z(start + 300)}")
        expected = [[datetime.fromisoformat(w["start"]).timestamp(), w["avg"], float(w["max"]),
                     w["n"], 1 if w["final"] else 0] for w in route["windows"]]
        assert found["series"]["window"] == expected and expected, key
        shown[key] = expected
    assert shown[keys[0]] != shown[keys[1]]  # each key its own windows


def test_the_dashboard_lists_what_joins_show_returns(client):
    found = api_json(client, "/api/v1/dashboard?stream=payments")["parts"]["join_results"]
    assert found.pop("problem") is None
    assert found == api_json(client, "/api/v1/joins/paid?limit=10")
    assert [(a["l"]["id"], a["r"]["id"]) for a in found["rows"]] == [("o1", "p1")]


@pytest.mark.parametrize(("path", "status", "said"), [
    ("/api/v1/streams/nope", 404, "no stream named 'nope'"),
    ("/api/v1/query/avg?stream=nope", 404, "no stream named 'nope'"),
    ("/api/v1/query/median", 400, "not a question"),
    ("/api/v1/windows/tumbling?size=10s&measure=temp", 400, "has one measure, val"),
    ("/api/v1/windows/tumbling?size=ten", 400, "is not a duration"),
    ("/api/v1/windows/rows?size=0", 400, "--size"),
    ("/api/v1/windows/tumbling?size=10s&from=2026-01-01T12:00:00Z", 400, "go together"),
    ("/api/v1/sessions/nope", 404, "nope"),
    ("/api/v1/dead-letters?limit=0", 400, "limit '0' is out of range; use a whole number from 1 "
                                          "to 1000"),
    ("/api/v1/streams/%00", 400, "name '\\x00' holds a NUL byte"),
    ("/api/v1/query/avg?stream=a%00b", 400, "stream 'a\\x00b' holds a NUL byte"),
    ("/api/v1/jobs/runs?before=-99999999999999999999", 400,
     "before '-99999999999999999999' is out of range; use a whole number from 1 to "
     "9223372036854775807"),
    ("/api/v1/dead-letters?before=99999999999999999999", 400, "from 1 to 9223372036854775807"),
    ("/api/v1/jobs/runs?before=soon", 400, "before 'soon' is not a whole number"),
    ("/api/v1/windows/key-index?x=" + "y" * 1001, 400, "x is 1001 characters long"),
    ("/api/v1/windows/key-index?stream=nope", 404, "--stream nope: no stream named 'nope'"),
])
def test_a_refused_question_is_the_cli_s_error_object(client, path, status, said):
    body = api_json(client, path, status)
    if said is not None:
        assert said in body["error"] and body["exit_code"] == 2, body


def test_the_openapi_document_lists_every_route(client):
    doc = api_json(client, "/api/v1/openapi.json")
    paths = set(doc["paths"])
    for path, _args in SAME:
        route = path.split("?")[0]
        assert route in paths or any(_matches(route, p) for p in paths), route
    for extra in ("/api/v1/info", "/api/v1/health", "/api/v1/live", "/api/v1/dashboard",
                  "/api/v1/joins", "/metrics"):
        assert extra in paths
    answers = {path: set(item["get"]["responses"]) for path, item in doc["paths"].items()}
    assert not [p for p, codes in answers.items() if "422" in codes]  # refusals are 400
    assert "400" in answers["/api/v1/jobs/runs"] and "400" in answers["/api/v1/streams/{name}"]


def _matches(route: str, template: str) -> bool:
    a, b = route.strip("/").split("/"), template.strip("/").split("/")
    return len(a) == len(b) and all(y.startswith("{") or x == y for x, y in zip(a, b, strict=True))


def test_health_has_ksqldb_s_shape(client, pg_admin_dsn):
    body = api_json(client, "/api/v1/health")
    assert body == {"isHealthy": True, "details": {
        "database": {"isHealthy": True}, "schema": {"isHealthy": True},
        "jobs": {"isHealthy": True}}}
    empty = create_database(pg_admin_dsn)  # no schema: not healthy, and why
    try:
        with TestClient(create_app(empty)) as c:
            body = api_json(c, "/api/v1/health", 503)
            assert body["isHealthy"] is False and body["details"]["database"]["isHealthy"]
            assert "slidewin db init" in body["details"]["schema"]["reason"]
    finally:
        drop_database(pg_admin_dsn, empty)


def test_info_names_the_streams_and_versions(client):
    body = api_json(client, "/api/v1/info")
    assert body["streams"] == ["events", "orders", "payments", "sensors"]
    assert body["joins"] == ["paid"] and body["session_windows"] == ["visits"]
    assert body["schema_version"] == body["schema_expected"]


@pytest.mark.slow
def test_no_response_holds_the_dsn(client, dsn):
    down = "host=127.0.0.1 port=1 dbname=nowhere user=someone password=" + PASSWORD
    seen = [client.get(p).text for p, _ in SAME]
    seen += [client.get(p).text for p in ("/api/v1/info", "/api/v1/health", "/metrics",
                                          "/api/v1/dashboard", "/api/v1/streams/nope",
                                          "/api/v1/openapi.json", "/api/v1/joins")]
    with TestClient(create_app(down, wait_s=1)) as c:  # a store that does not answer
        for path in ("/api/v1/status", "/api/v1/health", "/api/v1/query/avg", "/metrics"):
            response = c.get(path)
            seen.append(response.text)
            assert response.status_code in (200, 503), (path, response.text)
    for text in seen:
        for secret in (PASSWORD, dsn, redact(dsn), down, redact(down), "dbname="):
            assert secret not in text


@pytest.mark.slow
def test_a_store_that_does_not_answer_is_503_and_metrics_say_it_is_down():
    down = "host=127.0.0.1 port=1 dbname=nowhere user=someone connect_timeout=2"
    with TestClient(create_app(down, wait_s=1)) as c:
        body = api_json(c, "/api/v1/status", 503)
        assert body["exit_code"] == 1 and "PostgreSQL" in body["error"] or "store" in body[
            "error"]
        assert c.get("/metrics").text.strip().endswith("slidewin_store_up 0")
        assert api_json(c, "/api/v1/health", 503)["details"]["database"]["isHealthy"] is False


@pytest.mark.slow
def test_the_wheel_ships_the_page_and_its_chart_library(tmp_path):
    import zipfile

    from tests.test_wheel import _build_wheel

    names = set(zipfile.ZipFile(_build_wheel(tmp_path)).namelist())
    static = "slidewin/client/serve/static/"
    for name in ("index.html", "app.js", "style.css", "vendor/uplot/uPlot.iife.min.js",
                 "vendor/uplot/uPlot.min.css", "vendor/uplot/LICENSE"):
        assert static + name in names, name
    assert "slidewin/procedures/metrics/counters.sql" in names


@pytest.mark.parametrize(("path", "said"), [
    ("/api/v1/windows/tumbling?size=1s&last=100000000d",
     "last 100000000d is longer than the limit of 100 years (36500d)"),
    ("/api/v1/windows/tumbling?size=" + "9" * 60 + "s", "size 99999999999999999999..."),
    ("/api/v1/windows/tumbling?size=1s&last=1h&relative_to=0001-01-01T00:30:00Z",
     "falls before year 1"),
    ("/api/v1/windows/rows?size=1&rows=100000000000",
     "--rows 100000000000 is more than the limit of 1000000 events"),
    ("/api/v1/windows/rows?size=100000000000", "--size 100000000000 is more than the limit"),
    ("/api/v1/windows/current?size=1s&delta=1d&relative_to=0001-01-01T00:30:00Z",
     "--delta 1d before 0001-01-01T00:30:00+00:00 falls before year 1"),
    ("/api/v1/sessions/visits?last=" + "9" * 60 + "s", "last 99999999999999999999..."),
])
def test_a_number_too_large_for_the_store_is_400_naming_the_parameter(client, path, said):
    """These answered 500 (an OverflowError, or a bigint no count-window function takes)."""
    body = api_json(client, path, 400)
    assert said in body["error"] and body["exit_code"] == 2, body
