"""Session windows per key on drawn timelines (Kafka's KIP-94 semantics). Key a (and b, c) in a
3-partition store; T0 = 2026-01-01 12:00:00 UTC; gap 10 s, grace 5 s unless a test says.
Each ``put`` is one transaction, judged against the stream time committed before it: an event
older than that minus grace is late for the definition.

    t (s after T0)    0    4    14     24.000001     40      ...
    a                 x    x    x  (4..14 is exactly the gap: joins)
                                       x  (14..24.000001: more than the gap: a new session)
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from slidewin.db import sessions
from slidewin.db.errors import ConfigError, ProcedureError
from slidewin.db.events import Event, insert_events
from tests import store_fixtures
from tests.conftest import CLEAN_SQL as CLEAN
from tests.conftest import T0
from tests.store_fixtures import PARTS, at, put

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn

S = timedelta(seconds=1)
GAP = 10 * S


@pytest.fixture
def clicks(sconn):
    sessions.define(sconn, sessions.SessionDef("clicks", GAP, 5 * S, timedelta(minutes=10)))
    return sconn


@pytest.fixture
def relaxed(sconn):
    """gap 10 s, grace 60 s: events up to a minute out of order still count."""
    sessions.define(sconn, sessions.SessionDef("relaxed", GAP, 60 * S, timedelta(minutes=10)))
    return sconn


def spans(conn, key="a"):
    """(start s, end s, n, sum) of a key's sessions, in start order."""
    return [
        ((s.start - T0) / S, (s.end - T0) / S, s.n, int(s.total))
        for s in sessions.sessions(conn, key)
    ]


def late_letters(conn):
    return conn.execute(
        "SELECT source, raw FROM slidewin.dead_letters WHERE reason = 'late' ORDER BY event_ts"
    ).fetchall()


def test_one_session_is_first_to_last_event_with_its_aggregates(clicks):
    put(clicks, [("a", 3, at(0)), ("a", 5, at(4)), ("a", -1, at(9))])
    [s] = sessions.sessions(clicks, "a")
    assert (s.start, s.end, s.n, s.total, s.vmin, s.vmax) == (at(0), at(9), 3, 7, -1, 5)
    assert float(s.avg) == pytest.approx(7 / 3)
    assert s.length == 9 * S


def test_other_keys_do_not_join(clicks):
    put(clicks, [("a", 1, at(0)), ("b", 1, at(1)), ("a", 1, at(2)), ("c", 1, at(3))])
    assert spans(clicks, "a") == [(0, 2, 2, 2)]
    assert spans(clicks, "b") == [(1, 1, 1, 1)]
    assert len(sessions.sessions(clicks, None)) == 3


def test_events_at_the_same_time_of_different_keys_and_one_key(clicks):
    put(clicks, [("a", 1, at(5)), ("b", 2, at(5))])
    put(clicks, [("a", 1, at(5))])  # the same (uuid, ts): a duplicate, changes nothing
    assert spans(clicks, "a") == [(5, 5, 1, 1)]
    assert spans(clicks, "b") == [(5, 5, 1, 2)]


def test_exactly_the_gap_apart_joins_and_a_microsecond_more_splits(clicks):
    #   a: 0 ........ 10 (exactly gap: joins) ........ 20.000001 (gap + 1 us: new session)
    put(clicks, [("a", 1, at(0))])
    put(clicks, [("a", 1, at(10))])
    put(clicks, [("a", 1, at(20.000001))])
    assert spans(clicks, "a") == [(0, 10, 2, 2), (20.000001, 20.000001, 1, 1)]


def test_the_same_within_one_batch(clicks):
    put(clicks, [("a", 1, at(0)), ("a", 1, at(10)), ("a", 1, at(20.000001))])
    assert spans(clicks, "a") == [(0, 10, 2, 2), (20.000001, 20.000001, 1, 1)]


