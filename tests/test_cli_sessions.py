"""``slidewin windows add session | list | sessions | remove | expire`` through click's CliRunner,
the session follower's two emit policies, and ``--follow`` as a process, against a real store.

    a: [0 .. 4]        [18 .. 20]       gap 10 s, grace 10 s
                  12  <- bridges them (within grace of 20): update prints the tombstone of
                         [18 .. 20], then [0 .. 20]
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from slidewin.client.cli import cli
from slidewin.db import session_follow, sessions, streams
from slidewin.db.streams import Column
from tests import store_fixtures
from tests.store_fixtures import at, put
from tests.test_windows_follow import Lines

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn
SLIDEWIN = str(Path(sys.executable).parent / "slidewin")


@pytest.fixture
def store(sconn, small_store_dsn, monkeypatch):
    monkeypatch.setenv("SLIDEWIN_DSN", small_store_dsn)
    return sconn


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["windows", *args])


def last_json(result: Result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_add_list_read_and_remove(store):
    added = last_json(run("add", "session", "visits", "--gap", "10s", "--grace", "5s", "--json"))
    assert (added["name"], added["gap_s"], added["grace_s"], added["retention_s"]) == (
        "visits", 10, 5, 3600)
    put(store, [("a", 1, at(0)), ("a", 2, at(4)), ("b", 7, at(1))])
    listed = last_json(run("list", "--json"))["sessions"]
    assert [(d["name"], d["open"], d["longest_s"]) for d in listed] == [("visits", 2, 4.0)]
    doc = last_json(run("sessions", "--key", "a", "--json"))  # NAME: the only definition
    assert [(s["key"], s["n"], s["sum"], s["length_s"]) for s in doc["sessions"]] == [
        ("a", 2, 3, 4.0)]
    text = run("sessions", "visits")
    assert text.exit_code == 0 and "2 sessions" in text.output and "open" in text.output
    assert "longest 4.0 s (key a)" in run("list").output
    assert run("remove", "visits").exit_code == 0
    assert "no window definitions" in run("list").output
    gone = last_json(run("expire", "--chunk", "1", "--json"))
    assert gone == {"deleted": 1, "chunk": 1}


def test_a_declared_streams_session_window_from_add_to_streams_drop(store):
    streams.define(store, "pings", key="host", time="at", columns=[Column("host", "text")])
    added = last_json(run("add", "session", "p", "--gap", "10s", "--stream", "pings", "--json"))
    assert (added["stream"], added["measure"]) == ("pings", None)
    store.execute("INSERT INTO slidewin_streams.pings (host, at) VALUES ('h', %s), ('h', %s)",
                  (at(0), at(3)))
    listed = run("list")
    assert "session p: stream pings, no measure (counts events)" in listed.output
    doc = last_json(run("sessions", "p", "--json"))
    assert [(s["key"], s["n"], s["sum"], s["avg"]) for s in doc["sessions"]] == [
        ("h", 2, None, None)]
    line = [x for x in run("sessions", "p").output.splitlines() if x.startswith("h ")]
    assert len(line) == 1 and line[0].split()[-5:] == ["-", "-", "-", "-", "open"]
    refused = CliRunner().invoke(cli, ["streams", "drop", "pings", "--yes"])
    assert refused.exit_code != 0
    assert "stream pings has session windows: p" in refused.output, refused.output
    assert "slidewin windows remove NAME" in refused.output
    assert run("remove", "p").exit_code == 0
    assert CliRunner().invoke(cli, ["streams", "drop", "pings", "--yes"]).exit_code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "session", "v", "--gap", "0s"], "--gap 0s must be more than 0"),
        (["add", "session", "v", "--gap", "10s", "--grace", "5s", "--retention", "12s"],
         "--retention 12s is shorter than --gap plus --grace (15s)"),
        (["add", "session", "Bad Name", "--gap", "10s"], "NAME 'Bad Name' is not a session"),
        (["remove", "nope"], "no window definition named 'nope'"),
        (["sessions", "nope"], "no session window named 'nope'"),
        (["sessions"], "no session window is defined"),
        (["sessions", "--key", "k" * 201], "--key must be 1 to 200 characters"),
        (["add", "session", "v", "--gap", "10s", "--stream", "nope"], "no stream named 'nope'"),
        (["add", "session", "v", "--gap", "10s", "--measure", "ts"],
         "measure 'ts' is not a required bigint or integer column of stream events"),
    ],
)
def test_bad_input_names_the_option_and_the_fix(store, args, message):
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_a_name_in_use_and_several_definitions_without_a_name(store):
    assert run("add", "session", "v", "--gap", "10s").exit_code == 0
    again = run("add", "session", "v", "--gap", "10s")
    assert again.exit_code == 2 and "named v exists already" in again.output
    assert run("add", "session", "w", "--gap", "1m").exit_code == 0
    both = run("sessions")
    assert both.exit_code == 2 and "there are 2 session windows (v, w); name one" in both.output


def test_update_prints_tombstones_then_the_merged_session(store):
    sessions.define(store, sessions.SessionDef("visits", timedelta(seconds=10),
                                               timedelta(seconds=10)))
    follower = session_follow.SessionFollower(None, emit="update")
    put(store, [("a", 1, at(0)), ("a", 2, at(4)), ("a", 3, at(18)), ("a", 4, at(20))])
    first = follower.poll(store)
    assert sorted((e.session.start, e.session.end) for e in first) == [
        (at(0), at(4)), (at(18), at(20))]
    assert follower.poll(store) == []  # nothing new: nothing again
    put(store, [("a", 10, at(12))])
    merged = follower.poll(store)
    assert [(e.tombstone, e.session.start, e.merged_start) for e in merged] == [
        (True, at(18), at(0)), (False, at(0), None)]
    assert merged[1].session.n == 5


def test_final_prints_each_session_once_when_it_closes(store):
    sessions.define(store, sessions.SessionDef("visits", timedelta(seconds=10),
                                               timedelta(seconds=5)))
    follower = session_follow.SessionFollower("visits", emit="final")
    put(store, [("a", 1, at(0)), ("b", 1, at(3))])
    assert follower.poll(store) == []
    put(store, [("c", 1, at(18))])  # close 3: a [0] closed; b [3] not yet (3 < 3 is false)
    assert [e.session.key for e in follower.poll(store)] == ["a"]
    put(store, [("c", 1, at(19))])  # close 4: b closes
    assert [e.session.key for e in follower.poll(store)] == ["b"]
    assert follower.poll(store) == []


def test_follow_runs_until_sigterm_and_prints_json_lines(store, small_store_dsn):
    sessions.define(store, sessions.SessionDef("visits", timedelta(seconds=10),
                                               timedelta(seconds=10)))
    put(store, [("a", 1, at(0)), ("a", 3, at(18))])
    proc = subprocess.Popen(
        [SLIDEWIN, "windows", "sessions", "--follow", "--json"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, "SLIDEWIN_DSN": small_store_dsn})
    try:
        lines = Lines(proc)
        lines.until(lambda seen: len(seen) >= 2, timeout_s=60)
        put(store, [("a", 2, at(9))])
        seen = lines.until(lambda seen: len(seen) >= 4, timeout_s=60)
        assert [(x.get("tombstone", False), x["start"][11:19]) for x in seen[2:]] == [
            (True, "12:00:18"), (False, "12:00:00")]
        assert seen[3]["n"] == 3 and seen[3]["emit"] == "update"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


def test_final_from_a_start_prints_what_closed_before_it_began_then_each_new_one(store):
    """Started after sessions closed, a final follower prints those in its range first (from
    --from/--last on), then each session once as it closes."""
    sessions.define(store, sessions.SessionDef("visits", timedelta(seconds=10),
                                               timedelta(seconds=5)))
    put(store, [("a", 1, at(0)), ("b", 1, at(3)), ("c", 1, at(30))])  # close 15: a, b final
    follower = session_follow.SessionFollower("visits", emit="final", start=at(2))
    assert [e.session.key for e in follower.poll(store)] == ["b"]
    assert follower.poll(store) == []
    put(store, [("d", 1, at(50))])  # close 35: c closes
    assert [e.session.key for e in follower.poll(store)] == ["c"]
    refused = run("sessions", "--follow", "--to", "2026-01-01T12:00:00Z")
    assert refused.exit_code == 2 and "--to does not go with --follow" in refused.output
