"""The client outlives its database: PostgreSQL (the test's own, never the shared one) restarts
under a running client session; its threads (reporter, max tracker, freshness, deleter) wait,
say so once -- one "lost" and one "back" line, not one per thread -- and carry on: reports go on
after the restart and every event written is counted. When the database does not come back
within --reconnect-timeout the session ends with a clean error."""

from __future__ import annotations

import csv
import threading
import time
from datetime import datetime
from pathlib import Path

import psycopg
import pytest

from slidewin.client.sim.config import ClientConfig
from slidewin.client.sim.session import ClientSession
from slidewin.db.errors import DatabaseUnavailable
from slidewin.db.events import Event, insert_events
from tests.invariants import assert_rollups_exact
from tests.restartable_pg import RestartablePostgres


class Capture:
    """The display: lines and reports in the order they came."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def line(self, text: str) -> None:
        self.seen.append(("line", text))

    def report(self, lines: list[str]) -> None:
        self.seen.append(("report", lines[0]))

    def close(self) -> None:
        pass

    def lines(self, prefix: str) -> list[int]:
        return [i for i, (kind, text) in enumerate(self.seen)
                if kind == "line" and text.startswith(prefix)]


def load_files(dsn: str, landing: Path, stop: threading.Event) -> None:
    """The ingest's stand-in: each CSV file in one transaction with its batch marker; it too
    waits out the restart (a file whose transaction failed is loaded again)."""
    batch_id = 0
    while not stop.is_set():
        try:
            with psycopg.connect(dsn, connect_timeout=2) as conn:
                while not stop.wait(0.05):
                    for path in sorted(landing.glob("*.csv")):
                        with open(path) as fh:
                            rows = [Event(r["uuid"], int(r["val"]), datetime.fromisoformat(r["ts"]))
                                    for r in csv.DictReader(fh)]
                        accepted = insert_events(conn, rows, 4)
                        conn.execute(
                            "INSERT INTO slidewin.ingest_batches (query_id, batch_id, rows_in,"
                            " accepted) VALUES ('loader', %s, %s, %s)",
                            (batch_id, len(rows), accepted))
                        conn.commit()
                        path.unlink()
                        batch_id += 1
        except psycopg.OperationalError:
            stop.wait(0.2)



@pytest.fixture
def dsn(own_server: RestartablePostgres) -> str:
    return own_server.store(4)


def config_for(tmp_path: Path, **kw: float) -> ClientConfig:
    landing = tmp_path / "landing"
    landing.mkdir()
    base = {"displayinterval": 0.5, "duration": 9, "warmup": 1, "ratelimit": 1000,
            "historyseconds": 30, "deleteyieldtime_ms": 50, "seed": 7}
    return ClientConfig(landing=landing, **{**base, **kw})


@pytest.mark.slow
@pytest.mark.parametrize(
    "duration",
    [
        9,  # events keep coming after the restart
        # the generator ends during the outage: the files written meanwhile are loaded as soon
        # as the server is back, before the client's threads reconnect, so no later insert
        # signals them -- the freshness poller must look once when it reconnects
        4,
    ],
)
def test_client_session_survives_a_restart(own_server, dsn, tmp_path, duration):
    config = config_for(tmp_path, reconnect_timeout=60, duration=duration)
    loader_stop = threading.Event()
    loader = threading.Thread(target=load_files, args=(dsn, config.landing, loader_stop))
    loader.start()
    restarter = threading.Timer(3.0, own_server.restart, kwargs={"down_s": 2.0})
    display = Capture()
    try:
        restarter.start()
        summary = ClientSession(config, dsn, display, drain_s=15).run(threading.Event())
    finally:
        restarter.join()
        loader_stop.set()
        loader.join(timeout=30)

    lost, back = display.lines("database lost ("), display.lines("database back after ")
    assert len(lost) == 1 and len(back) == 1, display.seen  # once, not once per thread
    assert lost[0] < back[0]
    assert display.lines("database connection lost") == []
    reports_after = [i for i, (kind, _t) in enumerate(display.seen) if kind == "report"
                     and i > back[0]]
    assert len(reports_after) >= (3 if duration > 6 else 1)  # the reporter carried on
    assert summary.failures > 0  # the queries that met the outage are counted, not hidden
    assert summary.ingested == summary.written  # every event counted after the restart too
    assert summary.pending_events == 0, summary.last_failure  # freshness caught up too
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert_rollups_exact(conn)


@pytest.mark.slow
def test_client_session_gives_up_after_the_reconnect_timeout(own_server, dsn, tmp_path):
    config = config_for(tmp_path, reconnect_timeout=1, duration=60)
    display = Capture()
    stopper = threading.Timer(1.5, own_server.stop)
    stopper.start()
    started = time.monotonic()
    try:
        with pytest.raises(DatabaseUnavailable, match="--reconnect-timeout"):
            ClientSession(config, dsn, display, drain_s=1).run(threading.Event())
    finally:
        stopper.join()
    assert time.monotonic() - started < 20  # not the 60 s of --duration
    assert len(display.lines("database lost (")) == 1


def test_demo_passes_the_timeout_to_the_ingest_and_the_scheduler(tmp_path):
    from slidewin.client.cli.demo import ingest_launch, reconnect_args

    config = ClientConfig(landing=tmp_path, reconnect_timeout=90)
    argv = ingest_launch("dbname=x", tmp_path, config, tmp_path, "1s").argv
    assert argv[argv.index("--reconnect-timeout") + 1] == "90s"
    # the side streams' interval: --trigger unless the demo gives another
    assert argv[argv.index("--streams-trigger") + 1] == "1s"
    argv = ingest_launch("dbname=x", tmp_path, config, tmp_path, "0.25s", "1s").argv
    assert argv[argv.index("--streams-trigger") + 1] == "1s"
    assert reconnect_args(config) == ["--reconnect-timeout", "90s"]


def test_client_config_refuses_a_negative_timeout(tmp_path):
    from slidewin.db.errors import ConfigError

    with pytest.raises(ConfigError, match="--reconnect-timeout -1 must be >= 0"):
        ClientConfig(landing=tmp_path, reconnect_timeout=-1)
