"""``slidewin joins add | list | show | drop`` through click's CliRunner, the follower's two emit
policies, ``show --follow`` as a process, and the README's Orders/Shipments example, against a
real store.

A "batch" here is what the ingest does in one transaction: insert the rows (the streams'
joins_on_insert trigger pairs them), raise the stream's time (slidewin.ingest_advance), move the
joins' watermark W (slidewin.joins_advance). The round trip's left join, --within 1m:

    orders     o1@0   o2@10  o3@20                            o4@150
    shipments               s1(o1)@30         late(o4)@100              s3(o3)@200
    W                                   20 ... 150 after o4: o2, o3 have no pair and
                                        W > l.ts + 1m -> left-only rows, final
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result

from slidewin.client.cli import cli
from slidewin.db import join_follow, joins, streams
from slidewin.db.streams import Column
from tests import store_fixtures
from tests.store_fixtures import at
from tests.test_windows_follow import Lines

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn
SLIDEWIN = str(Path(sys.executable).parent / "slidewin")
README = Path(__file__).resolve().parents[1] / "README.md"
NOW = at(1000)  # the wall clock of every batch: each input is active (idle 1m)


@pytest.fixture
def store(sconn, small_store_dsn, monkeypatch):
    monkeypatch.setenv("SLIDEWIN_DSN", small_store_dsn)
    return sconn


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["joins", *args])


def only_json(result: Result) -> dict:
    """stdout is one JSON object on one line, nothing else."""
    assert result.exit_code == 0, result.output
    assert result.stdout.count("\n") == 1, result.stdout
    return json.loads(result.stdout)


def declare(conn: psycopg.Connection, history: timedelta | None = None) -> None:
    """orders (id bigint, ts, product, units) and shipments (ship_id, order_id bigint, ts)."""
    streams.define(conn, "orders", key="id", time="ts", history=history, columns=[
        Column("id", "bigint"), Column("product", "text"), Column("units", "integer")])
    streams.define(conn, "shipments", key="ship_id", time="ts", history=history, columns=[
        Column("ship_id", "text"), Column("order_id", "bigint")])


def orders(conn: psycopg.Connection, rows: list[tuple[int, float]], now=NOW) -> None:
    """One batch of orders (id, seconds after T0); product p<id>, units 1."""
    _batch(conn, "orders", "INSERT INTO slidewin_streams.orders (id, ts, product, units) "
           "VALUES (%s, %s, 'p' || %s::text, 1)", [(i, at(s), i) for i, s in rows], now)


def shipments(conn: psycopg.Connection, rows: list[tuple[str, int, float]], now=NOW) -> None:
    """One batch of shipments (ship_id, order_id, seconds after T0)."""
    _batch(conn, "shipments", "INSERT INTO slidewin_streams.shipments (ship_id, order_id, ts) "
           "VALUES (%s, %s, %s)", [(s, o, at(t)) for s, o, t in rows], now)


def _batch(conn, stream, insert, rows, now) -> None:
    with conn.transaction():
        with conn.cursor() as cur:
            cur.executemany(insert, rows)
        newest = max(r[-1] if stream == "shipments" else r[1] for r in rows)
        conn.execute("SELECT slidewin.ingest_advance(%s, %s, %s, '0s')", (stream, newest, now))
        conn.execute("SELECT slidewin.joins_advance(NULL, %s)", (now,))


def ids(doc: dict) -> list[tuple]:
    """A show --json's rows as (left id, right id, final), newest first."""
    return [((r["l"] or {}).get("id"), (r["r"] or {}).get("ship_id"), r["final"])
            for r in doc["rows"]]


# -- add, list, show, drop ---------------------------------------------------------------------

