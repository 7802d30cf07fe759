"""The simulator for declared streams (``slidewin client --stream NAME``).

- the generator's values fit every column type a stream may declare: a generated batch inserted
  into a declared stream of every type is stored whole, and its files, in every format, parse
  without a dead letter (``ingest.typed``: the ingest's own reader, no Spark);
- the command's refusals are one line, exit 2: an unknown stream, an option only ``events`` has;
- end to end with the real ``slidewin ingest`` (Spark): the client's events of ``sensors`` land
  in ``slidewin_streams.sensors`` and the reports and the summary show its measure.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from slidewin.client.processes import slidewin_argv, slidewin_child, start_child
from slidewin.client.sim.generator import FORMATS
from slidewin.client.sim.typed_generator import (
    TypedEventGenerator,
    TypedGeneratorConfig,
    numeric_bounds,
)
from slidewin.db import streams
from slidewin.db.streams import Column
from slidewin.ingest.typed import Layout, Limits, parse_files
from slidewin.ingest.typed_sink import insert_rows

EVERY_TYPE = [
    Column("key", "text"), Column("ts", "timestamptz"), Column("big", "bigint"),
    Column("i", "integer"), Column("temp", "double precision"), Column("n", "numeric"),
    Column("amount", "numeric(5,2)"), Column("frac", "numeric(3,3)"),
    Column("wide", "numeric(40,38)"), Column("whole", "numeric(4,0)"),
    Column("ok", "boolean"), Column("seen", "timestamptz"), Column("meta", "jsonb"),
    Column("site", "text", required=True),
]
MEASURES = ["big", "i", "temp", "n", "amount", "frac", "wide", "whole"]
N = 400


def every_type(conn, name: str = "every_type", key_type: str = "text") -> streams.Stream:
    columns = [Column("key", key_type), *EVERY_TYPE[1:]]
    return streams.define(conn, name, key="key", time="ts", columns=columns, measures=MEASURES)


def generator(stream, tmp_path, **kw) -> TypedEventGenerator:
    return TypedEventGenerator(TypedGeneratorConfig(tmp_path / "landing", stream, seed=7, **kw))


def insert_python_rows(conn, stream, columns) -> int:
    names = [c.name for c in stream.columns]
    rows = [tuple(Jsonb(v) if isinstance(v, dict) else v for v in row)
            for row in zip(*(columns[n] for n in names), strict=True)]
    query = sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING").format(
        stream.table, sql.SQL(", ").join(map(sql.Identifier, names)),
        sql.SQL(", ").join(sql.Placeholder() * len(names)))
    with conn.cursor() as cur:
        cur.executemany(query, rows)
    return int(conn.execute(sql.SQL("SELECT count(*) FROM {}").format(stream.table))
               .fetchone()[0])


@pytest.mark.parametrize("keys", [0, 25], ids=["fresh-keys", "key-pool"])
@pytest.mark.parametrize("key_type", ["text", "bigint", "integer"])
def test_a_generated_batch_fits_every_column_type(conn, tmp_path, keys, key_type):
    stream = every_type(conn, key_type=key_type)
    gen = generator(stream, tmp_path, keys=keys)
    now = datetime.now(UTC)
    columns = gen.batch(N, now - timedelta(seconds=1), now)

    assert insert_python_rows(conn, stream, columns) == N  # nothing refused, no duplicates
    key_python = str if key_type == "text" else int
    assert all(isinstance(k, key_python) for k in columns["key"])
    assert len(set(columns["key"])) <= (keys or N)
    assert all(-1 < v < 1 for v in columns["frac"] if v is not None)
    assert all(abs(v) < 1000 for v in columns["amount"] if v is not None)
    for measure in MEASURES:  # measures are mostly filled
        assert sum(v is not None for v in columns[measure]) >= 0.9 * N, measure
    assert all(v is not None for v in columns["site"])  # required: never NULL
    stored = conn.execute(sql.SQL("SELECT count(*), count(DISTINCT key), min(ts), max(ts) FROM {}")
                          .format(stream.table)).fetchone()
    assert stored[0] == N and now - timedelta(seconds=1) < stored[2] <= stored[3] <= now


@pytest.mark.parametrize("fmt", FORMATS)
def test_written_files_parse_without_a_dead_letter_in_every_format(conn, tmp_path, fmt):
    stream = every_type(conn)
    gen = generator(stream, tmp_path, fmt=fmt)
    now = datetime.now(UTC)
    batch = gen.write_batch(N, now - timedelta(seconds=1), now)
    assert batch.path.parent == tmp_path / "landing" / "every_type"
    assert not [p for p in batch.path.parent.iterdir() if p.name.startswith(".")]  # renamed
    layout = Layout(stream)
    parsed = parse_files(layout, [(batch.path.name, batch.path.read_bytes())],
                         Limits(now + timedelta(seconds=1)))
    assert parsed.bad == [] and parsed.extra == 0 and len(parsed.rows) == N
    with conn.transaction():  # as the ingest's batch: its staging table drops at commit
        assert insert_rows(conn, stream, layout, parsed.rows) == N
    meta = conn.execute(sql.SQL("SELECT meta FROM {} WHERE meta IS NOT NULL LIMIT 1")
                        .format(stream.table)).fetchone()[0]
    assert set(meta) == {"level", "tag"}  # a small object, in every format
    assert gen.stats.events == N and sum(batch.seconds.values()) == N


def test_numeric_values_fit_their_precision_and_scale():
    assert numeric_bounds("numeric(3,3)") == (999, 3)  # below 1
    assert numeric_bounds("numeric(5,2)") == (99_999, 2)  # below 1,000
    assert numeric_bounds("numeric(4,0)") == (1000, 0)  # at most 1,000
    largest, scale = numeric_bounds("numeric(1000,1000)")  # drawn: 12 digits, all below 1
    assert scale == 12 and Decimal(largest).scaleb(-scale) < 1


def test_double_measures_walk_per_key(conn, tmp_path):
    stream = streams.define(conn, "walk", key="sensor", time="ts",
                            columns=[Column("sensor", "text"), Column("ts", "timestamptz"),
                                     Column("temp", "double precision", required=True)],
                            measures=["temp"])
    gen = generator(stream, tmp_path, keys=3)
    now = datetime.now(UTC)
    by_key: dict[str, list[float]] = {}
    for i in range(3):
        cols = gen.batch(50, now + timedelta(seconds=i), now + timedelta(seconds=i + 1))
        for key, temp in zip(cols["sensor"], cols["temp"], strict=True):
            by_key.setdefault(key, []).append(temp)
    for temps in by_key.values():
        assert 5 < min(temps) and max(temps) < 35  # a temperature
        assert max(abs(a - b) for a, b in zip(temps, temps[1:], strict=False)) < 1.0  # a walk


# -- the command ---------------------------------------------------------------------------


def run_client(dsn: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(slidewin_argv("client", *args), capture_output=True, text=True,
                          timeout=timeout, check=False, env={**os.environ, "SLIDEWIN_DSN": dsn})


@pytest.fixture(scope="module")
def sensors_dsn(make_store) -> str:
    dsn = make_store(2)
    with psycopg.connect(dsn, autocommit=True) as c:
        streams.define(c, "sensors", key="sensor", time="ts",
                       columns=[Column("sensor", "text"), Column("ts", "timestamptz"),
                                Column("temp", "double precision"), Column("site", "text")],
                       measures=["temp"], history=timedelta(hours=1))
    return dsn


def test_an_unknown_stream_is_one_line_exit_2(sensors_dsn, tmp_path):
    done = run_client(sensors_dsn, "--stream", "nope", "--duration", "2", "--warmup", "0",
                      "--landing", str(tmp_path))
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: no stream named 'nope' (slidewin streams list shows the streams; slidewin "
        "streams add declares one)"]
    assert not (tmp_path / "nope").exists()


@pytest.mark.parametrize("option", [["--maxrows", "100"], ["--inline"], ["--deleter", "jobs"],
                                    ["--deletechunksize", "10"]])
def test_an_option_only_events_has_is_refused_naming_it(sensors_dsn, tmp_path, option):
    done = run_client(sensors_dsn, "--stream", "sensors", *option, "--duration", "2",
                      "--warmup", "0", "--landing", str(tmp_path))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {option[0]} applies only to the "
                                                   "built-in stream events"), lines
    assert not (tmp_path / "sensors").exists()


@pytest.mark.slow
@pytest.mark.spark
def test_client_feeds_a_declared_stream_through_the_real_ingest(sensors_dsn, tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    ready = threading.Event()

    def on_line(text: str) -> None:
        if text.startswith("ingest ") and " from " in text:
            ready.set()

    launch = slidewin_child(
        sensors_dsn, "--data-dir", str(tmp_path / "data"), "ingest", "--landing", str(landing),
        "--checkpoint-dir", str(tmp_path / "cp"), "--trigger", "500ms", "--query-id", "t",
        "--processed", "delete")
    child = start_child("ingest", launch.argv, tmp_path / "ingest.log", env=launch.env,
                        on_line=on_line)
    try:
        deadline = time.monotonic() + 600
        while not ready.wait(0.5):
            assert child.alive(), "\n".join(child.tail)
            assert time.monotonic() < deadline, "the ingest did not start"
        done = run_client(sensors_dsn, "--stream", "sensors", "--duration", "10", "--warmup",
                          "1", "--displayinterval", "2", "--ratelimit", "200", "--seed", "5",
                          "--landing", str(landing), "--view", "plain", "--json", timeout=300)
    finally:
        child.stop()
    context = f"stdout:\n{done.stdout}\nstderr:\n{done.stderr[-3000:]}\ningest:\n" + \
        "\n".join(child.tail)
    assert done.returncode == 0, context
    summary = json.loads(done.stdout)
    assert summary["stream"] == "sensors" and summary["written"] > 1000, context
    assert summary["ingested"] == summary["written"] and summary["pending"] == 0, context
    assert summary["rejected"] == 0 and summary["failures"] == 0, context
    temp = summary["measures"]["temp"]
    assert temp["cnt"] >= 0.95 * summary["written"] and 9 < temp["avg"] < 31, temp
    assert "Report: stream sensors" in done.stderr and "temp over the last 3600s: count" \
        in done.stderr, context
    with psycopg.connect(sensors_dsn, autocommit=True) as c:
        stored = c.execute("SELECT count(*), count(DISTINCT sensor) FROM slidewin_streams.sensors"
                           ).fetchone()
    assert stored[0] == summary["written"] and 1 < stored[1] <= 100, stored
