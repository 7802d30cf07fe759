"""Two joinable streams from the simulator (``client.sim.matched``), without a database: orders
at a rate and, for a share of them, a shipment whose order_id is the order's id, a delay later.

The command (against a store, with no ingest: the files are what it writes) refuses what cannot
match in one line before writing anything, and writes both streams with a summary of each.

Time is simulated (a batch of orders every 0.2 s, the clock at the batch's end), so each check
runs on exactly the records a seed gives: the share of orders matched and the delays hold within
a few standard errors, every shipment refers to an order written before it, each order gets at
most one, the late share is written late and behind newer records, the same seed writes the same
files, and the files parse with the ingest's own reader without a dead letter.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import psycopg
import pytest

from slidewin.client.processes import slidewin_argv
from slidewin.client.sim.generator import FORMATS
from slidewin.client.sim.matched import MatchConfig, MatchedStreams, check_match
from slidewin.client.sim.typed_generator import TypedEventGenerator, TypedGeneratorConfig
from slidewin.db import streams
from slidewin.db.errors import ConfigError
from slidewin.db.streams import Column, Stream
from slidewin.ingest.typed import Layout, Limits, parse_files

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
STEP = timedelta(milliseconds=200)


def orders(key_type: str = "bigint") -> Stream:
    return Stream("orders", "id", "ts", (Column("id", key_type), Column("ts", "timestamptz"),
                                         Column("amount", "numeric(10,2)"),
                                         Column("customer", "text")), ("amount",))


def shipments(order_id_type: str = "bigint") -> Stream:
    return Stream("shipments", "id", "ts", (Column("id", "bigint"), Column("ts", "timestamptz"),
                                            Column("order_id", order_id_type, True),
                                            Column("carrier", "text")), ())


class FakeClock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def simulate(tmp_path: Path, *, batches: int = 300, per_batch: int = 20, seed: int = 11,
             fmt: str = "jsonl", left: Stream | None = None, right: Stream | None = None,
             **match: float) -> tuple[MatchedStreams, dict[tuple[str, object], datetime]]:
    """``batches`` batches of orders, one every 0.2 s; the keys written and when."""
    clock = FakeClock()
    written: dict[tuple[str, object], datetime] = {}

    def on_written(stream: str, keys: list, at: datetime) -> None:
        for key in keys:
            written[(stream, key)] = at

    gen = TypedEventGenerator(TypedGeneratorConfig(tmp_path, left or orders(), seed=seed,
                                                   fmt=fmt, keys=0), clock=clock)
    pair = MatchedStreams(gen, right or shipments(), MatchConfig("shipments", "order_id",
                                                                 **match),
                          on_written=on_written)
    for i in range(batches):
        start, clock.now = T0 + i * STEP, T0 + (i + 1) * STEP
        pair.write_batch(per_batch, start, clock.now)
    return pair, written


def read_jsonl(folder: Path) -> list[dict]:
    """Every record of a stream's folder, files in the order written."""
    out = []
    for path in sorted(folder.glob("*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines()]
    return out


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_match_rate_and_delays_hold_on_a_seed(tmp_path):
    pair, _ = simulate(tmp_path, rate=0.8, delay_s=5.0, jitter_s=2.0)
    placed = read_jsonl(tmp_path / "orders")
    shipped = read_jsonl(tmp_path / "shipments")
    assert len(placed) == 6000 and pair.stats.left == 6000

    by_id = {o["id"]: when(o["ts"]) for o in placed}
    assert len(by_id) == len(placed)  # each order its own id
    assert all(s["order_id"] in by_id for s in shipped)  # every shipment's order exists
    assert len({s["order_id"] for s in shipped}) == len(shipped)  # at most one per order
    assert len({s["id"] for s in shipped}) == len(shipped)

    # the share: over the orders whose shipment is surely due by the end (delay + jitter)
    end = T0 + 300 * STEP
    settled = {i for i, t in by_id.items() if t <= end - timedelta(seconds=7)}
    matched = sum(1 for s in shipped if s["order_id"] in settled) / len(settled)
    assert abs(matched - 0.8) < 0.03, matched  # binomial sd 0.005 at n = 5650
    assert pair.stats.pending == pair.stats.chosen - len(shipped) > 0  # the last ones not due

    delays = np.array([(when(s["ts"]) - by_id[s["order_id"]]).total_seconds() for s in shipped])
    assert delays.min() >= 3.0 and delays.max() <= 7.0
    assert abs(delays.mean() - 5.0) < 0.1, delays.mean()  # uniform [3, 7]: se 0.017
    quartiles = np.percentile(delays, [25, 50, 75])
    assert np.allclose(quartiles, [4.0, 5.0, 6.0], atol=0.15), quartiles


def test_shipments_are_written_when_due_and_the_late_share_behind_newer_ones(tmp_path):
    pair, written = simulate(tmp_path, rate=0.8, delay_s=2.0, jitter_s=1.0, late_rate=0.1,
                             late_by_s=10.0)
    shipped = read_jsonl(tmp_path / "shipments")
    placed = {o["id"]: o for o in read_jsonl(tmp_path / "orders")}
    lag = {s["id"]: (written[("shipments", s["id"])] - when(s["ts"])).total_seconds()
           for s in shipped}
    late = [i for i, seconds in lag.items() if seconds >= 10.0]
    assert all(0 <= seconds <= 0.2 or 10.0 <= seconds <= 10.2 for seconds in lag.values())
    assert abs(len(late) / len(shipped) - 0.1) < 0.025, len(late) / len(shipped)
    assert pair.stats.late == len(late)
    # a shipment is written after its order
    assert all(written[("shipments", s["id"])] >= written[("orders", s["order_id"])]
               and s["ts"] >= placed[s["order_id"]]["ts"] for s in shipped)
    # out of order: each late one comes after shipments newer than itself
    newest, behind = T0, 0
    for s in shipped:
        ts = when(s["ts"])
        behind += ts < newest
        newest = max(newest, ts)
    assert behind >= 0.9 * len(late), (behind, len(late))


def test_the_same_seed_writes_the_same_records(tmp_path):
    def contents(folder: Path, seed: int) -> list[str]:
        simulate(folder, batches=50, seed=seed, rate=0.5, jitter_s=1.0, late_rate=0.2)
        return [p.read_text() for stream in ("orders", "shipments")
                for p in sorted((folder / stream).iterdir())]

    first = contents(tmp_path / "a", 3)
    assert first == contents(tmp_path / "b", 3)
    assert first != contents(tmp_path / "c", 4)


def test_text_keys_are_referred_to_as_they_are(tmp_path):
    simulate(tmp_path, batches=20, left=orders("text"), right=shipments("text"), rate=1.0,
             delay_s=0.0)
    ids = {o["id"] for o in read_jsonl(tmp_path / "orders")}
    shipped = read_jsonl(tmp_path / "shipments")
    assert len(shipped) == len(ids) == 400 and {s["order_id"] for s in shipped} == ids


@pytest.mark.parametrize("fmt", FORMATS)
def test_both_streams_parse_without_a_dead_letter(tmp_path, fmt):
    pair, _ = simulate(tmp_path, batches=60, fmt=fmt, delay_s=1.0)
    for stream, count in ((orders(), pair.stats.left), (shipments(), pair.stats.written)):
        files = [(p.name, p.read_bytes()) for p in sorted((tmp_path / stream.name).iterdir())]
        parsed = parse_files(Layout(stream), files, Limits(T0 + timedelta(minutes=1)))
        rows = len(parsed.rows) + sum(t.num_rows for t in parsed.tables)  # Parquet: Arrow
        assert parsed.bad == [] and rows == count > 0, stream.name


@pytest.mark.parametrize(("right", "column", "says"), [
    (shipments(), "nope", "stream shipments has no column nope; its columns are id, ts, "
                          "order_id, carrier"),
    (shipments(), "ts", "ts is the time column of shipments"),
    (shipments("text"), "order_id", "shipments.order_id is text but the key orders.id it "
                                    "refers to is bigint"),
    (orders(), "id", "the matched stream is --stream itself"),
])
def test_a_right_stream_that_cannot_refer_to_orders_is_refused(right, column, says):
    match = MatchConfig(right.name, column)
    with pytest.raises(ConfigError, match="^--match ") as refused:
        check_match(orders(), right, match)
    assert says in str(refused.value)


def test_integer_and_bigint_keys_refer_to_each_other():
    check_match(orders("integer"), shipments("bigint"), MatchConfig("shipments", "order_id"))


@pytest.mark.parametrize(("text", "kw", "says"), [
    ("shipments", {}, "write STREAM.COLUMN"),
    ("shipments.order_id", {"rate": 1.5}, "--match-rate 1.5 must be from 0 to 1"),
    ("shipments.order_id", {"late_rate": -0.1}, "--late-rate -0.1 must be from 0 to 1"),
    ("shipments.order_id", {"delay_s": -1.0}, "--delay -1s must be from 0 to 1 day"),
    ("shipments.order_id", {"late_by_s": 0.0}, "--late-by 0s must be more than 0"),
])
def test_match_options_are_checked_naming_the_option(text, kw, says):
    with pytest.raises(ConfigError) as refused:
        MatchConfig.parse(text, **kw)
    assert says in str(refused.value)


# -- the command, against a store (no ingest: the files are what it writes) ----------------


def run_client(dsn: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(slidewin_argv("client", *args), capture_output=True, text=True,
                          timeout=timeout, check=False, env={**os.environ, "SLIDEWIN_DSN": dsn})


@pytest.fixture(scope="module")
def orders_dsn(make_store) -> str:
    dsn = make_store(2)
    with psycopg.connect(dsn, autocommit=True) as c:
        for stream in (orders(), shipments()):
            streams.define(c, stream.name, key=stream.key, time=stream.time,
                           columns=stream.columns, measures=stream.measures,
                           history=timedelta(hours=1))
    return dsn


@pytest.mark.parametrize(("args", "says"), [
    (["--stream", "orders", "--delay", "2s"], "error: --delay applies only with --match "
                                              "STREAM.COLUMN"),
    (["--match", "shipments.order_id"], "error: --match needs --stream NAME, a declared stream"),
    (["--stream", "orders", "--match", "shipments.carrier"],
     "error: --match shipments.carrier: shipments.carrier is text but the key orders.id it "
     "refers to is bigint"),
    (["--stream", "orders", "--match", "nope.order_id"], "error: no stream named 'nope'"),
])
def test_match_refusals_are_one_line_exit_2_before_anything_is_written(orders_dsn, tmp_path,
                                                                       args, says):
    done = run_client(orders_dsn, *args, "--duration", "2", "--warmup", "0", "--landing",
                      str(tmp_path))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(says), lines
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_client_writes_orders_and_their_shipments(orders_dsn, tmp_path):
    done = run_client(orders_dsn, "--stream", "orders", "--match", "shipments.order_id",
                      "--match-rate", "0.5", "--delay", "0.5s", "--duration", "3", "--warmup",
                      "0", "--ratelimit", "200", "--seed", "2", "--landing", str(tmp_path),
                      "--displayinterval", "1", "--format", "jsonl", "--view", "plain", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    match = summary["match"]
    assert summary["stream"] == "orders" and summary["written"] == match["left"] > 400, summary
    assert match["stream"] == "shipments" and match["column"] == "order_id", match
    assert abs(match["chosen"] / match["left"] - 0.5) < 0.1, match
    assert summary["streams"]["shipments"]["written"] == match["written"] > 0, summary
    ids = {o["id"] for o in read_jsonl(tmp_path / "orders")}
    shipped = read_jsonl(tmp_path / "shipments")
    assert len(ids) == match["left"] and len(shipped) == match["written"]
    assert {s["order_id"] for s in shipped} <= ids
    assert "Report: stream orders" in done.stderr and "  Stream shipments:" in done.stderr
    assert "Matches: " in done.stderr and "Final summary: stream shipments" in done.stderr