def test_add_list_show_and_drop(store):
    declare(store)
    added = only_json(run("add", "os", "--left", "orders", "--right", "shipments", "--on",
                          "id=order_id", "--within", "1m", "--type", "left", "--json"))
    assert (added["kind"], added["type"], added["on"], added["before_s"], added["after_s"],
            added["idle_s"], added["table"], added["pairs"]) == (
        "interval", "left", "id=order_id", 60, 60, 60, "slidewin_joins.os", 0)
    orders(store, [(1, 0), (2, 10), (3, 20)])
    shipments(store, [("s1", 1, 30), ("s3", 3, 200)])
    orders(store, [(4, 150)])  # W = min(150, 200) = 150: o2 and o3 can no longer pair
    shipments(store, [("late", 4, 100)])  # older than W: late for the join, no result

    [listed] = only_json(run("list", "--json"))["joins"]
    assert (listed["name"], listed["watermark"], listed["late"], listed["results"]) == (
        "os", at(150).isoformat(), {"left": 0, "right": 1},
        {"pairs": 1, "left_only": 2, "right_only": 0})
    text = run("list")
    assert text.exit_code == 0
    assert re.search(r"^os +interval +left +orders +shipments +id=order_id +\[-1m, \+1m\] +0s +"
                     r"2026-01-01 12:02:30 +0/1 +1 pairs, 2 left only, 0 right only$",
                     text.stdout, re.M), text.stdout

    doc = only_json(run("show", "os", "--from", at(0).isoformat(), "--to", at(300).isoformat(),
                        "--json"))
    assert (doc["join"], doc["watermark"], doc["complete_up_to"], doc["late"], doc["more"]) == (
        "os", at(150).isoformat(), at(90).isoformat(), {"left": 0, "right": 1}, False)
    assert doc["results"] == {"pairs": 1, "left_only": 2, "right_only": 0}
    assert ids(doc) == [(1, "s1", True), (3, None, True), (2, None, True)]
    pair = doc["rows"][0]
    assert pair["ts"] == at(30).isoformat() and pair["seq"] is not None
    assert pair["l"] == {"id": 1, "ts": at(0).isoformat(), "product": "p1", "units": 1}
    assert pair["r"] == {"ship_id": "s1", "order_id": 1, "ts": at(30).isoformat()}

    # the default range: the last hour up to the streams' newest record (s3@200)
    assert ids(only_json(run("show", "os", "--json"))) == ids(doc)
    assert ids(only_json(run("show", "os", "--last", "175s", "--json"))) == [(1, "s1", True)]
    limited = only_json(run("show", "os", "--limit", "1", "--json"))
    assert limited["more"] is True and len(limited["rows"]) == 1

    shown = run("show", "os")
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("join os: orders LEFT JOIN shipments ON orders.id = "
                               "shipments.order_id AND shipments.ts BETWEEN orders.ts - 1m AND "
                               "orders.ts + 1m (grace 0s, idle 1m)")
    assert lines[1] == ("complete up to 2026-01-01 12:01:30 (W 2026-01-01 12:02:30); late "
                        "records: left 0, right 1; results: 1 pairs, 2 left only, 0 right only")
    assert lines[2].endswith("newest first: 3")
    assert lines[3].split() == ["ts", "l.ts", "l.id", "l.product", "l.units", "r.ts",
                                "r.ship_id", "r.order_id", "final"]
    assert lines[4].split() == ["2026-01-01", "12:00:30", "2026-01-01", "12:00:00", "1", "p1",
                                "1", "2026-01-01", "12:00:30", "s1", "1", "final"]
    assert lines[6].split()[-4:] == ["-", "-", "-", "final"]  # o2: no shipment

    status = CliRunner().invoke(cli, ["db", "status", "--json"])
    assert status.exit_code == 0, status.output
    assert json.loads(status.stdout)["joins"] == [{
        "join": "os", "kind": "interval", "watermark": at(150).isoformat(), "late_left": 0,
        "late_right": 1, "pairs": 1, "left_only": 2, "right_only": 0}]
    assert "os interval" in CliRunner().invoke(cli, ["db", "status"]).stdout

    refused = run("drop", "os")
    assert refused.exit_code == 2 and "add --yes to go on" in refused.output
    assert only_json(run("drop", "os", "--yes", "--json")) == {"dropped": "os", "results": 3}
    assert "no joins" in run("list").stdout
    assert streams.row_count(store, streams.get_stream(store, "orders")) == 4  # streams stay


