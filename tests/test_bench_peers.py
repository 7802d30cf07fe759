"""``slidewin bench peers``: the generated events' per-second answer against a brute force, the
peer's writes (exactly once by batch id) and the comparison with slidewin's rollups (which must
see a second removed, changed or a raw row missing), and a tiny run of the whole benchmark
reporting every figure with results_match true."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import psycopg
import pyarrow as pa
import pytest
from click.testing import CliRunner
from psycopg import sql

from slidewin.client.bench import peers as bench
from slidewin.client.bench.ingest import make_events
from slidewin.client.cli import cli
from slidewin.db.events import Event, insert_events
from slidewin.db.scratch import scratch_database
from tests.conftest import T0

KEYS = ["events", "runs", "format", "master", "slidewin_events_per_s", "peer_events_per_s",
        "speedup_vs_plain_spark", "seconds_per_run", "results_match", "matches_generator",
        "slidewin_seconds", "peer_seconds", "batches", "max_files_per_trigger", "warmup_seconds",
        "slidewin_rows", "peer_rows", "notes"]


def brute_force(events: pa.Table) -> bench.Seconds:
    vals: dict[datetime, list[int]] = defaultdict(list)
    for row in events.to_pylist():
        vals[row["ts"].replace(microsecond=0)].append(row["val"])
    return {sec: (len(v), sum(v), min(v), max(v)) for sec, v in vals.items()}


def test_the_generated_seconds_are_a_brute_force():
    events = make_events(2_500, T0, 1_000, seed=5)
    seconds = bench.generated_seconds(events)
    assert seconds == brute_force(events) and len(seconds) == 4  # 2.5 s ending on a second
    assert sum(n for n, *_ in seconds.values()) == 2_500


def _peer_batch(conn: psycopg.Connection, batch_id: int, events: pa.Table) -> bool:
    """What the peer's foreachBatch does with a batch, with the aggregates from Arrow."""
    with conn.transaction():
        if not bench.claim(conn, batch_id):
            return False
        seconds = [(sec, *agg) for sec, agg in bench.generated_seconds(events).items()]
        bench.write_peer_batch(conn, events, seconds)
    return True


def test_the_comparison_sees_a_second_removed_or_changed_and_a_row_missing(
        conn: psycopg.Connection, pg_admin_dsn: str):
    events = make_events(3_000, T0, 1_000, seed=6)
    insert_events(conn, [Event(r["uuid"], r["val"], r["ts"]) for r in events.to_pylist()], 8)
    ours = bench.slidewin_seconds(conn)
    ours_rows = bench.count_rows(conn, sql.Identifier("slidewin", "events"))
    assert ours == bench.generated_seconds(events) and ours_rows == 3_000

    with scratch_database(pg_admin_dsn) as target, \
            psycopg.connect(target, autocommit=True) as peer:
        bench.create_peer_tables(peer)
        # two batches splitting one second between them: the upsert merges it
        assert _peer_batch(peer, 0, events.slice(0, 1_500))
        assert _peer_batch(peer, 1, events.slice(1_500))
        assert not _peer_batch(peer, 1, events.slice(1_500))  # replayed: skipped
        rows = bench.count_rows(peer, sql.Identifier(bench.RAW))

        def check() -> dict:
            return bench.compare(ours, bench.peer_seconds(peer), ours_rows,
                                 bench.count_rows(peer, sql.Identifier(bench.RAW)))

        whole = check()
        assert whole["match"] and rows == 3_000
        assert whole["missing"] == whole["extra"] == whole["differ"] == 0

        table = sql.Identifier(bench.SECONDS)
        peer.execute(sql.SQL("UPDATE {} SET vmax = vmax + 1 WHERE sec = %s").format(table),
                     (T0 - timedelta(seconds=1),))
        changed = check()
        assert not changed["match"] and changed["differ"] == 1 and changed["missing"] == 0
        peer.execute(sql.SQL("DELETE FROM {} WHERE sec = %s").format(table),
                     (T0 - timedelta(seconds=1),))
        removed = check()
        assert not removed["match"] and removed["missing"] == 1 and removed["differ"] == 0

        peer.execute(sql.SQL("DELETE FROM {}").format(table))
        for sec, agg in ours.items():
            peer.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s, %s, %s, %s)").format(table),
                         (sec, *agg))
        assert check()["match"]
        peer.execute(sql.SQL("DELETE FROM {} WHERE ctid = (SELECT min(ctid) FROM {})")
                     .format(sql.Identifier(bench.RAW), sql.Identifier(bench.RAW)))
        short = check()
        assert not short["match"] and short["rows"] == 2_999 and short["missing"] == 0


