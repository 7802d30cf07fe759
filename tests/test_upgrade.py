"""`slidewin db init` upgrades a store made by an earlier schema version in place, losing nothing.

tests/fixtures/store_v1.sql is a store made by schema version 1 (its header says how): events
with a nibble behind them, rollups, a session window with sessions, a retention job, two
per-query stream states, a batch marker and dead letters. init must apply the migrations
since, keep every row, and leave a store the current code writes and reads as a new one.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pyarrow as pa
import pytest

from slidewin.client.answers import store as answer_store
from slidewin.db import sessions, windows
from slidewin.db.schema import current_version, init_schema, latest_version
from slidewin.ingest.batch import GOOD_SCHEMA
from slidewin.ingest.sink import BatchRows, write_batch
from tests.invariants import assert_rollups_exact
from tests.pgfixture import create_database, drop_database

FIXTURE = Path(__file__).parent / "fixtures" / "store_v1.sql"
V1_T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

# what must survive, table by table (a query each)
KEPT = {
    "events": "SELECT count(*), sum(val) FROM slidewin.events",
    "rollups": "SELECT count(*), sum(n), sum(total) FROM slidewin.rollups",
    "rollups_coarse": "SELECT count(*), sum(n) FROM slidewin.rollups_coarse",
    "retention_state": "SELECT count(*), max(retired_through) FROM slidewin.retention_state",
    "sessions": "SELECT count(*), sum(n), sum(total) FROM slidewin.session_store",
    "session_defs": "SELECT name, gap, grace, retention, stream_ts FROM slidewin.session_defs",
    "dead_letters": "SELECT count(*), string_agg(reason, ',' ORDER BY id) "
                    "FROM slidewin.dead_letters",
    "batches": "SELECT query_id, batch_id, accepted FROM slidewin.ingest_batches",
    "jobs": "SELECT id, next_run_time FROM slidewin.apscheduler_jobs",
    "retention": "SELECT * FROM slidewin.retention_settings",
}


# the built-in stream's window functions that the stream functions replaced (migration 0004)
TWINS = ["hopping_series", "sliding_series", "rollup_pieces", "key_buckets", "rollup_buckets"]


@pytest.fixture
def v1_store(pg_admin_dsn: str) -> Iterator[str]:
    dsn = create_database(pg_admin_dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(FIXTURE.read_text(encoding="utf-8"))
    yield dsn
    drop_database(pg_admin_dsn, dsn)


def snapshot(conn: psycopg.Connection) -> dict[str, list[tuple]]:
    return {name: conn.execute(query).fetchall() for name, query in KEPT.items()}


def test_init_upgrades_a_version_1_store_losing_nothing(v1_store: str) -> None:
    with psycopg.connect(v1_store, autocommit=True) as conn:
        assert current_version(conn) == 1
        before = snapshot(conn)
        assert before["events"][0][0] == 286 and before["sessions"][0][0] == 7
        report = init_schema(conn)
        assert report.applied_migrations == ("migrations/0002_stream_state_per_stream.sql",
                                             "migrations/0003_dead_letters_name_their_stream.sql",
                                             "migrations/0004_one_window_family.sql")
        assert current_version(conn) == latest_version()
        assert snapshot(conn) == before
        assert_rollups_exact(conn)
        # the two per-query states became the stream's one: newest of both, the watermark the
        # windows were read against before (newest - grace of the one ahead), the larger grace
        state = conn.execute(
            "SELECT stream, newest_ts, grace, watermark FROM slidewin.stream_state").fetchall()
        assert state == [("events", V1_T0 + timedelta(seconds=210), timedelta(seconds=30),
                          V1_T0 + timedelta(seconds=205))]
        assert windows.status(conn, V1_T0, V1_T0).complete_up_to == V1_T0 + timedelta(seconds=205)
        again = init_schema(conn)
        assert again.applied_migrations == () and snapshot(conn) == before
        # the upgraded store knows its streams: the built-in one, and can declare more
        assert conn.execute("SELECT name, builtin FROM slidewin.streams").fetchall() == [
            ("events", True)]
        # every old dead letter is the built-in stream's, and named so: read as events' by
        # the one rule every reader has, whatever the stream (db dead-letters, the API, the
        # dashboard, the windows' late count)
        dead = conn.execute("SELECT count(*), count(*) FILTER (WHERE stream = 'events') "
                            "FROM slidewin.dead_letters").fetchone()
        assert dead[0] == 2 and dead[1] == 2
        page = answer_store.dead_letters(conn, stream="events")
        assert [(d["stream"], d["reason"]) for d in page.letters] == [
            ("events", "malformed"), ("events", "late")]
        assert answer_store.dead_letters(conn, stream="events", reason="late").letters
        assert windows.status(conn, datetime(2026, 1, 1, 11, tzinfo=UTC),
                              datetime(2026, 1, 1, 11, 1, tzinfo=UTC)).late == 1
        with pytest.raises(psycopg.errors.NotNullViolation):
            conn.execute("INSERT INTO slidewin.dead_letters (source, reason, raw) "
                         "VALUES ('x', 'malformed', 'x')")
        # the old session window is events', over its measure val
        assert conn.execute("SELECT stream, measure FROM slidewin.session_defs").fetchall() == [
            ("events", "val")]
        # one key_index, taking the stream now: the old one-argument call is events' still
        assert conn.execute("SELECT pg_get_function_arguments(oid) FROM pg_proc "
                            "WHERE proname = 'key_index'").fetchall() == [
            ("p_on boolean DEFAULT NULL::boolean, p_stream text DEFAULT 'events'::text",)]
        assert conn.execute("SELECT slidewin.key_index(true), slidewin.key_index(NULL, "
                            "'events'), slidewin.key_index(false)").fetchone() == (
            True, True, False)
        # one count_windows, taking a key now: the old three-argument call answers as before
        # one family of window functions: the built-in stream's twins are gone, its windows
        # the stream functions' under the names it had
        assert conn.execute("SELECT proname FROM pg_proc WHERE proname = ANY(%s)", (TWINS,)
                            ).fetchall() == []
        assert windows.hopping(conn, timedelta(seconds=60), timedelta(seconds=10), V1_T0,
                               V1_T0 + timedelta(minutes=5)) != []
        assert conn.execute("SELECT pg_get_function_arguments(oid) FROM pg_proc "
                            "WHERE proname = 'count_windows'").fetchall() == [
            ("p_size integer, p_advance integer DEFAULT NULL::integer, p_rows integer DEFAULT "
             "NULL::integer, p_key text DEFAULT NULL::text",)]
        newest = conn.execute("SELECT n, total FROM slidewin.count_windows(10, 10, 10)").fetchall()
        assert [r[0] for r in newest] == [10]
        [key] = conn.execute("SELECT uuid FROM slidewin.events ORDER BY ts DESC, uuid DESC "
                             "LIMIT 1").fetchone()
        conn.execute("SELECT slidewin.key_index(true)")  # a key's count windows read it
        assert conn.execute("SELECT n FROM slidewin.count_windows(1, 1, 1, %s)",
                            (key,)).fetchall() == [(1,)]
        conn.execute("SELECT slidewin.key_index(false)")


def test_the_upgraded_store_is_written_and_read_as_a_new_one(v1_store: str) -> None:
    with psycopg.connect(v1_store, autocommit=True) as conn:
        init_schema(conn)
        part = conn.execute("SELECT slidewin.partition_of('k1')").fetchone()[0]
        good = pa.Table.from_pylist(
            [{"part": part, "uuid": "k1", "val": 5, "ts": V1_T0 + timedelta(seconds=212),
              "copies": 1}],
            schema=GOOD_SCHEMA,
        )
        empty = pa.table({c: pa.array([], pa.string()) for c in ("source", "reason", "detail",
                                                                  "raw")})
        result = write_batch(conn, "ingest/text/new", "events", 0,
                             lambda _state: BatchRows(good, empty), grace=timedelta(seconds=5))
        assert result.accepted == 1
        assert_rollups_exact(conn)
        [visit] = [s for s in sessions.sessions(conn, "k1") if s.end == good["ts"][0].as_py()]
        assert visit.n >= 1
        assert windows.status(conn, V1_T0, V1_T0).complete_up_to == V1_T0 + timedelta(seconds=207)


# -- a store of schema version 2 with joins -----------------------------------------------------

V2_JOINS = Path(__file__).parent / "fixtures" / "store_v2_joins.sql"
JOINS_KEPT = {
    "joins": "SELECT name, kind, join_type, left_stream, right_stream, before, after, grace, "
             "n_rows, watermark, pairs, left_only, late_left, late_right FROM slidewin.joins "
             "ORDER BY name",
    "paid": "SELECT l_id, r_id, ts FROM slidewin_joins.paid ORDER BY seq",
    "streams": "SELECT name, history, grace FROM slidewin.streams ORDER BY name",
}


def answers(conn: psycopg.Connection) -> dict[str, list[tuple]]:
    """Every join's answers as join_show reads them, final flags included."""
    return {name: conn.execute(
        "SELECT ts, l->>'id', r->>'id', final FROM slidewin.join_show(%s, '-infinity', "
        "'infinity', NULL) ORDER BY ts, 2, 3", (name,)).fetchall()
        for (name,) in conn.execute("SELECT name FROM slidewin.joins ORDER BY name")}