def test_rows_and_as_of_joins_are_read_when_asked(store):
    declare(store)
    orders(store, [(1, 0), (2, 10), (1, 20)])  # order 1 again at 20: a newer version
    shipments(store, [("a", 1, 15), ("b", 1, 25), ("c", 2, 25)])
    text = run("add", "latest", "--left", "shipments", "--right", "orders", "--on", "order_id=id",
               "--as-of", "--type", "left", "--select", "product")
    assert text.exit_code == 0, text.output
    assert "answers read from the streams when asked" in text.stdout
    doc = only_json(run("show", "latest", "--json"))
    # as of each shipment's time: a (15) sees order 1 of 0, b (25) the one of 20; c order 2
    # (b and c share a time: newest first, then in the records' order)
    assert [(r["l"]["ship_id"], r["r"]["ts"]) for r in doc["rows"]] == [
        ("b", at(20).isoformat()), ("c", at(10).isoformat()), ("a", at(0).isoformat())]
    assert doc["rows"][1]["r"] == {"id": 2, "ts": at(10).isoformat(), "product": "p2"}
    assert doc["rows"][0]["seq"] is None
    added = only_json(run("add", "two", "--left", "shipments", "--right", "orders", "--on",
                          "order_id=id", "--rows", "2", "--json"))
    assert (added["kind"], added["rows"], added["table"]) == ("rows", 2, None)
    # the 2 newest orders at or before 25 are (1 @ 20, 2 @ 10): b and c pair, a (15) has
    # (2 @ 10, 1 @ 0) before it: pairs with order 1 @ 0
    assert [(r["l"]["ship_id"], r["r"]["id"]) for r in
            only_json(run("show", "two", "--json"))["rows"]] == [("b", 1), ("c", 2), ("a", 1)]
    listed = run("list")
    assert "as of" in listed.stdout and "rows 2" in listed.stdout
    assert "read when asked" in listed.stdout


def test_select_sends_each_name_to_the_stream_that_has_it(store):
    declare(store)
    added = only_json(run("add", "sel", "--left", "orders", "--right", "shipments", "--on",
                          "id=order_id", "--within", "10s", "--select",
                          "product, ts, right.order_id", "--json"))
    # ts is in both; product only in orders; time, key and on-column are always kept
    assert added["select_left"] == ["ts", "id", "product"]
    assert added["select_right"] == ["ts", "ship_id", "order_id"]
    again = only_json(run("add", "sel2", "--left", "orders", "--right", "shipments", "--on",
                          "id=order_id", "--within", "10s", "--select", "shipments.ship_id",
                          "--json"))
    assert again["select_left"] == ["ts", "id"]


# -- refusals: one line naming the option and the fix, exit 2 ---------------------------------

