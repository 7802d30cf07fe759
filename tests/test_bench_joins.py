"""``slidewin bench joins``: its generated data and counts against a brute force, its comparison
of the stored results with the exact answer (which must see a result removed or added), and a
tiny run of the whole benchmark reporting every figure, with results_match true."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from slidewin.client.bench import joins as bench
from slidewin.client.cli import cli
from tests.conftest import T0

S = timedelta(seconds=1)
KEYS = ["events", "runs", "join_cost_pct", "ingest_seconds_with_join",
        "ingest_seconds_without_join", "results_match", "exact_matches_generator",
        "result_count", "exact_count", "joins_show_1m_ms_p50", "joins_show_1m_ms_p95",
        "joins_show_limit", "result_freshness_p50_s", "result_freshness_p95_s",
        "result_visible_p95_s", "plain_spark_join_seconds", "plain_spark_result_count",
        "plain_spark_results_match", "speedup_vs_plain_spark_join", "right_in_later_file_pct",
        "late_left", "late_right", "dead_letters", "notes"]


def brute_force(left: bench.Side, right: bench.Side, within_us: int) -> dict[str, int]:
    pairs = [(i, j) for i in range(len(left.ts_us)) for j in range(len(right.ts_us))
             if left.key[i] == right.key[j]
             and abs(int(right.ts_us[j] - left.ts_us[i])) <= within_us]
    return {"pairs": len(pairs), "left_only": len(left.ts_us) - len({i for i, _ in pairs}),
            "right_only": len(right.ts_us) - len({j for _, j in pairs})}


def test_the_counts_from_the_generated_records_are_a_brute_force_join():
    left = bench.make_side("o", 400, 30, T0, 20, seed=1)
    right = bench.make_side("s", 400, 30, T0, 20, share=0.3, disorder=5 * S, file_span=S, seed=2)
    expected = bench.expected_counts(left, right, 2 * S, 2 * S)
    assert expected == brute_force(left, right, 2_000_000)
    assert expected["pairs"] > 0 and expected["left_only"] > 0


def test_the_late_shipments_arrive_in_later_files_and_within_the_disorder():
    right = bench.make_side("s", 100_000, 100, T0, 1000, share=0.3, disorder=10 * S,
                            file_span=5 * S, seed=3)
    delay = right.arrival_us - right.ts_us
    assert np.all(np.diff(right.arrival_us) >= 0)  # written in arrival order
    assert 0.28 < np.mean(delay > 0) < 0.32 and delay.max() < 10_000_000
    assert 28 < bench.in_later_file_pct(right.ts_us, 5000) <= 30


def _batch(conn: psycopg.Connection, stream: str, key: str, rows: list[tuple[str, str, datetime]]
           ) -> None:
    """What an ingest batch writes: the rows, the stream's time, the joins' W."""
    with conn.transaction():
        with conn.cursor() as cur:
            cur.executemany(sql.SQL("INSERT INTO {} ({}, customer, ts) VALUES (%s, %s, %s)")
                            .format(sql.Identifier("slidewin_streams", stream),
                                    sql.Identifier(key)), rows)
        conn.execute("SELECT slidewin.ingest_advance(%s, %s, %s, NULL)",
                     (stream, max(r[2] for r in rows), T0))
        conn.execute("SELECT slidewin.joins_advance(%s, %s)", (stream, T0))


def test_the_comparison_sees_a_result_removed_or_added(conn: psycopg.Connection):
    opts = bench.JoinBenchOptions(grace=10 * S)
    bench.declare(conn, opts, join=True, seed_at=T0, now=T0)
    orders = [(f"o{i}", f"c{i % 5}", T0 + i * S) for i in range(1, 40)]
    ships = [(f"s{i}", f"c{i % 7}", T0 + i * S + S / 2) for i in range(1, 40, 4)]
    _batch(conn, bench.LEFT, "order_id", orders[:20])
    _batch(conn, bench.RIGHT, "shipment_id", ships)
    _batch(conn, bench.LEFT, "order_id", orders[20:])
    end = T0 + 100 * S
    _batch(conn, bench.LEFT, "order_id", [("end", "end-l", end)])
    _batch(conn, bench.RIGHT, "shipment_id", [("end", "end-r", end)])
    whole = bench.match(conn, bench.JOIN, T0, end)
    assert whole["results_match"] and whole["missing"] == whole["extra"] == 0
    shape = bench.shape(Counter(bench.joins.results(conn, bench.JOIN)))
    assert shape["pairs"] > 0 and shape["left_only"] > 1 and shape["right_only"] == 0

    table = sql.Identifier("slidewin_joins", bench.JOIN)
    gone = conn.execute(sql.SQL("DELETE FROM {} WHERE seq = (SELECT max(seq) FROM {} "
                                "WHERE r_ts IS NOT NULL) RETURNING l_order_id, r_shipment_id")
                        .format(table, table)).fetchone()
    assert gone is not None
    removed = bench.match(conn, bench.JOIN, T0, end)
    assert not removed["results_match"] and removed["missing"] == 1 and removed["extra"] == 0
    conn.execute(sql.SQL("INSERT INTO {} (ts, l_ts, l_order_id, l_customer, r_ts, r_shipment_id, "
                         "r_customer) VALUES (%s, %s, %s, 'c1', %s, 'nobody', 'c1')")
                 .format(table), (T0 + 2 * S, T0 + S, "o1", T0 + 2 * S))
    added = bench.match(conn, bench.JOIN, T0, end)
    assert not added["results_match"] and added["missing"] == 1 and added["extra"] == 1


@pytest.mark.slow
@pytest.mark.spark
def test_a_tiny_run_reports_every_figure_and_exact_results(pg_admin_dsn, monkeypatch):
    tampered: list[dict[str, Any]] = []

    def remove_one(conn: psycopg.Connection, start: datetime, end: datetime,
                   result: dict[str, Any]) -> None:
        """The same comparison must turn false once one stored pair is deleted."""
        table = sql.Identifier("slidewin_joins", bench.JOIN)
        conn.execute(sql.SQL("DELETE FROM {} WHERE seq = (SELECT min(seq) FROM {} "
                             "WHERE r_ts IS NOT NULL)").format(table, table))
        tampered.append({"before": result, "after": bench.match(conn, bench.JOIN, start, end)})

    original = bench.run_bench
    monkeypatch.setattr(bench, "run_bench", lambda admin, opts, progress: original(
        admin, opts, progress, check=remove_one))
    started = datetime.now(UTC)
    result = CliRunner().invoke(cli, [
        "--dsn", pg_admin_dsn, "-q", "bench", "joins", "--events", "2000", "--keys", "200",
        "--rate", "20", "--rows-per-file", "100", "--max-files-per-trigger", "4", "--runs", "1",
        "--shows", "20", "--freshness-seconds", "3", "--freshness-rate", "50", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    assert [k for k in KEYS if doc.get(k) is None] == []
    assert doc["events"] == 2000 and doc["runs"] == 1 and doc["joins_show_limit"] == 20
    assert doc["results_match"] is True and doc["results_match_runs"] == [True]
    assert doc["exact_matches_generator"] is True
    assert doc["results_missing"] == 0 and doc["results_extra"] == 0
    assert doc["orders_stored"] == doc["shipments_stored"] == 2002 and doc["dead_letters"] == 0
    assert doc["late_left"] == doc["late_right"] == 0 and doc["complete_past_every_record"]
    # the seed order's outer row is the one result the plain Spark peer cannot have
    assert doc["result_count"] == doc["exact_count"] == doc["reference_count"] + 1
    assert doc["exact"]["pairs"] > 0 and doc["exact"]["left_only"] > 0
    assert doc["plain_spark_results_match"] is True
    assert doc["plain_spark_result_count"] == doc["reference_count"]
    assert doc["result_freshness_pairs"] > 0 and doc["result_freshness_p95_s"] > 0
    assert doc["right_in_later_file_pct"] > 10
    [check] = tampered
    assert check["before"]["results_match"] is True
    assert check["after"]["results_match"] is False and check["after"]["missing"] == 1
    assert (datetime.now(UTC) - started) < timedelta(minutes=3)


@pytest.mark.slow
@pytest.mark.spark
def test_a_tiny_wide_run_joins_the_streams_rows_exactly_and_names_it(pg_admin_dsn):
    """``--stream wide``: the wide stream's rows, keyed by the customers, are the left stream,
    joined on its key ``device``, which the shipments hold too; the results are exact, the
    generator's counts and the plain Spark join agree, and the JSON names the stream."""
    result = CliRunner().invoke(cli, [
        "--dsn", pg_admin_dsn, "-q", "bench", "joins", "--stream", "wide", "--events", "2000",
        "--keys", "200", "--rate", "20", "--rows-per-file", "100", "--max-files-per-trigger",
        "4", "--runs", "1", "--shows", "20", "--freshness-seconds", "3", "--freshness-rate",
        "50", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    assert doc["stream"] == "wide" and doc["join"]["on"] == "device"
    assert doc["results_match"] is True and doc["exact_matches_generator"] is True
    assert doc["exact"]["pairs"] > 0 and doc["plain_spark_results_match"] is True
    assert doc["wide_stored"] == doc["shipments_stored"] == 2002 and doc["dead_letters"] == 0
    assert doc["result_freshness_pairs"] > 0


def test_the_left_stream_of_a_benchmark_stream_is_its_rows_keyed_by_the_customers():
    """``--stream events``: the left side is the built-in stream's rows, its uuid the
    customer; the right side holds the customer under the same name (the join's on)."""
    left = bench.left_stream("events")
    assert (left.name, left.id, left.on) == ("events", "uuid", "uuid")
    side = bench.make_side("o", 500, 20, T0, 100, seed=3, left=left)
    assert side.table.column_names == ["uuid", "val", "ts"]
    assert side.table.column("uuid").to_pylist() == list(bench.customer_names(side.key))
    assert len(set(zip(side.table.column("uuid").to_pylist(), side.ts_us.tolist(),
                       strict=True))) == 500
    right = bench.make_side("s", 500, 20, T0, 100, seed=4, left=left)
    assert right.table.column_names == ["shipment_id", "uuid", "weight", "ts"]
    assert bench.left_stream(None) is bench.ORDERS
