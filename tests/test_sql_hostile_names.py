"""Hostile names through every statement the procedures build with format() for EXECUTE.

A name a user gives -- a stream, its key, time and other columns, a column's type, a measure,
a join and the columns it carries -- reaches DDL and queries only as format('%I') (types: only
from stream_type's list; values: bound as $n). Here each name argument of the public SQL
functions gets names made to break out of an identifier or a literal (quotes, semicolons,
comments, new lines, format's own %), names a psql user could not type unquoted (upper case,
spaces, unicode, a leading digit, too long), and the empty name. Each call must be refused
cleanly -- invalid_parameter_value from the name rules, or undefined_object for a name that
names nothing -- and leave the catalog exactly as it was (the canary table still there). The
same call with a good name succeeds (in a rolled-back transaction), so the refusal is the name's.

A key *value* is data, not a name: the hostile strings are stored and read back as they are.

And names the rules do allow but SQL reserves (``select``, ``order``, ``from``, ``limit``,
``table``, ``union``) make objects with exactly those names, through every DDL and query path:
define, the key index, alter, insert, windows, session windows, a join's results, nibble, drop.

Sites no user's name reaches are left out: partition upkeep (ensure_partitions, nibble,
attach_rollup_triggers and attach_session_trigger take partition numbers or a regclass,
refresh_minute_history nothing), the counters' triggers (the store's own tables), and
grant_roles/create_roles (role names are cluster-wide; tests/test_roles.py owns them). The
statement triggers of streams and joins run the SQL stored at definition, which the key-value
and reserved-word tests here fire.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta

import psycopg
import pytest

from tests.conftest import T0

HOSTILE = [
    'x"; DROP TABLE public.canary; --',
    "x'; DROP TABLE public.canary; --",
    "x); DROP TABLE public.canary; --",
    "x\nDROP TABLE public.canary",
    "x /* c */",
    "%I%s%L",
    "$1",
    "Upper",
    "with space",
    "semi;colon",
    "ünïcode",
    "1lead",
    "a" * 64,
    "",
]
CLEAN_REFUSALS = {"22023", "42704"}  # invalid_parameter_value, undefined_object
# join_define's own helpers, called by it with checked names only: called directly, the name is
# quoted into the statement and PostgreSQL finds no such column or table -- or, for the empty
# name, refuses the empty quoted identifier "" (join_index does not check its column's name)
HELPERS = {"join_index column": {"42703", "42601"}, "join_triggers": {"42P01"}}
PARAMS = {"t0": T0, "t1": T0 + timedelta(minutes=1)}
ONE_COLUMN = "jsonb_build_array(jsonb_build_object('name', 'k'))"


def column(name: str = "'m'", type_: str = "'bigint'") -> str:
    return (f"jsonb_build_array(jsonb_build_object('name', 'k'), "
            f"jsonb_build_object('name', {name}, 'type', {type_}))")


# each slot: a call with %(h)s where the name goes, and a good name for that place
SLOTS: dict[str, tuple[str, str]] = {
    "stream_define name": (f"SELECT slidewin.stream_define(%(h)s, 'k', 'ts', {ONE_COLUMN})",
                           "fresh"),
    "stream_define key": ("SELECT slidewin.stream_define('fresh', %(h)s, 'ts', "
                          "jsonb_build_array(jsonb_build_object('name', %(h)s::text)))", "kk"),
    "stream_define time": (f"SELECT slidewin.stream_define('fresh', 'k', %(h)s, {ONE_COLUMN})",
                           "tt"),
    "stream_define column": (f"SELECT slidewin.stream_define('fresh', 'k', 'ts', "
                             f"{column(name='%(h)s::text')})", "m"),
    "stream_define type": (f"SELECT slidewin.stream_define('fresh', 'k', 'ts', "
                           f"{column(type_='%(h)s::text')})", "bigint"),
    "stream_define measure": (f"SELECT slidewin.stream_define('fresh', 'k', 'ts', {column()}, "
                              "ARRAY[%(h)s])", "m"),
    "stream_add_column stream": ("SELECT slidewin.stream_add_column(%(h)s, 'c', 'bigint')",
                                 "sensors"),
    "stream_add_column column": ("SELECT slidewin.stream_add_column('sensors', %(h)s, 'bigint')",
                                 "c"),
    "stream_add_column type": ("SELECT slidewin.stream_add_column('sensors', 'c', %(h)s)",
                               "bigint"),
    "stream_add_measure stream": ("SELECT slidewin.stream_add_measure(%(h)s, 'extra')",
                                  "sensors"),
    "stream_add_measure column": ("SELECT slidewin.stream_add_measure('sensors', %(h)s)",
                                  "extra"),
    "stream_drop": ("SELECT slidewin.stream_drop(%(h)s)", "spare"),
    "stream_buckets stream": ("SELECT * FROM slidewin.stream_buckets(%(h)s, 'v', 10, %(t0)s, "
                              "%(t1)s)", "sensors"),
    "stream_buckets measure": ("SELECT * FROM slidewin.stream_buckets('sensors', %(h)s, 10, "
                               "%(t0)s, %(t1)s)", "v"),
    "stream_pieces measure": ("SELECT * FROM slidewin.stream_pieces('sensors', %(h)s, "
                              "ARRAY[%(t0)s, %(t1)s]::timestamptz[])", "v"),
    "stream_sliding measure": ("SELECT * FROM slidewin.stream_sliding('sensors', %(h)s, "
                               "'10 s', %(t0)s, %(t1)s)", "v"),
    "stream_tumbling measure": ("SELECT * FROM slidewin.stream_tumbling('sensors', %(h)s, "
                                "'10 s', %(t0)s, %(t1)s)", "v"),
    "stream_hopping measure": ("SELECT * FROM slidewin.stream_hopping('sensors', %(h)s, '10 s', "
                               "'5 s', %(t0)s, %(t1)s)", "v"),
    "stream_hopping_series measure": ("SELECT * FROM slidewin.stream_hopping_series('sensors', "
                                      "%(h)s, 10, 5, %(t0)s, %(t1)s)", "v"),
    "stream_summary measure": ("SELECT * FROM slidewin.stream_summary('sensors', %(h)s, "
                               "%(t0)s, %(t1)s)", "v"),
    "stream_count_windows stream": ("SELECT * FROM slidewin.stream_count_windows(%(h)s, 'v', "
                                    "4, 2, 10)", "sensors"),
    "stream_count_windows measure": ("SELECT * FROM slidewin.stream_count_windows('sensors', "
                                     "%(h)s, 4, 2, 10)", "v"),
    "stream_window_state": ("SELECT * FROM slidewin.stream_window_state(%(h)s, 10, 5)",
                            "sensors"),
    "stream_nibble": ("SELECT slidewin.stream_nibble(%(h)s, %(t1)s, 10)", "sensors"),
    "session_define stream": ("SELECT slidewin.session_define('fresh_s', '10 s', "
                              "p_stream => %(h)s)", "sensors"),
    "session_define measure": ("SELECT slidewin.session_define('fresh_s', '10 s', "
                               "p_measure => %(h)s)", "val"),
    "session_triggers": ("SELECT slidewin.session_triggers(%(h)s)", "sensors"),
    "join_define name": ("SELECT slidewin.join_define(%(h)s, 'sensors', 'parcels', 'k')",
                         "fresh_j"),
    "join_define left": ("SELECT slidewin.join_define('fresh_j', %(h)s, 'parcels', 'k')",
                         "sensors"),
    "join_define right": ("SELECT slidewin.join_define('fresh_j', 'sensors', %(h)s, 'k')",
                          "parcels"),
    "join_define on": ("SELECT slidewin.join_define('fresh_j', 'sensors', 'parcels', %(h)s)",
                       "k"),
    "join_define right on": ("SELECT slidewin.join_define('fresh_j', 'sensors', 'parcels', 'k', "
                             "%(h)s)", "k"),
    "join_define select_left": ("SELECT slidewin.join_define('fresh_j', 'sensors', 'parcels', "
                                "'k', p_select_left => ARRAY[%(h)s])", "v"),
    "join_define select_right": ("SELECT slidewin.join_define('fresh_j', 'sensors', 'parcels', "
                                 "'k', p_select_right => ARRAY[%(h)s])", "p"),
    "join_show": ("SELECT * FROM slidewin.join_show(%(h)s, %(t0)s, %(t1)s)", "sp"),
    "join_since": ("SELECT * FROM slidewin.join_since(%(h)s, 0)", "sp"),
    "join_exact": ("SELECT * FROM slidewin.join_exact(%(h)s, %(t0)s, %(t1)s)", "sp"),
    "join_status": ("SELECT * FROM slidewin.join_status(%(h)s)", "sp"),
    "join_nibble": ("SELECT slidewin.join_nibble(%(h)s, %(t1)s, 10)", "sp"),
    "join_advance": ("SELECT slidewin.join_advance(%(h)s, %(t1)s)", "sp"),
    "join_backfill": ("SELECT slidewin.join_backfill(%(h)s, %(t1)s)", "sp"),
    "join_drop": ("SELECT slidewin.join_drop(%(h)s)", "sp"),
    "key_index stream": ("SELECT slidewin.key_index(true, %(h)s)", "sensors"),
    "key_index_status": ("SELECT * FROM slidewin.key_index_status(%(h)s)", "sensors"),
    "key_index_name": ("SELECT * FROM slidewin.key_index_name(%(h)s)", "sensors"),
    "join_index stream": ("SELECT slidewin.join_index(%(h)s, 'k')", "sensors"),
    "join_index column": ("SELECT slidewin.join_index('sensors', %(h)s)", "w"),
    "join_triggers": ("SELECT slidewin.join_triggers(%(h)s)", "sensors"),
}

# key values: data, bound as values wherever they go
VALUES: dict[str, str] = {
    "stream_buckets key": "SELECT * FROM slidewin.stream_buckets('sensors', 'v', 10, %(t0)s, "
                          "%(t1)s, %(h)s)",
    "stream_sliding key": "SELECT * FROM slidewin.stream_sliding('sensors', 'v', '10 s', %(t0)s, "
                          "%(t1)s, %(h)s)",
    "stream_summary key": "SELECT * FROM slidewin.stream_summary('sensors', 'v', %(t0)s, "
                          "%(t1)s, %(h)s)",
    "stream_count_windows key": "SELECT * FROM slidewin.stream_count_windows('sensors', 'v', 4, "
                                "2, 10, %(h)s)",
}

CATALOG = """
SELECT 'relation', n.nspname, c.relname, c.relkind::text FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%'
UNION ALL
SELECT 'function', n.nspname, p.oid::regprocedure::text, p.prokind::text FROM pg_proc p
  JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