def test_an_out_of_order_event_between_two_sessions_bridges_them(relaxed):
    #   a: [0 .. 4]            [18 .. 20]
    #                 12  <- within 10 s of 4 and of 18: one session [0, 20]
    put(relaxed, [("a", 1, at(0)), ("a", 2, at(4)), ("a", 3, at(18)), ("a", 4, at(20))])
    assert spans(relaxed, "a") == [(0, 4, 2, 3), (18, 20, 2, 7)]
    put(relaxed, [("a", 10, at(12))])
    assert spans(relaxed, "a") == [(0, 20, 5, 20)]
    assert sessions.stats(relaxed).merges == 1
    changes = sessions.changes(relaxed, "relaxed", 1)
    tomb = [c for c in changes if c.tombstone]
    assert [(c.session.start, c.merged_start) for c in tomb] == [(at(18), at(0))]
    assert [(c.session.start, c.session.end) for c in changes if not c.tombstone] == [
        (at(0), at(20))
    ]


def test_a_batch_bridges_three_sessions_from_both_sides(relaxed):
    put(relaxed, [("a", 1, at(0)), ("a", 1, at(20)), ("a", 1, at(40))])
    assert len(spans(relaxed)) == 3
    put(relaxed, [("a", 1, at(-8)), ("a", 1, at(10)), ("a", 1, at(30)), ("a", 1, at(49))])
    assert spans(relaxed) == [(-8, 49, 7, 7)]
    assert sessions.stats(relaxed).merges == 2


def test_events_older_than_stream_time_minus_grace_are_late_and_stored(clicks):
    #   b: 40 -> stream time 40, grace 5: events before 35 are late for clicks
    #   a: 3, 34.999999 late (dead-lettered, still stored); 35 (exactly grace) counts
    put(clicks, [("a", 1, at(0)), ("b", 1, at(40))])
    put(clicks, [("a", 7, at(3))])
    put(clicks, [("a", 8, at(34.999999)), ("a", 9, at(35))])
    assert spans(clicks, "a") == [(0, 0, 1, 1), (35, 35, 1, 9)]
    letters = late_letters(clicks)
    assert [src for src, _ in letters] == ["session:clicks", "session:clicks"]
    assert '"val" : 7' in letters[0][1] and '"val" : 8' in letters[1][1]
    detail = clicks.execute(
        "SELECT detail FROM slidewin.dead_letters WHERE reason = 'late' ORDER BY event_ts"
    ).fetchone()[0]
    assert detail.startswith("late for session window clicks: ts 2026-01-01 12:00:03")
    assert "minus grace 00:00:05" in detail
    stored = clicks.execute("SELECT count(*) FROM slidewin.events WHERE uuid = 'a'").fetchone()
    assert stored == (4,)
    assert sessions.stats(clicks).late == 2


def test_within_grace_an_out_of_order_event_still_updates_its_session(clicks):
    #   a: [0 .. 5]; stream time 19: close = 19 - 15 = 4 <= 5, the session is still open;
    #   a at 14 (19 - grace 5): on time, 9 s after 5: joins -> [0, 14]
    put(clicks, [("a", 1, at(0)), ("a", 1, at(5)), ("b", 1, at(19))])
    assert not sessions.sessions(clicks, "a")[0].final
    put(clicks, [("a", 5, at(14))])
    assert spans(clicks, "a") == [(0, 14, 3, 7)]
    put(clicks, [("b", 1, at(29.5))])  # close 14.5 > 14: now final
    assert sessions.sessions(clicks, "a")[0].final
    assert late_letters(clicks) == []


def test_a_final_session_is_never_changed_by_a_bridging_event(clicks):
    #   a: [0]  final once stream time passes 15 (0 < stream - 10 - 5)
    #   a: [18 .. 19]  an open session 18 s later
    #   a: 9 would bridge them into [0, 19]; it is 10 s older than stream time 19 > grace: late
    put(clicks, [("a", 1, at(0)), ("b", 1, at(16))])
    [first] = sessions.closed(clicks, "clicks", None)
    assert (first.key, first.end) == ("a", at(0))
    put(clicks, [("a", 1, at(18)), ("a", 1, at(19))])
    put(clicks, [("a", 5, at(9))])
    assert spans(clicks, "a") == [(0, 0, 1, 1), (18, 19, 2, 2)]
    assert [raw for _, raw in late_letters(clicks)] and sessions.stats(clicks).merges == 0