ADD = ["add", "j", "--left", "orders", "--right", "shipments", "--on", "id=order_id"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([*ADD, "--within", "2x"], "--within '2x' is not a duration; use a number with a unit"),
        ([*ADD, "--before", "-1m"], "--before '-1m' must be 0 or more (e.g. 0s, 10s or 2m)"),
        ([*ADD, "--within", "1m", "--grace", "-5s"], "--grace '-5s' must be 0 or more"),
        ([*ADD, "--within", "1m", "--rows", "3"],
         "--within and --rows both given: a join has one window (give --within D, --before D "
         "--after D, --rows N or --as-of)"),
        ([*ADD, "--before", "1m", "--as-of"], "--before/--after and --as-of both given"),
        (ADD, "no window given (add --within D, e.g. --within 2m;"),
        (["add", "j", "--left", "nope", "--right", "shipments", "--on", "id", "--within", "1m"],
         "no stream named 'nope' (slidewin streams list shows the streams"),
        ([*ADD, "--within", "2m", "--grace", "30s"],
         "stream orders keeps 1m of history, less than before + after + grace = 270s (raise "
         "its history (slidewin streams alter orders --history 270s) or shorten the join)"),
        ([*ADD, "--as-of", "--type", "right"],
         "an as-of join is inner or left, not right (every left record is answered; use "
         "--type inner or --type left)"),
        ([*ADD, "--within", "1m", "--type", "outer"], "--type: 'outer' is not one of"),
        ([*ADD, "--within", "1m", "--idle", "0s"], "--idle '0s' must be more than 0"),
        ([*ADD, "--rows", "0"], "--rows: 0 is not in the range 1<=x<=100000"),
        (["add", "j", "--left", "orders", "--right", "shipments", "--on", "id=nope", "--rows",
          "1"], "--on: stream shipments has no column 'nope' (its columns are"),
        ([*ADD, "--within", "1s", "--select", "nope"],
         "--select nope: neither orders nor shipments has a column nope (orders: id, product, "
         "ts, units; shipments: order_id, ship_id, ts)"),
        ([*ADD, "--within", "1s", "--select", "other.ts"], "--select other.ts: other is neither "
         "stream (qualify with left., right., orders. or shipments.)"),
        (["show", "nope"], "no join named 'nope' (slidewin joins list shows the joins"),
        (["show", "nope", "--last", "1m", "--from", "2026-01-01T00:00Z"],
         "--last and --from/--to both given (use one of them)"),
        (["show", "nope", "--from", "2026-01-01T00:00Z"], "--from and --to go together"),
        (["show", "nope", "--follow", "--to", "2026-01-01T00:00Z"],
         "--to does not go with --follow"),
        (["show", "nope", "--emit", "sometimes"], "--emit: 'sometimes' is not one of"),
        (["drop", "nope"], "joins drop nope deletes the join and every result it holds (add "
         "--yes to go on; its streams stay)"),
        (["drop", "nope", "--yes"], "no join named 'nope'"),
    ],
)
def test_refusals_name_the_option_and_the_fix(store, args, message):
    declare(store, history=timedelta(minutes=1))
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and message in line, line


def test_refusals_of_a_json_command_end_stdout_with_json(store):
    declare(store)
    result = run(*ADD, "--within", "1m", "--rows", "3", "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout) == {"error": result.stderr.strip().removeprefix("error: "),
                                         "exit_code": 2}


def test_a_name_in_use_and_following_a_join_read_when_asked_are_refused(store):
    declare(store)
    assert run(*ADD, "--rows", "3").exit_code == 0
    again = run(*ADD, "--within", "1m")
    assert again.exit_code == 2 and "join j exists already (pick another name, or drop it " \
        "first (slidewin joins drop NAME --yes))" in again.stderr
    follow = run("show", "j", "--follow")
    assert follow.exit_code == 2
    assert follow.stderr.splitlines() == [
        "error: --follow: join j is a rows join, read from the streams when asked: it writes "
        "no results to follow (show it over a range instead, or define an interval join with "
        "--within)"]


# -- following ---------------------------------------------------------------------------------

