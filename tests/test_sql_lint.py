"""Every slidewin PL/pgSQL function passes plpgsql_check, or its finding is listed here with why.

plpgsql_check (Debian's ``postgresql-15-plpgsql-check``) compiles each function body against
the real schema and reports what PostgreSQL itself only finds when a line runs: unknown columns,
wrong types, unused variables, hidden casts (``performance_warnings``) and EXECUTE of text it
cannot prove safe (``security_warnings``). Each function in the ``slidewin*`` schemas written in
plpgsql is checked; a trigger function on a table it is attached to (a declared stream and a
join are defined first, so their triggers exist), with the trigger's transition tables.

``KNOWN`` lists every finding that stays, keyed by (function, message -- with the cast for a
type mismatch), each with its reason. The test fails on a finding not listed and on a listed
one that no longer occurs, so the list stays true.

The extension has to be installed in the server's own folders, so the test looks for a server
that has it: ``SLIDEWIN_TEST_DSN``'s, then the machine's PostgreSQL at 127.0.0.1:5432 (where
.ci/run installs the package). The embedded pgserver never has it: then the test skips and
says how to install it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest

from slidewin.db import joins, streams
from slidewin.db.schema import init_schema
from slidewin.db.streams import Column
from tests.conftest import T0
from tests.pgfixture import create_database, drop_database

MACHINE_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
INSTALL = ("install it with `apt-get install postgresql-15-plpgsql-check` on the server's "
           "machine (.ci/run does when it can)")

# reasons shared by several findings
LITERAL = "an integer literal (RETURN 0, a DECLARE default) taken as bigint: one cast per call"
SUM = "sum() of a bigint column is numeric, read once per call into a bigint: exact for counts"
EPOCH = ("extract(epoch ...) is numeric since PostgreSQL 14; one assignment per call to a "
         "double precision")
DYNAMIC_OUT = ("RETURN QUERY EXECUTE fills the OUT columns; plpgsql_check cannot see a dynamic "
               "statement's result columns")
COMPOSED = ("composed with format('%I') of names check_stream_name passed or registry rows, "
            "types from stream_type's list, values bound; tests/test_sql_hostile_names.py")
STORED = ("runs the statement stored in the registry row at definition time (format('%I') of "
          "checked names); who may change those columns is docs/roles.md's concern")
DDL = "runs DDL or DELETE through dynamic SQL, so VOLATILE is right"
CAST = 'target type is different type than source type: cast "{}" value to "{}" type'
OUT = 'OUT variable "..." is maybe unmodified'  # one key per function, whichever columns
SANITIZED = "text type variable is not sanitized"
INJECTION = "the expression is not SQL injection safe"
VOLATILE = "routine is marked as VOLATILE, should be STABLE"

KNOWN: dict[tuple[str, str], str] = {
    # integer literals as bigint
    **{(fn, CAST.format("integer", "bigint")): LITERAL for fn in (
        "check_window_work", "join_advance", "join_drop", "join_nibble", "nibble",
        "sessions_apply", "sessions_expire", "sessions_late", "stream_nibble", "window_work")},
    # aggregates and epochs read once per call
    ("count_windows", CAST.format("numeric", "bigint")): SUM,
    ("nibble", CAST.format("numeric", "bigint")): SUM,
    ("sessions_apply", CAST.format("numeric", "bigint")): SUM,
    ("rollups_coarse_subtract", CAST.format("numeric[]", "bigint[]")):
        "array_agg of sum() per bucket into the bigint[] the rollups take: exact for counts",
    ("check_window_spec", CAST.format("numeric", "double precision")): EPOCH,
    ("stream_window_state", CAST.format("numeric", "double precision")): EPOCH,
    # dynamic SQL: result columns, statements, volatility
    **{(fn, OUT): DYNAMIC_OUT for fn in (
        "join_exact", "join_show", "join_since", "stream_count_windows",
        "stream_pieces", "stream_sliding")},
    **{(fn, SANITIZED): COMPOSED for fn in (
        "join_exact", "join_index", "join_show", "join_since", "join_tables", "key_index",
        "stream_add_column",
        "stream_buckets", "stream_count_windows", "stream_nibble")},
    ("count_windows", SANITIZED): "composed with format() of the partition tables' own names "
                                  "and integer arguments; no user text reaches it",
    **{(fn, SANITIZED): STORED for fn in (
        "join_advance", "join_backfill", "joins_on_insert", "stream_rollups_on_delete",
        "stream_rollups_on_insert")},
    ("stream_add_measure", INJECTION): STORED,
    ("join_trigger", SANITIZED): "the trigger's event and REFERENCING clause are "
                                 "join_triggers' own literals; the table a regclass, the stream "
                                 "through %L",
    ("grant_roles", SANITIZED): "GRANT's privileges and table come from the function's own "
                                "list (regclass text); the role through %I",
    ("join_index", VOLATILE): DDL,
    ("join_nibble", VOLATILE): DDL,
}


def server_with_plpgsql_check() -> str:
    """The admin DSN of a server that offers plpgsql_check, or skip saying why none does."""
    tried: list[str] = []
    for dsn in dict.fromkeys(filter(None, [os.environ.get("SLIDEWIN_TEST_DSN"), MACHINE_PG])):
        try:
            with psycopg.connect(dsn, connect_timeout=3) as conn:
                row = conn.execute("SELECT 1 FROM pg_available_extensions "
                                   "WHERE name = 'plpgsql_check'").fetchone()
        except psycopg.Error as exc:
            tried.append(f"{dsn}: {str(exc).strip().splitlines()[0]}")
            continue
        if row:
            return dsn
        tried.append(f"{dsn}: no plpgsql_check extension")
    pytest.skip(f"plpgsql_check is not available ({'; '.join(tried)}); {INSTALL}")


@pytest.fixture(scope="module")
def lint_conn() -> Iterator[psycopg.Connection]:
    """A fresh store with plpgsql_check, a declared stream pair and a join (so every trigger
    function is attached to a table)."""
    admin = server_with_plpgsql_check()
    dsn = create_database(admin, "slidewin_test_lint")
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            init_schema(conn, 4)
            conn.execute("CREATE EXTENSION plpgsql_check")
            s = timedelta(seconds=1)
            streams.define(conn, "sensors", key="k", time="ts", measures=["v", "w"],
                           history=60 * s, columns=[Column("k", "text"), Column("v", "double"),
                                                    Column("w", "bigint")])
            streams.define(conn, "parcels", key="p", time="ts", history=60 * s,
                           columns=[Column("p", "text"), Column("k", "text")])
            joins.define(conn, "sp", left="sensors", right="parcels", on="k", join_type="full",
                         before=5 * s, after=3 * s, now=T0)
            yield conn
    finally:
        drop_database(admin, dsn)


FUNCTIONS = """
SELECT p.oid, p.proname, p.prorettype = 'trigger'::regtype, t.tgrelid, t.tgoldtable,
       t.tgnewtable
  FROM pg_proc p
  JOIN pg_namespace n ON n.oid = p.pronamespace
  JOIN pg_language l ON l.oid = p.prolang
  LEFT JOIN LATERAL (SELECT tgrelid, tgoldtable, tgnewtable FROM pg_trigger
                      WHERE tgfoid = p.oid ORDER BY oid LIMIT 1) t ON true
 WHERE n.nspname LIKE 'slidewin%' AND l.lanname = 'plpgsql'
 ORDER BY p.proname