def test_what_is_late_does_not_depend_on_how_a_batch_is_cut(sconn):
    #   stream time 100, gap 10, grace 0; one batch: a at 85 and a at 95 (10 apart: one
    #   session if both count). Whether written as one statement or two, in either order,
    #   the result is the same.
    def run(chunks):
        sconn.execute(CLEAN)
        sessions.define(sconn, sessions.SessionDef("g", GAP, 0 * S, timedelta(minutes=10)))
        put(sconn, [("z", 1, at(100))])
        with sconn.transaction():
            for chunk in chunks:
                insert_events(sconn, [Event("a", 1, at(t)) for t in chunk], PARTS)
        return spans(sconn, "a"), sessions.stats(sconn).late

    assert run([[85, 95]]) == run([[85], [95]]) == run([[95], [85]])


def test_a_batch_is_judged_against_the_stream_time_before_it(clicks):
    # one batch: a at 0 and b at 100 -- a is not late, stream time was unknown before
    put(clicks, [("a", 1, at(0)), ("b", 1, at(100))])
    assert spans(clicks, "a") == [(0, 0, 1, 1)]


def test_sessions_expire_by_their_own_retention_in_chunks(sconn):
    sessions.define(sconn, sessions.SessionDef("short", GAP, 0 * S, 30 * S))
    put(sconn, [(f"k{i}", 1, at(i * 0.1)) for i in range(5)])
    put(sconn, [("z", 1, at(40))])  # stream time 40: horizon 10; the five end before it
    assert sessions.expire(sconn, chunk=2) == 2
    assert sessions.expire(sconn, chunk=2) == 2
    assert sessions.expire(sconn, chunk=2) == 1
    assert sessions.expire(sconn, chunk=2) == 0
    assert [s.key for s in sessions.sessions(sconn, None)] == ["z"]
    # the raw rows are the nibbles' business: all still here
    assert sconn.execute("SELECT count(*) FROM slidewin.events").fetchone()[0] == 6


def test_removing_a_definition_hides_its_sessions_and_expiry_deletes_them(clicks):
    put(clicks, [("a", 1, at(0)), ("b", 1, at(1))])
    assert sessions.remove(clicks, "clicks", T0)
    assert not sessions.remove(clicks, "clicks", T0)
    with pytest.raises(ProcedureError, match="no session window is defined"):
        sessions.sessions(clicks, "a")
    assert sessions.expire(clicks, chunk=1) == 1
    assert sessions.expire(clicks, chunk=1) == 1
    assert sessions.expire(clicks, chunk=1) == 0
    assert clicks.execute("SELECT count(*) FROM slidewin.session_defs").fetchone()[0] == 0
    # the name can be used again
    sessions.define(clicks, sessions.SessionDef("clicks", GAP))


def test_no_definition_no_sessions(sconn):
    put(sconn, [("a", 1, at(0))])
    assert sconn.execute("SELECT count(*) FROM slidewin.session_store").fetchone()[0] == 0


def test_two_definitions_keep_their_own_sessions(clicks):
    sessions.define(clicks, sessions.SessionDef("long", 60 * S, 0 * S, timedelta(hours=1)))
    put(clicks, [("a", 1, at(0)), ("a", 1, at(30))])
    assert [(s.start, s.end) for s in sessions.sessions(clicks, "a", "clicks")] == [
        (at(0), at(0)), (at(30), at(30))]
    assert [(s.start, s.end) for s in sessions.sessions(clicks, "a", "long")] == [
        (at(0), at(30))]
    with pytest.raises(ProcedureError, match="there are 2 session windows"):
        sessions.sessions(clicks, "a")


