"""Live updates of ``slidewin serve`` (``/api/v1/live``, server-sent events) against a store
being written (``tests.serve_fixtures.LiveWriter``: the ingest's own sink, without Spark), with
the real ``slidewin serve`` process:

- a browser gets a snapshot, then updates as commits land, numbered without gaps;
- one that reconnects with Last-Event-ID gets exactly the updates it missed, and ends in the
  state a browser connecting afresh starts from; an id it cannot resume from gets a snapshot;
- however many browsers watch, the server holds ONE connection that LISTENs;
- the store restarting under it: the server listens again and the same event stream carries on;
- SIGINT stops it with browsers connected (exit 130), SIGTERM too (exit 0).
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from slidewin.client.serve.live import LISTEN_APPLICATION
from tests.serve_fixtures import LiveWriter, ServedStore, setup_store

Event = tuple[str, str, dict[str, Any]]  # (id, kind, body)


pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def live_store(make_store) -> Iterator[tuple[str, LiveWriter]]:
    dsn = make_store(4)
    with psycopg.connect(dsn, autocommit=True) as conn:
        setup_store(conn)
    with LiveWriter(dsn, every_s=0.2) as writer:
        writer.wait_batches(3)
        yield dsn, writer
    assert not writer.errors, writer.errors


@pytest.fixture(scope="module")
def served(live_store) -> Iterator[ServedStore]:
    with ServedStore(live_store[0], "--update-every", "200ms") as server:
        yield server


def events(url: str, count: int, last_event_id: str | None = None,
           until: Any = None, timeout_s: float = 30, on_event: Any = None) -> list[Event]:
    """The first ``count`` events of a new connection (or until ``until(event)`` is true);
    ``on_event(event)`` is called as each arrives (a test waits on it, not on a sleep)."""
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    found: list[Event] = []
    deadline = time.monotonic() + timeout_s
    with httpx.stream("GET", url, headers=headers, timeout=httpx.Timeout(10, read=20)) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        for line in r.iter_lines():
            assert time.monotonic() < deadline, f"{len(found)} events in {timeout_s}s"
            if line == "":
                if "data" in fields:
                    found.append((fields.get("id", ""), fields.get("event", "message"),
                                  json.loads(fields["data"])))
                    if on_event is not None:
                        on_event(found[-1])
                    if len(found) >= count or (until is not None and until(found[-1])):
                        return found
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
    return found


def seq_of(event_id: str) -> int:
    return int(event_id.rsplit(".", 1)[1])


class Board:
    """What a browser holds: the page's own merge rules (client/serve/static/app.js)."""

    def __init__(self, snapshot: dict[str, Any]) -> None:
        self.seq = snapshot["seq"]
        self.series = {n: {r[0]: r for r in rows} for n, rows in snapshot["series"].items()}
        self.start = snapshot["start"]
        self.parts = dict(snapshot["set"])

    def apply(self, update: dict[str, Any]) -> None:
        assert update["seq"] == self.seq + 1, (update["seq"], self.seq)
        self.seq = update["seq"]
        self.start = update.get("start", self.start)
        for name, rows in update.get("upsert", {}).items():
            self.series.setdefault(name, {}).update({r[0]: r for r in rows})
        for name, xs in update.get("remove", {}).items():
            for x in xs:
                self.series[name].pop(x, None)
        for name, rows in self.series.items():
            for x in [x for x in rows if x < self.start[name]]:
                del rows[x]
        self.parts.update(update.get("set", {}))

    def view(self) -> tuple[dict[str, list[Any]], dict[str, Any]]:
        return ({n: sorted(rows.values()) for n, rows in self.series.items()}, self.parts)


def test_a_browser_gets_a_snapshot_then_updates_as_the_store_is_written(served, live_store):
    found = events(served.url + "api/v1/live", 4)
    (first_id, first, body), *updates = found
    assert first == "snapshot" and {k for k, v in body["series"].items() if v} >= {
        "ingest", "live", "window", "freshness"}
    assert body["set"]["gauges"]["rows"] > 0 and body["set"]["dead_letters"]["dead_letters"]
    assert [kind for _id, kind, _b in updates] == ["update"] * 3
    seqs = [seq_of(i) for i, _k, _b in found]
    assert seqs == list(range(seqs[0], seqs[0] + 4))  # one topic, numbered without gaps
    assert {i.rsplit(".", 1)[0] for i, _k, _b in found} == {first_id.rsplit(".", 1)[0]}
    board = Board(body)
    for _id, _kind, update in updates:
        board.apply(update)
    newest = max(board.series["live"])  # the writer's seconds keep arriving
    assert newest >= max(r[0] for r in body["series"]["live"])


