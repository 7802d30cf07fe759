"""End to end: ``slidewin demo --duration 20`` with the real Spark ingest and the real scheduler.

Asserts that reports appear and the max tracker prints, that the rollups are exact at the end,
that the retention bounds hold (within one chunk per partition and one round of lag), that the
join demo pairs orders and shipments live (each shipment written pairs once or is late) with its
result freshness in the JSON, that everything the demo made is gone at the end, and that no
process the demo started -- python children, the JVM, anything in their groups -- is left.
With --keep-demo-join the join and its streams stay (and a later demo that finds them leaves
them): checked on runs stopped by SIGTERM while Spark starts, which end as a full run does.
Needs Java 17+ (marked ``spark``) and takes a couple of minutes (``slow``); CI runs it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading

import psycopg
import pytest

from slidewin.client.cli.demo_join import JOIN_NAME, ORDERS, SHIPMENTS
from slidewin.client.processes import slidewin_argv
from tests.invariants import assert_rollups_exact
from tests.process_watch import ProcessWatch
from tests.waiting import wait_until

PASSWORD = "Demo-pw-7731"
HISTORY_S = 6
MAX_ROWS = 20_000
RATE = 2000
CHUNK = 100
PARTITIONS = 8


def _with_password(dsn: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    return make_conninfo(**{**conninfo_to_dict(dsn), "password": PASSWORD})


@pytest.mark.slow
@pytest.mark.spark
def test_demo_runs_everything_and_leaves_nothing_behind(make_store, tmp_path):
    # a password in the DSN (the test servers trust local connections, so any is accepted):
    # it must reach every child without showing on any command line
    dsn = _with_password(make_store(PARTITIONS))
    argv = slidewin_argv(
        "--data-dir", str(tmp_path), "demo", "--duration", "20", "--warmup", "3",
        "--displayinterval", "4", "--ratelimit", str(RATE), "--historyseconds", str(HISTORY_S),
        "--maxrows", str(MAX_ROWS), "--deletechunksize", str(CHUNK), "--seed", "1",
        "--view", "plain", "--json",
    )
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "SLIDEWIN_DSN": dsn})
    watch = ProcessWatch(proc.pid)
    try:
        out, err = proc.communicate(timeout=900)
    finally:
        watch.stop()
        if proc.poll() is None:
            proc.kill()
    seen, command_lines = watch.seen, watch.command_lines
    assert proc.returncode == 0, f"stdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}"

    # what the user sees: with --json, stdout is the summary's JSON object alone and the
    # reports, the max tracker and the summary's text are on stderr
    context = f"stdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}"
    assert err.count("Report:") >= 3, context
    assert "Final summary" in err and "Rows retained" in err
    assert len(out.strip().splitlines()) == 1, context
    summary = json.loads(out)
    # the max tracker reads the last HISTORY_S seconds of wall-clock time: it has a value to
    # print once events arrive fresher than that (on a machine whose Spark is slow to warm up,
    # the 20 s run can end before they do; the summary's freshness says which it was)
    fresh_ms = summary["freshness"]["p50_ms"]
    if fresh_ms is not None and fresh_ms < HISTORY_S * 1000:
        assert "The initial maximum value for the dataset has been set to" in err, context
    assert summary["written"] > 10 * RATE and summary["failures"] == 0, summary
    assert summary["ingested"] > 0 and summary["freshness"]["events"] > 0, context

    # retention bounds, measured by the summary while the scheduler still ran
    parts = summary["partitions"]
    assert len(parts) == PARTITIONS
    assert max(p["oldest_age_s"] or 0 for p in parts) <= HISTORY_S + 2.0, parts
    lag_rows = RATE * 2 + CHUNK * PARTITIONS  # one ingest batch and one round of lag
    assert summary["retained"] <= MAX_ROWS + lag_rows, summary

    with psycopg.connect(dsn, autocommit=True) as conn:
        assert_rollups_exact(conn)
        # the session window the demo registered does not outlive it: a later ingest of the
        # same store keeps no sessions it did not ask for
        left = conn.execute("SELECT count(*) FROM slidewin.session_defs WHERE dropped_at IS NULL")
        assert left.fetchone() == (0,)
    assert "session window demo_sessions removed (the demo added it" in err, context

    # two streams side by side: each report ends with the declared demo stream's line, the
    # summary carries its totals, and the stream the demo declared is dropped at the end
    assert err.count("  Stream demo_sensors:") >= 3 and "temp over the last 6s" in err, context
    side = summary["streams"]["demo_sensors"]
    assert side["written"] > 0 and side["ingested"] > 0 and side["failures"] == 0, side
    assert "stream demo_sensors dropped (the demo declared it" in err, context
    # the join beside them: each report has its line, the summary its newest pairs, the JSON
    # its figures; every shipment written paired with its order once, or was late for the join
    assert err.count(f"  Join {JOIN_NAME}: pairs ") >= 3, context
    assert err.count("    result freshness p50/p95 ") >= 3, context
    assert f"Final summary: join {JOIN_NAME}" in err and "  Newest pairs:" in err, context
    join = summary["joins"][JOIN_NAME]
    assert join["pairs"] > 0 and join["failures"] == 0, join
    assert join["pairs"] + join["late_right"] == join["right_written"], join
    assert join["right_written"] < join["left_written"] and join["late_left"] == 0, join
    assert 0 < join["result_freshness_p50_s"] <= join["result_freshness_p95_s"] < 30, join
    assert join["result_freshness_pairs"] > 0 and len(join["newest"]) > 0, join
    for made in (f"join {JOIN_NAME}", f"stream {ORDERS}", f"stream {SHIPMENTS}"):
        assert f"{made} dropped (the demo" in err, context
    with psycopg.connect(dsn, autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM slidewin.streams WHERE NOT builtin")
        assert left.fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM slidewin.joins").fetchone() == (0,)
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = "
                              "'slidewin_joins'").fetchone()
        assert tables == (0,)

    # no child showed the password to `ps`: the ingest, the scheduler, the JVM, anything
    started = " | ".join(command_lines.values())
    assert " ingest " in started and " jobs run" in started and "java" in started, started
    leaked = [line for line in command_lines.values() if PASSWORD in line]
    assert not leaked, leaked

    # nothing left behind: every process seen under the demo is gone
    assert seen, "the demo started no child process?"
    assert watch.still_running() == [], "processes left behind"
    assert not any((tmp_path / "demo").glob("*/landing")), "landing dir left behind"


def _demo_stopped_while_spark_starts(dsn: str, tmp_path, *args: str) -> str:
    """Run the demo, SIGTERM it while Spark starts (the demo then stops what it started and
    leaves what it made as a full run does, in seconds), and return its stderr."""
    argv = slidewin_argv("--data-dir", str(tmp_path), "demo", "--duration", "60", "--keys", "0",
                         "--demo-stream-rate", "0", "--view", "plain", *args)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "SLIDEWIN_DSN": dsn})
    watch = ProcessWatch(proc.pid)
    lines: list[str] = []  # stderr, read by this thread alone

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        def ingest_starting() -> bool:
            assert proc.poll() is None, "".join(lines)
            return any("starting the Spark ingest" in line for line in lines)

        wait_until(ingest_starting, 120, what="the demo to start its ingest")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=180)
        reader.join(timeout=30)
    finally:
        watch.stop()
        if proc.poll() is None:
            proc.kill()
    err = "".join(lines)
    assert proc.returncode == 143, err[-3000:]
    assert watch.still_running() == [], "processes left behind"
    return err


def _join_and_streams(dsn: str) -> tuple[list[str], list[str]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute("SELECT name FROM slidewin.joins ORDER BY name").fetchall()
        declared = conn.execute("SELECT name FROM slidewin.streams WHERE NOT builtin "
                                "ORDER BY name").fetchall()
    return [r[0] for r in found], [r[0] for r in declared]


@pytest.mark.slow
@pytest.mark.spark
def test_keep_demo_join_keeps_the_join_and_a_later_demo_leaves_what_it_found(make_store,
                                                                            tmp_path):
    dsn = make_store(2)
    err = _demo_stopped_while_spark_starts(dsn, tmp_path, "--keep-demo-join")
    assert (f"join {JOIN_NAME} (made: stream {ORDERS}, stream {SHIPMENTS}, join {JOIN_NAME})"
            in err), err
    assert f"join {JOIN_NAME}, stream {ORDERS}, stream {SHIPMENTS} stay: " in err, err
    assert "dropped" not in err, err
    assert _join_and_streams(dsn) == ([JOIN_NAME], [ORDERS, SHIPMENTS])

    # the next demo finds them: they are not its own, so they stay without --keep-demo-join
    err = _demo_stopped_while_spark_starts(dsn, tmp_path)
    assert f"join {JOIN_NAME} (found)" in err and "dropped" not in err, err
    assert _join_and_streams(dsn) == ([JOIN_NAME], [ORDERS, SHIPMENTS])


@pytest.mark.slow
@pytest.mark.spark
def test_join_rate_0_runs_no_join_and_declares_nothing(make_store, tmp_path):
    dsn = make_store(2)
    err = _demo_stopped_while_spark_starts(dsn, tmp_path, "--join-rate", "0")
    assert JOIN_NAME not in err, err
    assert _join_and_streams(dsn) == ([], [])