"""

CHECK = """
SELECT level, message, detail
  FROM plpgsql_check_function_tb(%s::oid::regprocedure, coalesce(%s, 0)::oid::regclass,
                                 security_warnings => true, performance_warnings => true,
                                 oldtable => %s, newtable => %s)
"""


def finding(function: str, message: str, detail: str | None) -> tuple[str, str]:
    """The KNOWN key: a type mismatch with its cast; the OUT columns of a function as one."""
    if detail and detail.startswith("cast "):
        message = f"{message}: {detail}"
    return function, re.sub(r'^OUT variable ".*" is', 'OUT variable "..." is', message)


def findings(conn: psycopg.Connection) -> dict[tuple[str, str], str]:
    """(function, message) -> level, for every plpgsql function of the store."""
    out: dict[tuple[str, str], str] = {}
    for oid, name, _trigger, relid, old, new in conn.execute(FUNCTIONS).fetchall():
        for level, message, detail in conn.execute(CHECK, (oid, relid, old, new)).fetchall():
            out[finding(name, message, detail)] = level
    return out


def test_every_trigger_function_is_checked_on_a_table(lint_conn: psycopg.Connection) -> None:
    rows = lint_conn.execute(FUNCTIONS).fetchall()
    assert len(rows) > 50
    assert [name for _, name, trigger, relid, *_ in rows if trigger and relid is None] == []


def test_plpgsql_check_finds_nothing_that_is_not_listed(lint_conn: psycopg.Connection) -> None:
    found = findings(lint_conn)
    errors = {key for key, level in found.items() if level == "error"}
    assert errors == set(), "plpgsql_check errors are bugs: fix them"
    new = {key: found[key] for key in found.keys() - KNOWN.keys()}
    assert new == {}, "fix these in procedures/, or list them in KNOWN with the reason"
    gone = sorted(KNOWN.keys() - found.keys())
    assert gone == [], "these no longer occur: take them out of KNOWN"


def test_without_the_extension_the_lint_skips_saying_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nowhere = "postgresql://postgres@127.0.0.1:1/postgres"  # nothing listens on port 1
    monkeypatch.setenv("SLIDEWIN_TEST_DSN", nowhere)
    monkeypatch.setattr(f"{__name__}.MACHINE_PG", nowhere)
    with pytest.raises(pytest.skip.Exception) as skipped:
        server_with_plpgsql_check()
    assert "plpgsql_check is not available" in str(skipped.value)
    assert "apt-get install postgresql-15-plpgsql-check" in str(skipped.value)