def test_closed_sessions_come_once_in_end_order(clicks):
    put(clicks, [("a", 1, at(0)), ("b", 1, at(3)), ("a", 1, at(12))])  # close -3: none final
    assert sessions.closed(clicks, "clicks", None) == []
    put(clicks, [("c", 1, at(30))])  # close 15: a [0], b [3] and a [12] are final
    first = sessions.closed(clicks, "clicks", None)
    assert [(s.key, s.end) for s in first] == [("a", at(0)), ("b", at(3)), ("a", at(12))]
    assert sessions.closed(clicks, "clicks", (first[-1].end, first[-1].key)) == []


def test_the_longest_session_is_kept(clicks):
    put(clicks, [("a", 1, at(0)), ("a", 1, at(8)), ("b", 1, at(1)), ("b", 1, at(3))])
    stats = sessions.stats(clicks)
    assert (stats.longest_key, stats.longest, stats.open) == ("a", 8 * S, 2)


def test_of_sessions_equally_long_the_longest_is_the_smallest_key_and_start(sconn):
    """Whatever the statements the events come in, and in whatever order: sessions of 2 s of
    b (at 100 and 200) and of a (at 300), each alone or all at once, name a's; and b's two of 0 s
    in one statement name the one at 100, as two statements of its events do."""
    def longest(chunks):
        sconn.execute(CLEAN)
        sessions.define(sconn, sessions.SessionDef("g", GAP, 1000 * S, timedelta(hours=1)))
        with sconn.transaction():
            for chunk in chunks:
                insert_events(sconn, [Event(k, 1, at(t)) for k, t in chunk], PARTS)
        stats = sessions.stats(sconn)
        return stats.longest_key, (stats.longest_start - T0) / S, stats.longest

    b1, b2, a = [("b", 100), ("b", 102)], [("b", 200), ("b", 202)], [("a", 300), ("a", 302)]
    assert longest([b1, b2, a]) == longest([a, b2, b1]) == longest([b2 + a + b1]) == \
        ("a", 300, 2 * S)
    assert longest([[("b", 200), ("b", 100)]]) == longest([[("b", 200)], [("b", 100)]]) == \
        ("b", 100, 0 * S)


@pytest.mark.parametrize(
    ("gap", "grace", "retention", "message"),
    [
        (0, 0, 60, "--gap 0s must be more than 0"),
        (10, -1, 60, "--grace -1s must be 0 or more"),
        (10, 5, 14, "--retention 14s is shorter than --gap plus --grace .15s.: use --retenti"),
    ],
)
def test_definitions_are_validated_naming_the_option(gap, grace, retention, message):
    with pytest.raises(ConfigError, match=message):
        sessions.SessionDef("x", gap * S, grace * S, retention * S)


def test_the_store_refuses_what_python_would(sconn):
    with pytest.raises(ProcedureError, match="retention 00:00:14 is shorter"):
        sconn.execute("SELECT 1")  # the connection works
        with sessions.session_errors():
            sconn.execute("SELECT slidewin.session_define('x', '10s', '5s', '14s')")
    sessions.define(sconn, sessions.SessionDef("x", GAP))
    with pytest.raises(ProcedureError, match="named x exists already"):
        sessions.define(sconn, sessions.SessionDef("x", GAP))
    with pytest.raises(ConfigError, match="NAME 'X y'"):
        sessions.SessionDef("X y", GAP)


def test_many_islands_are_merged_in_bounded_calls_and_reported(sconn):
    """45,000 keys seen once each: one statement, three calls of at most 20,000 islands (each
    a version); about one event per session, which `warnings` reports with the fix."""
    sessions.define(sconn, sessions.SessionDef("once", GAP, 0 * S, timedelta(minutes=10)))
    put(sconn, [(f"key{i:05d}", 1, at(i / 1000)) for i in range(45_000)])
    version = sconn.execute("SELECT version FROM slidewin.session_defs").fetchone()[0]
    assert version == 3
    stats = sessions.stats(sconn, "once")
    assert (stats.events, stats.created, stats.events_per_session) == (45_000, 45_000, 1.0)
    assert stats.apply_seconds > 0
    [warning] = sessions.warnings(sconn)
    assert warning.startswith("session window once: 1.00 events per session -- its keys rarely")
    assert "slidewin windows remove once" in warning
