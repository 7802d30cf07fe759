"""``slidewin streams add --table`` and ``slidewin joins add --as-of --within`` through click's
CliRunner against a real store: what a table is and says it is, the age bound, and answers of an
as-of join of a table that are final once their left record is.

    prices (a table) of p1:  v_old@0                v_new@660 (11m)
    orders:                   o1@60 (v_old)   o2@780 (13m: v_old is 13m old -> NULL within 10m)
                                              o3@1200 (20m: v_new, 9m old)   o4@1250
    the orders' watermark is 1250 s: o1, o2, o3 are final, o4 open
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result

from slidewin.client.cli import cli
from tests import store_fixtures
from tests.store_fixtures import at

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn
NOW = at(2000)


@pytest.fixture
def store(sconn, small_store_dsn, monkeypatch):
    monkeypatch.setenv("SLIDEWIN_DSN", small_store_dsn)
    return sconn


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def ok(*args: str) -> Result:
    result = run(*args)
    assert result.exit_code == 0, result.output
    return result


def as_json(*args: str) -> dict:
    return json.loads(ok(*args, "--json").stdout)


def batch(conn, stream: str, rows: list[tuple[str, str, float]]) -> None:
    """One ingest batch: insert, raise the stream's time, move the joins."""
    with conn.transaction():
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO slidewin_streams.{stream} (id, product, ts) "
                            "VALUES (%s, %s, %s)", [(i, p, at(t)) for i, p, t in rows])
        conn.execute("SELECT slidewin.ingest_advance(%s, %s, %s, '0s')",
                     (stream, at(max(t for *_, t in rows)), NOW))
        conn.execute("SELECT slidewin.joins_advance(%s, %s)", (stream, NOW))


def declare() -> None:
    ok("streams", "add", "orders", "--key", "id", "--time", "ts", "--column", "product:text")
    ok("streams", "add", "prices", "--key", "id", "--time", "ts", "--column", "product:text",
       "--table")


def test_a_table_is_declared_shown_and_listed_as_one(store):
    refused = run("streams", "add", "prices", "--key", "id", "--time", "ts", "--table",
                  "--history", "1h")
    assert refused.exit_code == 2 and refused.stdout == ""
    assert ("--history 1h: a table (--table) keeps every version, with no retention; leave out "
            "--history (or give --history forever)") in refused.stderr
    declare()
    shown = ok("streams", "show", "prices").stdout
    assert shown.startswith("table prices: key id, time ts")
    assert "history forever (a table)" in shown
    assert "every version is kept (no history, no retention)" in shown
    assert ok("streams", "show", "orders").stdout.startswith("stream orders: key id")
    listed = {line.split()[0]: line for line in ok("streams", "list").stdout.splitlines()}
    assert listed["prices"].endswith("forever (a table)")
    assert listed["orders"].endswith("forever")
    assert {s["name"]: s["is_table"] for s in as_json("streams", "list")["streams"]} == {
        "events": False, "orders": False, "prices": True}
    assert as_json("streams", "show", "prices")["is_table"] is True
    again = run("streams", "alter", "prices", "--history", "2h")
    assert again.exit_code == 2 and "a table (--table) keeps every version" in again.stderr
    assert "--table" in ok("streams", "add", "--help").stdout


def test_as_of_within_on_a_table_is_bounded_and_final(store):
    declare()
    batch(store, "prices", [("v_old", "p1", 0), ("v_new", "p2", 660)])
    batch(store, "orders", [("o1", "p1", 60), ("o2", "p1", 780), ("o3", "p2", 1200),
                            ("o4", "p2", 1250)])
    added = as_json("joins", "add", "priced", "--left", "orders", "--right", "prices", "--on",
                    "product", "--as-of", "--within", "10m", "--type", "left")
    assert (added["kind"], added["within_s"], added["right_table"]) == ("asof", 600.0, True)
    text = ok("joins", "add", "any_age", "--left", "orders", "--right", "prices", "--on",
              "product", "--as-of").stdout
    assert "prices is a table: an answer is final once the watermark of orders" in text
    doc = as_json("joins", "show", "priced", "--from", "2026-01-01T00:00Z", "--to",
                  "2100-01-01T00:00Z")
    assert [(r["l"]["id"], (r["r"] or {}).get("id"), r["final"]) for r in doc["rows"]] == [
        ("o4", "v_new", False), ("o3", "v_new", True), ("o2", None, True), ("o1", "v_old", True)]
    assert doc["complete_up_to"] == at(1250).isoformat()
    unbounded = as_json("joins", "show", "any_age", "--from", "2026-01-01T00:00Z", "--to",
                        "2100-01-01T00:00Z")
    assert [(r["l"]["id"], r["r"]["id"]) for r in unbounded["rows"]][2] == ("o2", "v_old")
    shown = ok("joins", "show", "priced").stdout
    assert ("orders LEFT JOIN prices AS OF orders.ts ON orders.product = prices.product AND "
            "prices.ts >= orders.ts - 10m (prices a table: grace 0s)") in shown
    listed = {line.split()[0]: line for line in ok("joins", "list").stdout.splitlines()}
    assert "as of within 10m (table)" in listed["priced"]
    assert "as of (table)" in listed["any_age"]
    assert [(j["name"], j["within_s"]) for j in as_json("joins", "list")["joins"]] == [
        ("any_age", None), ("priced", 600.0)]


@pytest.mark.parametrize(("args", "message"), [
    (["--as-of", "--within", "-1s"], "--within '-1s' must be 0 or more (e.g. 0s, 10s or 2m)"),
    (["--as-of", "--within", "36501d"],
     "--within 36501d is longer than the limit of 100 years (36500d)"),
    (["--rows", "2", "--within", "1m"], "--within and --rows both given"),
    (["--as-of", "--before", "1m"], "--before/--after and --as-of both given"),
])
def test_as_of_within_refusals_name_the_option(store, args, message):
    declare()
    result = run("joins", "add", "j", "--left", "orders", "--right", "prices", "--on",
                 "product", *args)
    assert result.exit_code == 2 and result.stdout == "", result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and message in line, line
