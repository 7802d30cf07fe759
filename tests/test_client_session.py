"""A whole client session against a real store, with a small loader standing in for the Spark
ingest (the end-to-end run with the real ingest is tests/test_demo.py): reports appear, the max
tracker prints, freshness is measured, the client's deleter keeps the history bound, and every
count adds up.
"""

from __future__ import annotations

import csv
import threading
from datetime import datetime
from pathlib import Path

import psycopg
import pytest

from slidewin.client.sim.config import ClientConfig
from slidewin.client.sim.session import ClientSession
from slidewin.db.events import Event, insert_events
from tests.invariants import assert_rollups_exact


class Capture:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.reports: list[list[str]] = []

    def line(self, text: str) -> None:
        self.lines.append(text)

    def report(self, lines: list[str]) -> None:
        self.reports.append(lines)

    def close(self) -> None:
        pass


def loader(dsn: str, landing: Path, stop: threading.Event) -> None:
    """Load each landed CSV file in one transaction with its batch marker, like the ingest."""
    batch_id = 0
    with psycopg.connect(dsn) as conn:
        while not stop.wait(0.05):
            for path in sorted(p for p in landing.glob("*.csv")):
                with open(path) as fh:
                    rows = [Event(r["uuid"], int(r["val"]), datetime.fromisoformat(r["ts"]))
                            for r in csv.DictReader(fh)]
                accepted = insert_events(conn, rows, 4)
                conn.execute(
                    "INSERT INTO slidewin.ingest_batches (query_id, batch_id, rows_in, accepted)"
                    " VALUES ('loader', %s, %s, %s)", (batch_id, len(rows), accepted))
                conn.commit()
                path.unlink()
                batch_id += 1


@pytest.mark.slow
def test_session_reports_tracks_and_keeps_the_history(make_store, tmp_path):
    dsn = make_store(4)
    config = ClientConfig(landing=tmp_path / "landing", displayinterval=1, duration=4,
                          warmup=1, ratelimit=2000, historyseconds=2, deletechunksize=200,
                          deleteyieldtime_ms=50, seed=11)
    stop, loader_stop = threading.Event(), threading.Event()
    config.landing.mkdir()
    thread = threading.Thread(target=loader, args=(dsn, config.landing, loader_stop))
    thread.start()
    display = Capture()
    try:
        summary = ClientSession(config, dsn, display, drain_s=10).run(stop)
    finally:
        loader_stop.set()
        thread.join(timeout=30)

    assert len(display.reports) >= 3
    assert all(r[0].endswith("Report:") for r in display.reports)
    assert display.lines[0].startswith("The initial maximum value for the dataset")
    assert summary.written > 4000 and summary.failures == 0, summary.last_failure
    assert summary.ingested == summary.written  # every event landed (drained before the end)
    assert summary.pending_events == 0 and summary.freshness.events > 0
    assert summary.freshness.p95_ms is not None and summary.freshness.p95_ms > 0
    assert summary.deleted > 0
    assert summary.retained == summary.ingested - summary.deleted
    # the history bound (2 s) holds within one round, one yield and the drain's last second
    assert max(p.oldest_age_s or 0 for p in summary.partitions) < 2 + 1.5
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert_rollups_exact(conn)
        row = conn.execute(
            "SELECT history_s, max_rows, chunk, yield_ms FROM slidewin.retention_settings"
            " WHERE name = 'default'").fetchone()
    assert row == (2.0, None, 200, 50)