def test_final_holds_a_result_back_until_it_is_final(store):
    """An inner join, --within 10s: a pair is final once W (the older stream's time) passes its
    ts; update prints it when written, final once then -- in the order written, each once."""
    declare(store)
    joins.define(store, "j", left="orders", right="shipments", on="id=order_id",
                 before=timedelta(seconds=10), after=timedelta(seconds=10), now=NOW)
    update = join_follow.JoinFollower("j")
    final = join_follow.JoinFollower("j", emit="final")
    assert update.poll(store) == [] and final.poll(store) == []
    orders(store, [(1, 100)])
    shipments(store, [("a", 1, 105)])  # pair (1, a) at 105; W = min(100, 105) = 100: open
    assert [x.r["ship_id"] for x in update.poll(store)] == ["a"]
    assert final.poll(store) == [] and final.held == 1
    orders(store, [(2, 400)])  # W = 105: not past 105 yet
    assert update.poll(store) == [] and final.poll(store) == []
    shipments(store, [("b", 2, 402)])  # pair (2, b) at 402; W = 400: (1, a) is final
    assert [x.r["ship_id"] for x in update.poll(store)] == ["b"]
    assert [(x.r["ship_id"], x.final) for x in final.poll(store)] == [("a", True)]
    assert final.held == 1
    orders(store, [(3, 600)])
    shipments(store, [("c", 3, 600)])  # W = 600: (2, b) is final; (3, c) at 600 is not
    assert [x.r["ship_id"] for x in update.poll(store)] == ["c"]
    assert [x.r["ship_id"] for x in final.poll(store)] == ["b"]
    assert final.poll(store) == [] and update.poll(store) == []


def test_a_follower_starts_with_the_newest_results_in_its_range_then_each_new_one(store):
    declare(store)
    joins.define(store, "j", left="orders", right="shipments", on="id=order_id",
                 before=timedelta(seconds=10), after=timedelta(seconds=10), now=NOW)
    orders(store, [(1, 0), (2, 100), (3, 200)])
    shipments(store, [("a", 1, 5), ("b", 2, 105), ("c", 3, 205)])
    follower = join_follow.JoinFollower("j", start=at(50), tail=1)
    assert [x.r["ship_id"] for x in follower.poll(store)] == ["c"]  # the newest in range
    shipments(store, [("d", 1, 8), ("e", 3, 208)])
    assert [x.r["ship_id"] for x in follower.poll(store)] == ["e"]  # d is before the start
    assert follower.poll(store) == []


def _follow(dsn: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [SLIDEWIN, "joins", "show", "j", "--follow", "--json", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, "SLIDEWIN_DSN": dsn})


def _stop(proc: subprocess.Popen, sig: int) -> int:
    proc.send_signal(sig)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode


def test_follow_prints_what_another_connection_writes_until_sigterm(store, small_store_dsn):
    declare(store)
    joins.define(store, "j", left="orders", right="shipments", on="id=order_id",
                 before=timedelta(seconds=10), after=timedelta(seconds=10), join_type="left",
                 now=NOW)
    orders(store, [(1, 0)])
    shipments(store, [("a", 1, 5)])  # written before the follower starts: its first line
    proc = _follow(small_store_dsn)
    try:
        lines = Lines(proc)
        lines.until(lambda seen: len(seen) >= 1, timeout_s=60)
        orders(store, [(2, 30)])
        shipments(store, [("b", 2, 31)])
        orders(store, [(3, 50)])  # W = 31: order 3 may still pair
        orders(store, [(4, 100)])
        shipments(store, [("c", 4, 100)])  # W = 100 > 50 + 10: order 3's left-only row
        seen = lines.until(lambda seen: len(seen) >= 4, timeout_s=60)
    finally:
        code = _stop(proc, signal.SIGTERM)
    assert code == 0, proc.stderr.read() if proc.stderr else ""
    assert [(x["l"]["id"], (x["r"] or {}).get("ship_id"), x["emit"]) for x in seen] == [
        (1, "a", "update"), (2, "b", "update"), (4, "c", "update"), (3, None, "update")]
    assert [x["seq"] for x in seen] == sorted(x["seq"] for x in seen)
    assert lines.seen == seen  # each once


