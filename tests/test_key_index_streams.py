"""The key index of a declared stream (``slidewin.key_index(on, stream)``, ``windows key-index
--stream``): the built-in stream's access path, through the same function, on a declared
stream's table (key, time) INCLUDE (its measures).

    slidewin_streams.sensors (hash partitioned on sensor, primary key (ts, sensor))
      without the index  a key's windows read every row of the range in the key's partition
      with it            "sensors#key" on the parent: (sensor, ts) INCLUDE (v, w), and under it
                         one index per partition, which a key's windows read instead

Enable, disable and status on a declared stream; the same answers with and without it; a key's
windows read it and nothing else (the server's scan counters); enabling again changes
nothing, and after a new measure builds it again to include it; dropping the stream drops it;
an unknown stream is an error naming --stream.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from slidewin.client.cli import cli
from slidewin.db import key_windows, streams
from slidewin.db.errors import ProcedureError
from slidewin.db.streams import Column
from tests.conftest import T0

S = timedelta(seconds=1)
INDEX = 'slidewin_streams."sensors#key"'


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def kconn(conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
    """The emptied shared store with two declared streams; the built-in stream's key index is
    left off afterwards, as the other tests of the shared store expect."""
    define(conn, "sensors", "text")
    streams.define(conn, "parcels", key="p", time="ts", columns=[Column("p", "text")])
    yield conn
    key_windows.set_index(conn, False)


def define(conn: psycopg.Connection, name: str, key_type: str) -> streams.Stream:
    return streams.define(conn, name, key="sensor", time="ts", measures=["v", "w"],
                          columns=[Column("sensor", key_type), Column("v", "double precision"),
                                   Column("w", "bigint"), Column("site", "text")])


def index_columns(conn: psycopg.Connection, index: str = INDEX) -> tuple[list[str], list[str]]:
    """(key columns, INCLUDE columns) of an index, as the catalog has them."""
    row = conn.execute(
        "SELECT array_agg(a.attname::text ORDER BY k.n) FILTER (WHERE k.n <= i.indnkeyatts), "
        "array_agg(a.attname::text ORDER BY k.n) FILTER (WHERE k.n > i.indnkeyatts) "
        "FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY k(att, n) "
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.att "
        "WHERE i.indexrelid = %s::regclass", (index,)).fetchone()
    assert row is not None
    return row[0], row[1]


def children(conn: psycopg.Connection, index: str = INDEX) -> list[str]:
    """The partitions' indexes under a partitioned index."""
    return [r[0] for r in conn.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = %s::regclass ORDER BY 1", (index,)).fetchall()]


def test_enable_disable_and_status_of_a_declared_stream(kconn: psycopg.Connection) -> None:
    c = kconn
    assert key_windows.index_status(c) == {"events": False, "parcels": False, "sensors": False}
    assert key_windows.set_index(c, True, "sensors") is True
    # on the parent, (key, time) INCLUDE (its measures); every partition has one beneath it
    assert index_columns(c) == (["sensor", "ts"], ["v", "w"])
    assert len(children(c)) == 4
    oid = c.execute("SELECT %s::regclass::oid", (INDEX,)).fetchone()
    # enabling again changes nothing: the same index, not built again
    assert key_windows.set_index(c, True, "sensors") is True
    assert c.execute("SELECT %s::regclass::oid", (INDEX,)).fetchone() == oid
    assert key_windows.index_status(c) == {"events": False, "parcels": False, "sensors": True}
    assert key_windows.index_status(c, "sensors") == {"sensors": True}
    assert key_windows.set_index(c, None, "sensors") is True  # None: only look
    # a stream without measures: (key, time) alone
    assert key_windows.set_index(c, True, "parcels") is True
    assert index_columns(c, 'slidewin_streams."parcels#key"') == (["p", "ts"], None)
    # the built-in stream's is its own, the one-argument call's, untouched by the others
    assert key_windows.set_index(c, None) is False
    assert c.execute("SELECT slidewin.key_index(true)").fetchone() == (True,)
    assert index_columns(c, "slidewin.events_key_ts") == (["uuid", "ts"], ["val"])
    assert key_windows.index_status(c) == {"events": True, "parcels": True, "sensors": True}
    assert key_windows.set_index(c, False, "sensors") is False
    assert key_windows.set_index(c, False, "sensors") is False  # off stays off, no error
    assert c.execute("SELECT to_regclass(%s)", (INDEX,)).fetchone() == (None,)
    assert key_windows.index_status(c) == {"events": True, "parcels": True, "sensors": False}


def test_an_unknown_stream_is_refused_naming_it(kconn: psycopg.Connection) -> None:
    for call in (lambda: key_windows.set_index(kconn, True, "nope"),
                 lambda: key_windows.index_status(kconn, "nope")):
        with pytest.raises(ProcedureError, match="no stream named 'nope'.*streams list"):
            call()


# -- the same answers with and without it -----------------------------------------------------


def fill(conn: psycopg.Connection, key_type: str, rows: int = 400, seed: int = 3) -> None:
    rng = random.Random(seed)
    keys = [str(i) if key_type == "bigint" else f"s{i}" for i in range(5)]
    conn.cursor().executemany(
        "INSERT INTO slidewin_streams.sensors (sensor, ts, v, w) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT DO NOTHING",
        [(rng.choice(keys), at(rng.randint(0, 1200) / 10),
          rng.choice([rng.uniform(-50, 50), 0.1, math.nan, None]), rng.randint(-9, 9))
         for _ in range(rows)])


def answers(conn: psycopg.Connection, key: str) -> dict[str, Any]:
    """Every kind of answer for one key of sensors, over both measures."""
    out: dict[str, Any] = {}
    for m in ("v", "w"):
        for kind, adv in (("tumbling", None), ("hopping", 5 * S), ("sliding", None)):
            out[f"{kind} {m}"] = streams.windows(conn, "sensors", kind, size=10 * S,
                                                 advance=adv, start=at(0), end=at(130),
                                                 measure=m, key=key)
        out[f"summary {m}"] = streams.summary(conn, "sensors", at(3), at(97), m, key=key)
        out[f"count {m}"] = streams.count_windows(conn, "sensors", 7, 3, 40, measure=m, key=key)
        out[f"at {m}"] = streams.windows_at(conn, "sensors", 20 * S, 5 * S, at(61), measure=m,
                                            key=key)
    return out


def same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN (a double measure's NaN sums to NaN)."""
    return repr(a) == repr(b)


@pytest.mark.parametrize("key_type", ["text", "bigint"])
def test_a_keys_answers_are_the_same_with_and_without_the_index(
    conn: psycopg.Connection, key_type: str
) -> None:
    define(conn, "sensors", key_type)
    fill(conn, key_type)
    keys = [str(i) if key_type == "bigint" else f"s{i}" for i in (0, 3)] + ["9", "nobody"]
    if key_type == "bigint":
        keys.remove("nobody")
    without = {k: answers(conn, k) for k in keys}
    assert without[keys[0]]["tumbling w"], "the key holds rows"
    assert key_windows.set_index(conn, True, "sensors") is True
    conn.execute("VACUUM ANALYZE slidewin_streams.sensors")  # index-only scans, as in a store
    for k in keys:
        assert same(answers(conn, k), without[k]), k
    # and the sum of a key's tumbling windows is its rows' own
    mine = conn.execute("SELECT count(w), sum(w) FROM slidewin_streams.sensors "
                        "WHERE sensor::text = %s AND ts >= %s AND ts < %s",
                        (keys[0], at(0), at(130))).fetchone()
    got = without[keys[0]]["tumbling w"]
    assert (sum(x.cnt for x in got), sum(x.total for x in got)) == (mine[0], Decimal(mine[1]))


# -- the plan reads it --------------------------------------------------------------------------


# how often each partition of sensors was read whole, and each of its indexes scanned: the
# server's own counters, flushed to be read at once (pg_stat_force_next_flush, PostgreSQL 15+)
COUNTERS = """
SELECT 'seq ' || relname, seq_scan FROM pg_stat_user_tables
 WHERE schemaname = 'slidewin_streams' AND relname LIKE 'sensors#%%'
UNION ALL
SELECT 'index ' || indexrelname, idx_scan FROM pg_stat_user_indexes
 WHERE schemaname = 'slidewin_streams' AND relname LIKE 'sensors#%%'
"""


def counters(conn: psycopg.Connection) -> dict[str, int]:
    conn.execute("SELECT pg_stat_force_next_flush()")  # flushed as the statement ends
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return {name: int(n) for name, n in conn.execute(COUNTERS).fetchall()}


def reads(conn: psycopg.Connection, call: Callable[[psycopg.Connection], object]) -> set[str]:
    """The partitions ``call`` read whole and the partitions' indexes it scanned."""
    before = counters(conn)
    call(conn)
    after = counters(conn)
    return {name for name, n in after.items() if n > before.get(name, 0)}


# a key's answers over the middle of the stream's 4,000 s: inside the histogram's first and last
# bins, so that the planner does not probe an index for the range's actual ends (a scan too)
KEYED_CALLS: dict[str, Callable[[psycopg.Connection], object]] = {
    "tumbling": lambda c: streams.windows(c, "sensors", "tumbling", size=10 * S, start=at(1000),
                                          end=at(3000), measure="v", key="s7"),
    "sliding": lambda c: streams.windows(c, "sensors", "sliding", size=10 * S, start=at(1000),
                                         end=at(3000), measure="w", key="s7"),
    "summary": lambda c: streams.summary(c, "sensors", at(1000), at(3000), "v", key="s7"),
    "count": lambda c: streams.count_windows(c, "sensors", 10, 5, 50, measure="v", key="s7"),
}


def test_a_keys_windows_read_the_key_index_not_the_partition(conn: psycopg.Connection) -> None:
    """40,000 rows of 50 keys over 4,000 s in 4 partitions: a key's windows over the whole range
    read its 800 rows through the key index; without it, its partition whole or by the primary
    key (time, key) -- every row of the range."""
    define(conn, "sensors", "text")
    conn.execute("INSERT INTO slidewin_streams.sensors (sensor, ts, v, w) "
                 "SELECT 's' || (g %% 50), %s + g * interval '0.1 s', g / 7.0, g "
                 "FROM generate_series(0, 39999) g", (at(0),))
    conn.execute("VACUUM ANALYZE slidewin_streams.sensors")
    [part] = {r[0] for r in conn.execute(
        "SELECT tableoid::regclass::text FROM slidewin_streams.sensors WHERE sensor = 's7'")}
    part = part.split(".")[1].strip('"')  # the one partition holding the key
    for name, call in KEYED_CALLS.items():
        read = reads(conn, call)
        assert read and read <= {f"seq {part}", f"index {part}_pkey"}, (name, read)
    assert key_windows.set_index(conn, True, "sensors") is True
    conn.execute("ANALYZE slidewin_streams.sensors")
    [mine] = [ix for ix in children(conn) if ix.startswith(f"{part}_")]
    for name, call in KEYED_CALLS.items():
        assert reads(conn, call) == {f"index {mine}"}, name


# -- measures, drop, the CLI --------------------------------------------------------------------


def test_a_new_measure_builds_it_again_to_include_it(kconn: psycopg.Connection) -> None:
    c = kconn
    key_windows.set_index(c, True, "sensors")
    c.execute("SELECT slidewin.stream_add_column('sensors', 'hum', 'double', true)")
    assert index_columns(c) == (["sensor", "ts"], ["v", "w", "hum"])
    assert len(children(c)) == 4
    key_windows.set_index(c, False, "sensors")
    c.execute("SELECT slidewin.stream_add_column('sensors', 'lux', 'bigint', true)")
    assert key_windows.index_status(c, "sensors") == {"sensors": False}  # off stays off


def test_dropping_the_stream_drops_its_index(kconn: psycopg.Connection) -> None:
    key_windows.set_index(kconn, True, "sensors")
    kconn.execute("SELECT slidewin.stream_drop('sensors')")
    assert kconn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'sensors#%%'"
                         ).fetchone() == (0,)
    define(kconn, "sensors", "text")  # the same name again starts without one
    assert key_windows.index_status(kconn, "sensors") == {"sensors": False}


def test_the_cli_enables_shows_and_disables_a_streams_key_index(
    kconn: psycopg.Connection, store_dsn: str
) -> None:
    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--dsn", store_dsn, "windows", "key-index", *args])

    on = run("enable", "--stream", "sensors", "--json")
    assert on.exit_code == 0, on.output
    assert json.loads(on.stdout) == {"stream": "sensors", "key_index": True}
    assert json.loads(run("enable", "--stream", "sensors", "--json").stdout) == {
        "stream": "sensors", "key_index": True}
    every = json.loads(run("status", "--json").stdout)
    assert every == {"key_index": False,
                     "streams": {"events": False, "parcels": False, "sensors": True}}
    assert json.loads(run("status", "--stream", "sensors", "--json").stdout) == {
        "stream": "sensors", "key_index": True}
    assert json.loads(run("status", "--stream", "events", "--json").stdout) == {
        "key_index": False}
    assert run().output.splitlines() == [
        "events: key index off", "parcels: key index off", "sensors: key index on"]
    off = run("disable", "--stream", "sensors")
    assert off.exit_code == 0 and off.output == "sensors: key index off\n"
    for action in ("enable", "status"):
        bad = run(action, "--stream", "nope")
        assert bad.exit_code == 2, bad.output
        assert bad.output.startswith("error: --stream nope: no stream named 'nope'"), bad.output
        assert "slidewin streams list" in bad.output