@pytest.fixture
def v2_store(pg_admin_dsn: str) -> Iterator[str]:
    dsn = create_database(pg_admin_dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(V2_JOINS.read_text(encoding="utf-8"))
    yield dsn
    drop_database(pg_admin_dsn, dsn)


def test_init_keeps_a_version_2_stores_joins_and_their_answers(v2_store: str) -> None:
    """The joins defined before as-of --within and tables existed answer as they did: no age
    bound, no table, the interval join's stored results and counts as they were."""
    with psycopg.connect(v2_store, autocommit=True) as conn:
        assert current_version(conn) == 2
        kept = {name: conn.execute(q).fetchall() for name, q in JOINS_KEPT.items()}
        before = answers(conn)
        assert len(before["priced"]) == 4 and len(kept["paid"]) == 3
        init_schema(conn)
        assert {name: conn.execute(q).fetchall() for name, q in JOINS_KEPT.items()} == kept
        assert answers(conn) == before
        assert conn.execute("SELECT name, within, right_table FROM slidewin.joins "
                            "ORDER BY name").fetchall() == [
            ("last2", None, False), ("paid", None, False), ("priced", None, False)]
        assert conn.execute("SELECT bool_or(is_table) FROM slidewin.streams").fetchone() == (
            False,)
        # one define function each (the one before is gone: no call is ambiguous), and what
        # they take now works on the upgraded store
        for fn in ("join_define", "stream_define"):
            assert conn.execute("SELECT count(*) FROM pg_proc WHERE proname = %s",
                                (fn,)).fetchone() == (1,)
        conn.execute("SELECT slidewin.stream_define('rates', 'id', 'ts', "
                     "'[{\"name\": \"id\"}, {\"name\": \"k\"}]', p_is_table => true)")
        conn.execute("INSERT INTO slidewin_streams.rates (id, k, ts) VALUES ('r1', 'a', %s)",
                     (V1_T0,))
        conn.execute("SELECT slidewin.ingest_advance('rates', %s, %s, '0s')", (V1_T0, V1_T0))
        conn.execute("SELECT slidewin.join_define('rated', 'orders', 'rates', 'k', "
                     "p_kind => 'asof', p_join_type => 'left', p_within => '5 s')")
        rated = conn.execute("SELECT l->>'id', r->>'id', final FROM slidewin.join_show("
                             "'rated', '-infinity', 'infinity', NULL) ORDER BY ts").fetchall()
        # orders' watermark is 20 s: each order before it is final, o3 (20 s) not yet; o2
        # (11 s) is past the 5 s bound
        assert rated == [("o1", "r1", True), ("o4", None, True), ("o2", None, True),
                         ("o3", None, False)]
        assert init_schema(conn).applied_migrations == ()
        assert conn.execute("SELECT proname FROM pg_proc WHERE proname = ANY(%s)", (TWINS,)
                            ).fetchall() == []
        # a row limit for a stream declared before there was one: none until it is given
        assert conn.execute("SELECT count(max_rows) FROM slidewin.streams").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM pg_proc WHERE proname = 'stream_define'"
                            ).fetchone() == (1,)
        conn.execute("SELECT slidewin.stream_define('readings', 'id', 'ts', "
                     "'[{\"name\": \"id\"}]', p_max_rows => 2)")
        conn.execute("INSERT INTO slidewin_streams.readings (id, ts) SELECT 'r' || g, "
                     "%s + g * interval '1 s' FROM generate_series(1, 5) g", (V1_T0,))
        assert conn.execute("SELECT slidewin.stream_nibble('readings', %s, 2)",
                            (V1_T0,)).fetchone() == (2,)
        assert conn.execute("SELECT slidewin.stream_nibble('readings', %s, 2)",
                            (V1_T0,)).fetchone() == (1,)
        assert conn.execute("SELECT array_agg(id ORDER BY ts) FROM slidewin_streams.readings"
                            ).fetchone() == (["r4", "r5"],)
