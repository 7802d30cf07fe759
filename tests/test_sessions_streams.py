"""Session windows over every stream: a declared stream keeps them as events does.

``visits`` is a declared stream with the columns named otherwise -- key ``who``, measure
``amount``, time ``at_ts`` -- so every test also shows that the stream's own names are read.
Fed the same rows as events in the same statements, a definition over it keeps the same
sessions, changes, stats and late events as the same definition over events. T0 = 2026-01-01
12:00:00 UTC; gap 10 s, grace 5 s.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from datetime import datetime, timedelta

import psycopg
import pytest

from slidewin.db import session_follow, sessions, streams
from slidewin.db.errors import ProcedureError
from slidewin.db.schema import init_schema
from slidewin.db.streams import Column
from tests import store_fixtures
from tests.conftest import T0
from tests.store_fixtures import at, put

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn

S = timedelta(seconds=1)
GAP = 10 * S

Row = tuple[str, int, datetime]


def declare(conn: psycopg.Connection, name: str = "visits") -> None:
    streams.define(conn, name, key="who", time="at_ts", measures=["amount"], partitions=2,
                   columns=[Column("who", "text"), Column("amount", "bigint", True)])


def feed(conn: psycopg.Connection, rows: Iterable[Row], stream: str = "visits") -> None:
    """The rows into events and into the declared stream: one statement (a batch) each."""
    rows = list(rows)
    put(conn, rows)
    conn.execute(
        f'INSERT INTO slidewin_streams."{stream}" (who, amount, at_ts) '
        "SELECT * FROM unnest(%s::text[], %s::bigint[], %s::timestamptz[])",
        ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]))


@pytest.fixture
def both(sconn: psycopg.Connection) -> psycopg.Connection:
    """Definition ev over events and vs over visits, alike."""
    declare(sconn)
    sessions.define(sconn, sessions.SessionDef("ev", GAP, 5 * S, timedelta(minutes=10)))
    sessions.define(sconn, sessions.SessionDef("vs", GAP, 5 * S, timedelta(minutes=10),
                                               stream="visits"))
    return sconn


def kept(conn: psycopg.Connection, name: str) -> dict:
    """Everything a reader of definition ``name`` sees, the name aside."""
    stats = sessions.stats(conn, name)
    return {
        "sessions": sessions.sessions(conn, None, name),
        "changes": sessions.changes(conn, name, 0),
        "closed": sessions.closed(conn, name, None),
        "stats": (stats.stream_ts, stats.open, stats.merges, stats.late, stats.longest_key,
                  stats.longest, stats.events, stats.created),
    }


def test_a_declared_stream_fed_the_rows_of_events_keeps_the_same_sessions(both):
    feed(both, [("a", 3, at(0)), ("a", 5, at(4)), ("b", 1, at(1)), ("a", 7, at(16))])
    feed(both, [("a", 2, at(13)), ("b", 4, at(18)), ("c", 9, at(25))])  # a@13 bridges
    feed(both, [("a", 1, at(14)), ("b", 6, at(60))])  # 14 < 25 - grace 5: late
    feed(both, [("a", 8, at(62)), ("c", 2, at(70))])
    ev, vs = kept(both, "ev"), kept(both, "vs")
    assert vs == ev
    assert [(s.key, (s.start - T0) / S, (s.end - T0) / S, s.n, s.total)
            for s in ev["sessions"]] == [
        ("a", 0, 16, 4, 17), ("b", 1, 1, 1, 1), ("b", 18, 18, 1, 4), ("c", 25, 25, 1, 9),
        ("b", 60, 60, 1, 6), ("a", 62, 62, 1, 8), ("c", 70, 70, 1, 2)]
    assert ev["stats"][3] == 1  # the late one
    assert ev["stats"][2] >= 1  # the bridge merged two stored sessions
    assert any(c.tombstone for c in ev["changes"])


def test_late_events_of_a_declared_stream_are_dead_lettered_with_its_names(both):
    feed(both, [("a", 1, at(0)), ("a", 2, at(40))])
    feed(both, [("a", 3, at(30)), ("b", 4, at(36))])  # 30 < 40 - 5: late; 36 is within grace
    assert kept(both, "vs") == kept(both, "ev")
    assert sessions.stats(both, "vs").late == 1
    letters = both.execute(
        "SELECT source, stream, raw FROM slidewin.dead_letters WHERE reason = 'late' "
        "ORDER BY source").fetchall()
    assert [(src, stream, json.loads(raw)) for src, stream, raw in letters] == [
        ("session:ev", "events", {"uuid": "a", "val": 3, "ts": "2026-01-01T12:00:30+00:00"}),
        ("session:vs", "visits", {"who": "a", "amount": 3, "at_ts": "2026-01-01T12:00:30+00:00"})]
    # the late event is stored all the same, in both tables
    assert both.execute("SELECT count(*) FROM slidewin_streams.visits").fetchone()[0] == 4


def test_sessions_of_a_declared_stream_expire_by_their_retention_in_chunks(sconn):
    declare(sconn)
    sessions.define(sconn, sessions.SessionDef("short", GAP, 0 * S, 30 * S, stream="visits"))
    feed(sconn, [(f"k{i}", 1, at(i * 0.1)) for i in range(5)])
    feed(sconn, [("z", 1, at(40))])  # stream time 40: horizon 10; the five end before it
    assert [sessions.expire(sconn, chunk=2) for _ in range(4)] == [2, 2, 1, 0]
    assert [s.key for s in sessions.sessions(sconn, None, "short")] == ["z"]


def test_removing_a_declared_streams_definition_then_dropping_the_stream(sconn):
    declare(sconn)
    sessions.define(sconn, sessions.SessionDef("vs", GAP, stream="visits"))
    feed(sconn, [("a", 1, at(0)), ("b", 1, at(1))])
    with pytest.raises(ProcedureError, match="stream visits has session windows: vs") as err:
        streams.drop(sconn, "visits")
    assert "slidewin windows remove" in str(err.value)
    assert sconn.execute("SELECT count(*) FROM slidewin_streams.visits").fetchone()[0] == 2
    assert sessions.remove(sconn, "vs", T0)
    assert streams.drop(sconn, "visits") == 2
    # the removed definition of the dropped stream: its sessions and row go by expiry
    assert sessions.expire(sconn, chunk=1) == 1
    assert sessions.expire(sconn, chunk=1) == 1
    assert sessions.expire(sconn, chunk=1) == 0
    assert sconn.execute("SELECT count(*) FROM slidewin.session_defs").fetchone()[0] == 0
    # a stream declared again under the name starts with no session window
    declare(sconn)
    feed(sconn, [("a", 1, at(0))])
    assert sconn.execute("SELECT count(*) FROM slidewin.session_store").fetchone()[0] == 0


def test_a_definition_needs_a_stream_that_is_there(sconn):
    with pytest.raises(ProcedureError, match="no stream named 'nope'"):
        sessions.define(sconn, sessions.SessionDef("vs", GAP, stream="nope"))
    declare(sconn)
    streams.drop(sconn, "visits")
    with pytest.raises(ProcedureError, match="no stream named 'visits'"):
        sessions.define(sconn, sessions.SessionDef("vs", GAP, stream="visits"))
    assert sconn.execute("SELECT count(*) FROM slidewin.session_defs").fetchone()[0] == 0


def test_the_measure_is_a_required_integer_column_or_none(sconn):
    streams.define(sconn, "taps", key="user_id", time="ts", measures=["weight", "clicks"],
                   columns=[Column("user_id", "bigint"), Column("weight", "double"),
                            Column("clicks", "integer", True), Column("note", "text")])
    for measure in ("weight", "note", "user_id", "ts", "missing"):
        with pytest.raises(ProcedureError, match=f"measure '{measure}' is not a required bigint "
                                                 "or integer column of stream taps"):
            sessions.define(sconn, sessions.SessionDef("t", GAP, stream="taps", measure=measure))
    # by default the first measure that is one: clicks (weight is a double)
    sessions.define(sconn, sessions.SessionDef("t", GAP, stream="taps"))
    assert sessions.definition(sconn, "t").definition.measure == "clicks"
    sconn.execute("INSERT INTO slidewin_streams.taps (user_id, weight, clicks, ts) "
                  "VALUES (42, 0.5, 3, %s), (42, 0.5, 4, %s)", (at(0), at(5)))
    [s] = sessions.sessions(sconn, "42", "t")  # an integer key is the session key as text
    assert (s.n, s.total, s.vmin, s.vmax) == (2, 7, 3, 4)


def test_a_stream_without_an_integer_measure_counts_events(sconn):
    streams.define(sconn, "pings", key="host", time="ts", columns=[Column("host", "text")])
    sessions.define(sconn, sessions.SessionDef("p", GAP, stream="pings"))
    assert sessions.definition(sconn, "p").definition.measure is None
    sconn.execute("INSERT INTO slidewin_streams.pings (host, ts) VALUES ('h', %s), ('h', %s), "
                  "('h', %s)", (at(0), at(9), at(30)))
    found = sessions.sessions(sconn, "h", "p")
    assert [(s.n, s.total, s.vmin, s.vmax, s.avg) for s in found] == [
        (2, None, None, None, None), (1, None, None, None, None)]


def test_an_insert_naming_a_partition_keeps_the_sessions_too(both):
    key = both.execute("SELECT k FROM unnest(ARRAY['a', 'b', 'c', 'd', 'e', 'f']) AS k "
                       "WHERE satisfies_hash_partition('slidewin_streams.visits'::regclass, 2, "
                       "0, k) LIMIT 1").fetchone()[0]
    both.execute('INSERT INTO slidewin_streams."visits#0" (who, amount, at_ts) '
                 "VALUES (%s, 5, %s)", (key, at(0)))
    [s] = sessions.sessions(both, key, "vs")
    assert (s.n, s.total) == (1, 5)


def test_db_init_gives_a_stream_declared_before_it_the_session_trigger(both):
    """A store whose streams came before streams had session windows: init adds the trigger."""
    tables = both.execute("SELECT tgrelid::regclass::text FROM pg_trigger "
                          "WHERE tgname = 'sessions_ins' AND tgrelid::regclass::text "
                          "LIKE 'slidewin_streams.%' ORDER BY 1").fetchall()
    assert len(tables) == 3  # the table and its two partitions
    for (table,) in tables:
        both.execute(f"DROP TRIGGER sessions_ins ON {table}")
    init_schema(both)
    feed(both, [("a", 1, at(0))])
    assert kept(both, "vs") == kept(both, "ev")
    assert sessions.sessions(both, "a", "vs")[0].n == 1


def test_following_a_declared_streams_sessions_wakes_on_its_inserts(both, small_store_dsn):
    """The follower listens to the stream's own signal: the events' would never come here."""
    feed(both, [("a", 1, at(0))])
    deadline = time.monotonic() + 20
    found = session_follow.follow(both, session_follow.SessionFollower("vs"),
                                  lambda: time.monotonic() > deadline, 0.2)
    assert next(found).session.n == 1  # the current state first

    def later() -> None:
        time.sleep(0.3)
        with psycopg.connect(small_store_dsn, autocommit=True) as other:
            other.execute("INSERT INTO slidewin_streams.visits (who, amount, at_ts) "
                          "VALUES ('a', 2, %s)", (at(3),))

    writer = threading.Thread(target=later)
    writer.start()
    woke = next(found)  # waits for the stream's insert signal; StopIteration past the deadline
    writer.join()
    assert (woke.session.key, woke.session.n, woke.session.total) == ("a", 2, 3)


def test_a_declared_streams_window_status_is_the_one_events_gives_for_the_same_rows(both):
    """Stream time is the newest second holding events, and an event late only for a session
    window is in the windows, so not counted late -- for events and a declared stream alike."""
    from slidewin.client.answers.windows import completeness

    feed(both, [("a", 1, at(0.25)), ("a", 2, at(40.75))])
    feed(both, [("a", 3, at(30.5))])  # late for both session windows (30.5 < 40.75 - 5)
    assert sessions.stats(both, "vs").late == sessions.stats(both, "ev").late == 1
    got = completeness(both, "visits", at(0), at(60))
    assert got == completeness(both, "events", at(0), at(60))
    assert (got.stream_time, got.late) == (at(40), 0)