UNION ALL
SELECT 'trigger', t.tgrelid::regclass::text, t.tgname, t.tgenabled::text FROM pg_trigger t
 WHERE NOT t.tgisinternal
UNION ALL
SELECT 'schema', nspname, '', '' FROM pg_namespace
"""


def catalog(conn: psycopg.Connection) -> set[tuple[str, ...]]:
    return set(conn.execute(CATALOG).fetchall())


@pytest.fixture(scope="module")
def hconn(make_store: Callable[..., str]) -> Iterator[psycopg.Connection]:
    """A store of its own with two declared streams, a join of them, and a canary table."""
    with psycopg.connect(make_store(3), autocommit=True) as conn:
        conn.execute("CREATE TABLE public.canary (x int)")
        conn.execute("SELECT slidewin.stream_define('sensors', 'k', 'ts', "
                      "'[{\"name\": \"k\"}, {\"name\": \"v\", \"type\": \"double\"}, "
                      "{\"name\": \"w\", \"type\": \"bigint\"}, "
                      "{\"name\": \"extra\", \"type\": \"bigint\"}]', ARRAY['v', 'w'])")
        conn.execute("SELECT slidewin.stream_define('parcels', 'p', 'ts', "
                     "'[{\"name\": \"p\"}, {\"name\": \"k\"}]')")
        conn.execute(f"SELECT slidewin.stream_define('spare', 'k', 'ts', {ONE_COLUMN})")
        conn.execute("SELECT slidewin.join_define('sp', 'sensors', 'parcels', 'k', "
                     "p_before => '5 s', p_after => '5 s')")
        yield conn


@pytest.mark.parametrize("slot", sorted(SLOTS))
def test_a_hostile_name_is_refused_cleanly_and_changes_nothing(
    hconn: psycopg.Connection, slot: str
) -> None:
    sql, good = SLOTS[slot]
    with hconn.transaction(force_rollback=True):  # the place is reached with a good name
        hconn.execute(sql, {**PARAMS, "h": good}).fetchall()
    before = catalog(hconn)
    for name in HOSTILE:
        with pytest.raises(psycopg.Error) as refused:
            hconn.execute(sql, {**PARAMS, "h": name}).fetchall()
        state = refused.value.sqlstate
        allowed = CLEAN_REFUSALS | HELPERS.get(slot, set())
        if state == "42601":  # a syntax error is only ever the empty quoted identifier
            allowed = allowed if name == "" and '("",' in str(refused.value) else set()
        assert state in allowed, (slot, name, state, str(refused.value))
        assert catalog(hconn) == before, (slot, name)
    assert hconn.execute("SELECT count(*) FROM public.canary").fetchone() == (0,)


@pytest.mark.parametrize("slot", sorted(VALUES))
def test_a_hostile_key_value_is_data(hconn: psycopg.Connection, slot: str) -> None:
    before = catalog(hconn)
    for name in HOSTILE:
        hconn.execute(VALUES[slot], {**PARAMS, "h": name}).fetchall()
    assert catalog(hconn) == before


def test_hostile_key_values_are_stored_and_read_back_as_they_are(
    hconn: psycopg.Connection,
) -> None:
    before = catalog(hconn)
    with hconn.transaction(force_rollback=True):
        for i, name in enumerate(HOSTILE):
            hconn.execute("INSERT INTO slidewin_streams.sensors (k, ts, v, w) "
                          "VALUES (%s, %s, 1.5, 2)", (name, T0 + timedelta(seconds=i)))
        keys = {k for (k,) in hconn.execute("SELECT k FROM slidewin_streams.sensors")}
        assert keys == set(HOSTILE)
        for name in HOSTILE:
            got = hconn.execute("SELECT n, total FROM slidewin.stream_summary('sensors', 'w', "
                                "%(t0)s, %(t1)s, %(h)s)", {**PARAMS, "h": name}).fetchall()
            assert got == [(1, 2)], name
        assert hconn.execute("SELECT sum(n) FROM slidewin_rollups.sensors").fetchone() == (
            len(HOSTILE),)
    assert catalog(hconn) == before


def test_reserved_words_make_objects_with_exactly_those_names(
    hconn: psycopg.Connection,
) -> None:
    c = hconn
    c.execute("SELECT slidewin.stream_define('select', 'order', 'from', "
              "'[{\"name\": \"order\"}, {\"name\": \"limit\", \"type\": \"bigint\"}]', "
              "ARRAY['limit'])")
    # its key index, then built again for a new measure: every name quoted, each time
    assert c.execute("SELECT slidewin.key_index(true, 'select')").fetchone() == (True,)
    c.execute("SELECT slidewin.stream_add_column('select', 'table', 'bigint')")
    c.execute("SELECT slidewin.stream_add_measure('select', 'table')")
    assert c.execute(
        "SELECT pg_get_indexdef('slidewin_streams.\"select#key\"'::regclass)").fetchone()[0] == (
        'CREATE INDEX "select#key" ON ONLY slidewin_streams."select" USING btree ("order", "from")'
        ' INCLUDE ("limit", "table")')
    c.execute("SELECT slidewin.stream_define('where', 'group', 'from', "
              "'[{\"name\": \"group\"}, {\"name\": \"order\"}]')")
    c.execute("SELECT slidewin.join_define('union', 'select', 'where', 'order', "
              "p_before => '5 s', p_after => '5 s', p_select_left => ARRAY['limit'])")
    tables = {r for (r,) in c.execute(
        "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p') "
        "AND n.nspname IN ('slidewin_streams', 'slidewin_rollups', 'slidewin_joins')")}
    assert {'slidewin_streams."select"', 'slidewin_streams."where"'} <= tables
    assert any(t.startswith('slidewin_joins."union') for t in tables), tables
    columns = {r for (r,) in c.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'slidewin_streams.\"select\"'::regclass"
        " AND attnum > 0 AND NOT attisdropped")}
    assert columns == {"order", "from", "limit", "table"}

    c.execute("SELECT slidewin.session_define('sel', '10 s', p_stream => 'select')")
    c.execute('INSERT INTO slidewin_streams."select" ("order", "from", "limit", "table") '
              "VALUES ('a', %(t0)s, 3, 4), ('a', %(t0)s + interval '1 s', 5, 6)", PARAMS)
    c.execute('INSERT INTO slidewin_streams."where" ("group", "order", "from") '
              "VALUES ('g', 'a', %(t0)s + interval '2 s')", PARAMS)
    for measure, total in (("limit", 8), ("table", 10)):
        got = c.execute("SELECT n, total FROM slidewin.stream_summary('select', %s, %s, %s)",
                        (measure, PARAMS["t0"], PARAMS["t1"])).fetchall()
        assert got == [(2, total)], measure
    assert len(c.execute("SELECT * FROM slidewin.stream_buckets('select', 'limit', 1, %(t0)s, "
                         "%(t1)s)", PARAMS).fetchall()) == 2
    assert len(c.execute("SELECT * FROM slidewin.stream_count_windows('select', 'table', 2)"
                         ).fetchall()) == 1
    assert c.execute("SELECT n, total FROM slidewin.stream_summary('select', 'limit', %(t0)s, "
                     "%(t1)s, 'a')", PARAMS).fetchall() == [(2, 8)]  # the key's, by its index
    pairs = c.execute("SELECT * FROM slidewin.join_exact('union', %(t0)s, %(t1)s)",
                      PARAMS).fetchall()
    assert len(pairs) == 2
    shown = c.execute("SELECT l FROM slidewin.join_show('union', %(t0)s, %(t1)s)",
                      PARAMS).fetchall()
    assert len(shown) == 2 and all(left["limit"] in (3, 5) for (left,) in shown), shown
    assert c.execute("SELECT uuid, n, sum FROM slidewin.sessions(NULL, 'sel')").fetchall() == [
        ("a", 2, None)]  # its key column "order", time "from"; no required measure: counts
    assert c.execute("SELECT slidewin.session_remove('sel')").fetchone() == (True,)
    c.execute("SELECT slidewin.stream_nibble('select', %(t1)s, 10)", PARAMS)
    c.execute("SELECT slidewin.join_drop('union')")
    c.execute("SELECT slidewin.stream_drop('where')")
    c.execute("SELECT slidewin.stream_drop('select')")
    left = {r for (r,) in c.execute(
        "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname LIKE 'slidewin_%%'")}
    assert not [t for t in left if '"select' in t or '"where' in t or '"union' in t], left
