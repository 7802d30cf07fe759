"""``/metrics``: Prometheus text that Prometheus' own parser reads, named by its rules (the
``slidewin_`` prefix, base units, counters ending in ``_total``, no label that names a key of the
data), with figures that are the store's -- and counters that never go down while retention
deletes events, a stream is dropped with its dead letters and old job runs are pruned. Every
stream has the figures the built-in one has (a declared stream fed by its ingest's own sink), and
each join its results, watermark and how far its final answers reach. The Grafana board and the
Prometheus service of docker-compose.yml ask only for what it serves.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from slidewin.client.serve.app import create_app
from slidewin.db import joins, streams
from slidewin.ingest.typed_sink import write_stream_batch
from tests.serve_fixtures import LiveWriter, setup_store

with warnings.catch_warnings():  # starlette's TestClient asks for httpx's successor; httpx works
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parent.parent
LABELS = {"stream", "reason", "kind", "outcome", "window", "join", "side", "version"}
# a base unit, a count of things, or a ratio: Prometheus' naming rules
UNITS = re.compile(r"_(total|seconds|events|info|version|up|streams|windows|joins|open)$")

Scrape = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def written(make_store) -> Iterator[tuple[str, LiveWriter]]:
    dsn = make_store(4)
    with psycopg.connect(dsn, autocommit=True) as conn:
        setup_store(conn)
    with LiveWriter(dsn, every_s=0.05, per_batch=30) as writer:
        writer.wait_batches(8)
    assert not writer.errors
    now = datetime.now(UTC)
    with psycopg.connect(dsn, autocommit=True) as conn:
        # a batch of the declared stream through its ingest's sink: one good record, one bad
        lines = [{"sensor": "s9", "ts": now.isoformat(), "temp": 21.5, "hum": 3},
                 {"sensor": "s9", "ts": now.isoformat(), "temp": "hot", "hum": 4}]
        data = "".join(json.dumps(line) + "\n" for line in lines).encode()
        result = write_stream_batch(conn, "sensors", "m/stream-sensors/x", 0,
                                    [("s.jsonl", data)], now=now)
        assert (result.accepted, result.rejected) == (1, 1), result
        for name in ("orders", "payments"):
            streams.define(conn, name, key="id", time="ts",
                           columns=[streams.Column("id", "text"), streams.Column("k", "text")])
        joins.define(conn, "paid", left="orders", right="payments", on="k",
                     before=timedelta(seconds=5), after=timedelta(seconds=5), now=now)
        conn.execute("INSERT INTO slidewin_streams.orders (id, k, ts) VALUES ('o1', 'a', %s), "
                     "('o2', 'a', %s)", (now - timedelta(seconds=30), now - timedelta(seconds=2)))
        conn.execute("INSERT INTO slidewin_streams.payments (id, k, ts) VALUES ('p1', 'a', %s)",
                     (now - timedelta(seconds=1),))
        for name in ("orders", "payments"):  # as the ingest records a batch
            conn.execute("SELECT slidewin.ingest_advance(%s, %s, %s, '0s')",
                         (name, now - timedelta(seconds=1), now))
            conn.execute("SELECT slidewin.joins_advance(%s, %s)", (name, now))
    return dsn, writer


@pytest.fixture(scope="module")
def client(written) -> Iterator[TestClient]:
    with TestClient(create_app(written[0])) as c:
        yield c


def scrape(client: TestClient) -> tuple[list, Scrape]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = list(text_string_to_metric_families(response.text))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in families for s in f.samples}
    return families, samples


def test_metrics_are_prometheus_text_named_by_its_rules(client):
    families, samples = scrape(client)
    assert families
    for f in families:
        assert f.name.startswith("slidewin_"), f.name
        assert f.type in ("counter", "gauge"), (f.name, f.type)
        assert UNITS.search(f.name) or f.type == "counter", f.name
        for s in f.samples:
            assert set(s.labels) <= LABELS, (s.name, s.labels)  # never a key of the data
            if f.type == "counter":
                assert s.name.endswith("_total") and s.value >= 0, s.name
    names = {f.name for f in families}
    for wanted in ("slidewin_ingest_events_accepted", "slidewin_ingest_events_duplicate",
                   "slidewin_dead_letters", "slidewin_ingest_batches",
                   "slidewin_stream_freshness_seconds", "slidewin_retention_lag_seconds",
                   "slidewin_retention_deleted_events", "slidewin_job_runs",
                   "slidewin_session_windows_sessions_created", "slidewin_join_results",
                   "slidewin_store_up"):
        assert wanted in names, wanted


def test_the_figures_are_the_store_s(client, written):
    dsn, writer = written
    _families, samples = scrape(client)
    events = (("stream", "events"),)
    assert samples["slidewin_ingest_events_accepted_total", events] == writer.accepted
    assert samples["slidewin_ingest_batches_total", events] == writer.batches
    assert samples["slidewin_dead_letters_total", (("reason", "malformed"),
                                                   ("stream", "events"))] == writer.dead
    with psycopg.connect(dsn, autocommit=True) as conn:
        held = conn.execute("SELECT count(*) FROM slidewin.events").fetchone()[0]
        newest = conn.execute("SELECT newest_ts FROM slidewin.stream_state "
                              "WHERE stream = 'events'").fetchone()[0]
    assert samples["slidewin_stream_events", events] == held
    assert samples["slidewin_stream_newest_event_timestamp_seconds", events] == pytest.approx(
        newest.timestamp())
    assert 0 <= samples["slidewin_stream_freshness_seconds", events] < 120
    assert samples["slidewin_store_up", ()] == 1


def _by_stream(samples: Scrape) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for (name, labels), _value in samples.items():
        stream = dict(labels).get("stream")
        if stream is not None:
            found.setdefault(stream, set()).add(name)
    return found


def test_a_declared_stream_has_every_figure_the_built_in_one_has(client, written):
    dsn, _writer = written
    _families, samples = scrape(client)
    figures = _by_stream(samples)
    assert figures["sensors"] == figures["events"], figures["events"] ^ figures["sensors"]
    sensors = (("stream", "sensors"),)
    assert samples["slidewin_ingest_batches_total", sensors] == 1
    assert samples["slidewin_ingest_events_accepted_total", sensors] == 1
    assert samples["slidewin_ingest_records_rejected_total", sensors] == 1
    assert samples["slidewin_dead_letters_total", (("reason", "bad_type"), *sensors)] == 1
    with psycopg.connect(dsn, autocommit=True) as conn:
        held = conn.execute("SELECT count(*) FROM slidewin_streams.sensors").fetchone()[0]
        watermark = conn.execute("SELECT watermark FROM slidewin.stream_state "
                                 "WHERE stream = 'sensors'").fetchone()[0]
    assert samples["slidewin_stream_events", sensors] == held
    assert samples["slidewin_stream_watermark_timestamp_seconds", sensors] == pytest.approx(
        watermark.timestamp())
    assert samples["slidewin_retention_history_seconds", sensors] == 600
    # a stream with no batch and no deletion yet: its counters are there, at 0
    quiet = (("stream", "orders"),)
    for name in ("ingest_batches", "ingest_events_accepted", "ingest_events_duplicate",
                 "ingest_records_rejected", "retention_deleted_events"):
        assert samples[f"slidewin_{name}_total", quiet] == 0, name


def test_each_join_has_its_results_watermark_and_how_far_its_answers_are_final(client, written):
    dsn, _writer = written
    _families, samples = scrape(client)
    with psycopg.connect(dsn, autocommit=True) as conn:
        state = joins.status(conn, "paid")
        written_pairs = conn.execute("SELECT count(*) FROM slidewin_joins.paid").fetchone()[0]
    paid = (("join", "paid"),)
    assert written_pairs == 1 and state.pairs == 1  # o2 with p1; o1 is 29 s before p1
    assert samples["slidewin_join_results_total", (("join", "paid"), ("kind", "pair"))] == 1
    assert state.watermark is not None and state.complete_up_to is not None
    assert samples["slidewin_join_watermark_timestamp_seconds", paid] == pytest.approx(
        state.watermark.timestamp())
    assert samples["slidewin_join_complete_up_to_timestamp_seconds", paid] == pytest.approx(
        state.complete_up_to.timestamp())
    age = samples["slidewin_join_complete_up_to_age_seconds", paid]
    assert 0 < age < 120 and age == pytest.approx(
        datetime.now(UTC).timestamp() - state.complete_up_to.timestamp(), abs=30)


def test_counters_never_go_down_while_the_rows_they_counted_are_deleted(client, written):
    dsn, _writer = written
    with psycopg.connect(dsn, autocommit=True) as conn:
        streams.define(conn, "gone", key="k", time="ts",
                       columns=[streams.Column("k", "text"), streams.Column("ts", "timestamptz")])
        conn.execute("INSERT INTO slidewin.dead_letters (source, reason, raw, stream) "
                     "SELECT 'g', 'bad_type', 'x', 'gone' FROM generate_series(1, 3)")
        for _i in range(4):
            conn.execute("SELECT slidewin.record_job_run('default', 'retention', now(), now(), "
                         "1, '{}', true, false, '{}', NULL, 2)")
    _f, before = scrape(client)
    with psycopg.connect(dsn, autocommit=True) as conn:
        streams.drop(conn, "gone")  # its dead letters go
        for _i in range(4):  # the store keeps the newest 2 runs
            conn.execute("SELECT slidewin.record_job_run('default', 'retention', now(), now(), "
                         "1, '{}', true, false, '{}', NULL, 2)")
        future = datetime.now(UTC) + timedelta(hours=1)
        for part in range(4):  # retention deletes every event
            while conn.execute("SELECT slidewin.delete_after_date(%s, %s, 500)",
                               (part, future)).fetchone()[0]:
                pass
        assert conn.execute("SELECT count(*) FROM slidewin.events").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM slidewin.job_runs").fetchone() == (2,)
    families, after = scrape(client)
    counters = {f.name + "_total" for f in families if f.type == "counter"}
    went_down = {k: (v, after.get(k)) for k, v in before.items()
                 if k[0] in counters and (after.get(k) is None or after[k] < v)}
    assert went_down == {}
    gone = (("reason", "bad_type"), ("stream", "gone"))
    assert after["slidewin_dead_letters_total", gone] == before["slidewin_dead_letters_total",
                                                               gone] == 3
    runs = (("kind", "retention"), ("outcome", "ok"))
    assert after["slidewin_job_runs_total", runs] == before["slidewin_job_runs_total", runs] + 4
    deleted = after["slidewin_retention_deleted_events_total", (("stream", "events"),)]
    assert deleted == before["slidewin_ingest_events_accepted_total", (("stream", "events"),)]
    assert after["slidewin_stream_events", (("stream", "events"),)] == 0  # a gauge may fall


def _grafana() -> dict:
    return json.loads((ROOT / "monitoring/grafana/dashboards/slidewin.json").read_text())


def test_the_grafana_board_asks_only_for_what_metrics_serves(client):
    families, _samples = scrape(client)
    served = {f.name + ("_total" if f.type == "counter" else "") for f in families}
    board = _grafana()
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    exprs.append(board["templating"]["list"][0]["query"]["query"])
    asked = {m for e in exprs for m in re.findall(r"\bslidewin_[a-z_]+\b", e)}
    assert asked and asked <= served, asked - served
    assert all(p["datasource"]["uid"] == "prometheus" for p in board["panels"])


def test_docker_compose_runs_serve_prometheus_and_grafana_together():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    serve = services["serve"]["command"]
    port = serve[serve.index("--port") + 1]
    assert serve[:2] == ["slidewin", "serve"] and serve[serve.index("--host") + 1] == "0.0.0.0"
    assert f"127.0.0.1:{port}:{port}" in services["serve"]["ports"]
    prometheus = yaml.safe_load((ROOT / "monitoring/prometheus.yml").read_text())
    [job] = prometheus["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == [f"serve:{port}"]
    assert "./monitoring/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in services[
        "prometheus"]["volumes"]
    source = yaml.safe_load((ROOT / "monitoring/grafana/provisioning/datasources/"
                                    "prometheus.yml").read_text())["datasources"][0]
    assert source["uid"] == "prometheus" and source["url"].startswith("http://prometheus:")
    mounts = services["grafana"]["volumes"]
    provider = yaml.safe_load((ROOT / "monitoring/grafana/provisioning/dashboards/"
                                      "slidewin.yml").read_text())["providers"][0]
    assert f"./monitoring/grafana/dashboards:{provider['options']['path']}:ro" in mounts