@pytest.mark.slow
def test_follow_emit_final_prints_only_final_results_and_exits_130_on_ctrl_c(
        store, small_store_dsn):
    declare(store)
    joins.define(store, "j", left="orders", right="shipments", on="id=order_id",
                 before=timedelta(seconds=10), after=timedelta(seconds=10), now=NOW)
    # no stream time yet: --last would end now (wall clock), so the range starts at T0
    proc = _follow(small_store_dsn, "--emit", "final", "--from", at(0).isoformat())
    try:
        lines = Lines(proc)
        orders(store, [(1, 100)])
        shipments(store, [("a", 1, 105)])  # open: W = 100
        orders(store, [(2, 400)])
        shipments(store, [("b", 2, 402)])  # W = 400: (1, a) final; (2, b) open
        first = lines.until(lambda seen: len(seen) >= 1, timeout_s=60)
        with pytest.raises(AssertionError, match="timed out"):  # (2, b) is held back
            lines.until(lambda seen: len(seen) >= 2, timeout_s=3)
        orders(store, [(3, 600)])
        shipments(store, [("c", 3, 600)])  # W = 600: (2, b) final
        seen = lines.until(lambda seen: len(seen) >= 2, timeout_s=60)
    finally:
        code = _stop(proc, signal.SIGINT)
    assert code == 130, proc.stderr.read() if proc.stderr else ""
    assert first[0]["final"] is True and first[0]["emit"] == "final"
    assert [(x["r"]["ship_id"], x["final"]) for x in seen] == [("a", True), ("b", True)]


# -- the README's example ----------------------------------------------------------------------

ROWS_OF = re.compile(r"<!-- rows of: (?P<command>.+?) -->\n(?P<table>(?:\|.*\|\n)+)")


def _readme_joins() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## Joins\n")
    return text[start:text.index("\n## ", start + 1)]


def _markdown_rows(table: str) -> list[list[str]]:
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in table.splitlines()]
    return [r for r in rows if not all(set(c) <= {"-"} for c in r)]


def _printed_rows(output: str) -> list[list[str]]:
    """The table ``joins show`` prints, from its heading on, cell by cell."""
    lines = output.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("ts "))
    return [re.split(r"\s{2,}", line.strip()) for line in lines[first:]]


def test_the_readme_example_prints_the_rows_the_readme_shows(store):
    """Samza's orders and shipments as the README builds them -- its own commands and SQL --
    print exactly the rows its tables show, so the README cannot drift."""
    from tests.test_readme import blocks, commands, statements

    section = _readme_joins()
    ran = []
    for block in blocks(section):
        if block.lang == "sql" and "INSERT INTO slidewin_streams.orders" in block.body:
            for statement in statements(block.body):
                store.execute(statement)
        if block.lang == "sh":
            for command in commands(block.body):
                argv = command.split()
                if argv[1:3] in (["streams", "add"], ["joins", "add"]) and "--within" not in argv:
                    result = CliRunner().invoke(cli, argv[1:])
                    assert result.exit_code == 0, (command, result.output)
                    ran.append(argv[1:4])
    assert ran == [["streams", "add", "orders"], ["streams", "add", "shipments"],
                   ["joins", "add", "shipped"], ["joins", "add", "recent"],
                   ["streams", "add", "readings"], ["streams", "add", "tags"],
                   ["streams", "add", "prices"]]
    shown = {}
    for m in ROWS_OF.finditer(section):
        argv = m.group("command").split()
        result = CliRunner().invoke(cli, argv[1:])
        assert result.exit_code == 0, result.output
        assert _printed_rows(result.stdout) == _markdown_rows(m.group("table")), m.group("command")
        doc = only_json(CliRunner().invoke(cli, [*argv[1:], "--json"]))
        shown[argv[3]] = [(r["l"]["ship_id"], r["r"]["id"]) for r in doc["rows"]]
    # the range join: within 2 min before the shipment, both ends inclusive (s3: exactly 2 min)
    assert shown["shipped"] == [("s3", 3), ("s2", 4), ("s1", 1)]
    # the 3 newest orders at or before each shipment: s1's order 1 is no longer among them
    assert shown["recent"] == [("s5", 5), ("s3", 3), ("s2", 4)]