def test_a_reconnecting_browser_gets_what_it_missed_and_ends_where_a_fresh_one_starts(
        served, live_store):
    url = served.url + "api/v1/live?kind=hopping&size=10s&advance=2s&range=2m"
    (_i, kind, snapshot), *updates = events(url, 3)
    assert kind == "snapshot"
    board = Board(snapshot)
    for _id, _kind, update in updates:
        board.apply(update)
    last_id = updates[-1][0]
    live_store[1].wait_batches(6)  # the browser is away while the store is written

    [(fresh_id, kind, fresh)] = events(url, 1)
    assert kind == "snapshot" and seq_of(fresh_id) > seq_of(last_id) + 1
    missed = events(url, 10_000, last_event_id=last_id,
                    until=lambda e: seq_of(e[0]) >= seq_of(fresh_id))
    assert all(kind == "update" for _i, kind, _b in missed)  # replayed, not a new snapshot
    assert seq_of(missed[0][0]) == seq_of(last_id) + 1
    for event_id, _kind, update in missed:
        if seq_of(event_id) <= seq_of(fresh_id):
            board.apply(update)
    assert board.seq == fresh["seq"]
    assert board.view() == Board(fresh).view()


@pytest.mark.parametrize("last_event_id", ["nonsense", "0.1.1", "ffff.1.99999999"])
def test_an_id_it_cannot_resume_from_gets_a_snapshot(served, last_event_id):
    [(_i, kind, _body)] = events(served.url + "api/v1/live", 1, last_event_id=last_event_id)
    assert kind == "snapshot"


def test_a_view_the_store_refuses_is_an_error_not_a_stream(served):
    response = httpx.get(served.url + "api/v1/live?stream=nope", timeout=10)
    assert response.status_code == 404 and "no stream named 'nope'" in response.json()["error"]
    response = httpx.get(served.url + "api/v1/live?size=1.5s", timeout=10)
    assert response.status_code == 400 and "whole number of seconds" in response.json()["error"]


def test_one_connection_listens_however_many_browsers_watch(served, live_store):
    done = threading.Event()
    got: list[int] = []

    def browser(view: str) -> None:
        got.append(len(events(served.url + "api/v1/live" + view, 3)))
        done.wait(20)

    views = ["", "", "?stream=sensors", "?stream=sensors&measure=hum", "?kind=sliding&size=5s",
             "?range=2m"]
    threads = [threading.Thread(target=browser, args=(v,)) for v in views]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 30
        while len(got) < len(views) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert got == [3] * len(views)
        with psycopg.connect(live_store[0], autocommit=True) as conn:
            by_name = dict(conn.execute(
                "SELECT application_name, count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name LIKE 'slidewin serve%%' "
                "GROUP BY 1").fetchall())
        assert by_name[LISTEN_APPLICATION] == 1
        assert by_name.get("slidewin serve", 0) <= 8  # the request pool, not one per browser
    finally:
        done.set()
        for t in threads:
            t.join(timeout=30)


def test_the_stream_carries_on_when_the_store_restarts(own_server):
    dsn = own_server.store(4)
    with psycopg.connect(dsn, autocommit=True) as conn:
        setup_store(conn)
    with ServedStore(dsn, "--update-every", "200ms") as server:
        seen: list[Event] = []
        connected = threading.Event()
        reader = threading.Thread(target=lambda: seen.extend(events(
            server.url + "api/v1/live", 10_000, timeout_s=60,
            until=lambda e: e[1] == "update" and _accepted_after(e, restarted_at),
            on_event=lambda _e: connected.set())))
        restarted_at = float("inf")
        with LiveWriter(dsn, every_s=0.2) as writer:
            writer.wait_batches(2)
        reader.start()
        assert connected.wait(30), "the reader got no snapshot before the restart"
        own_server.restart(down_s=1.5)
        restarted_at = time.time()
        with LiveWriter(dsn, every_s=0.2, seed=8) as writer:
            writer.wait_batches(4)
            reader.join(timeout=60)
        assert not reader.is_alive() and seen
        assert seen[0][1] == "snapshot" and all(k == "update" for _i, k, _b in seen[1:])
        assert _accepted_after(seen[-1], restarted_at)  # new commits, on the same stream
        # every connection of before the restart is gone: the server opened its LISTEN again
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                "application_name = %s", (LISTEN_APPLICATION,)).fetchone() == (1,)
        assert httpx.get(server.url + "api/v1/health", timeout=10).json()["isHealthy"]


def _accepted_after(event: Event, t: float) -> bool:
    rows = event[2].get("upsert", {}).get("ingest", [])
    return any(row[0] > t and row[1] > 0 for row in rows)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_a_signal_stops_it_with_browsers_connected(live_store, sig, code):
    server = ServedStore(live_store[0]).start()
    try:
        connected = threading.Event()
        reader = threading.Thread(target=lambda: events(
            server.url + "api/v1/live", 10_000, timeout_s=60,
            on_event=lambda _e: connected.set()), daemon=True)
        reader.start()
        assert connected.wait(30), "the browser got no snapshot before the signal"
        started = time.monotonic()
        assert server.stop(sig) == code
        assert time.monotonic() - started < 10
        assert "slidewin serve stopped" in "".join(server.stderr)
        assert "Traceback" not in "".join(server.stderr)
    finally:
        server.__exit__()