@pytest.mark.slow
@pytest.mark.spark
def test_a_tiny_run_reports_every_figure_and_equal_answers(pg_admin_dsn, tmp_path):
    started = datetime.now(UTC)
    result = CliRunner().invoke(cli, [
        "--dsn", pg_admin_dsn, "-q", "bench", "peers", "--events", "20k", "--rows-per-file",
        "5k", "--runs", "1", "--work-dir", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    assert [k for k in KEYS if doc.get(k) is None] == []
    assert doc["events"] == 20_000 and doc["runs"] == 1 and doc["format"] == "parquet"
    assert doc["master"] == "local[2]" and doc["files"] == 4
    assert doc["results_match"] is True and doc["results_match_runs"] == [True]
    assert doc["matches_generator"] is True
    assert doc["slidewin_rows"] == doc["peer_rows"] == 20_000
    assert doc["seconds_compared"] in (2, 3)  # 2 s of events at 10,000 a second
    assert doc["batches"] == {"slidewin": 1, "peer": 1}  # 4 files, up to 64 per batch
    runs = doc["seconds_per_run"]
    assert len(runs["slidewin"]) == len(runs["peer"]) == 1
    assert doc["speedup_vs_plain_spark"] == pytest.approx(
        runs["peer"][0] / runs["slidewin"][0], rel=0.01)
    assert list(tmp_path.iterdir()) == []  # the generated files are gone
    assert (datetime.now(UTC) - started) < timedelta(minutes=5)


def test_the_wide_streams_seconds_compare_its_measure_on_both_sides(pg_admin_dsn: str):
    """``--stream wide``: slidewin's exact rollups of the wide stream's ``temp`` and the peer's
    floating-point sums of the same rows match; a sum off by more than 1e-9 of itself, or a
    count off by one, does not."""
    from slidewin.client.bench.streams import WIDE, copy_limit_wide, make_wide

    rows = make_wide(3_000, T0, 1_000, seed=8)
    expected = bench.generated_seconds(rows, WIDE)
    assert sum(n for n, *_ in expected.values()) == 3_000
    with scratch_database(pg_admin_dsn, partitions=2) as store, \
            psycopg.connect(store, autocommit=True) as conn:
        WIDE.declare(conn)
        copy_limit_wide(store, rows, 1_000)
        ours = bench.slidewin_seconds(conn, WIDE)
        ours_rows = bench.count_rows(conn, WIDE.table)
        assert bench.compare(expected, ours, 3_000, ours_rows)["match"]
        bench.create_peer_tables(conn, WIDE)
        bench.write_peer_batch(conn, rows, [(sec, *agg) for sec, agg in expected.items()], WIDE)
        theirs = bench.peer_seconds(conn)
        assert bench.compare(ours, theirs, ours_rows,
                             bench.count_rows(conn, sql.Identifier(bench.RAW)))["match"]
    sec = min(ours)
    n, total, vmin, vmax = ours[sec]
    assert not bench.same_second(ours[sec], (n, total * (1 + 1e-7), vmin, vmax))
    assert not bench.same_second(ours[sec], (n + 1, total, vmin, vmax))
    assert bench.same_second(ours[sec], (n, total * (1 + 1e-12), vmin, vmax))


@pytest.mark.slow
@pytest.mark.spark
def test_a_tiny_wide_run_matches_and_names_the_stream(pg_admin_dsn, tmp_path):
    result = CliRunner().invoke(cli, [
        "--dsn", pg_admin_dsn, "-q", "bench", "peers", "--stream", "wide", "--events", "20k",
        "--rows-per-file", "5k", "--runs", "1", "--work-dir", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    assert doc["stream"] == "wide" and doc["files"] == 4
    assert doc["results_match"] is True and doc["matches_generator"] is True
    assert doc["slidewin_rows"] == doc["peer_rows"] == 20_000
    assert list(tmp_path.iterdir()) == []
