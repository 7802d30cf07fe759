"""Least privilege (``slidewin db roles``): each role can do its part and nothing more.

One store per module with a declared stream, a join and session windows, so every schema has
tables; the role set gets a prefix of its own (roles belong to the whole server) and is dropped
at the end. Each role is tested through a LOGIN role that is a member of it alone, connecting
as itself -- not a superuser's ``SET ROLE``, which a function could undo.

The reader: every INSERT, UPDATE, DELETE and TRUNCATE on every table fails, and every function
in the slidewin schemas, called with test_sql_repeated's sample arguments, either is refused or
changes no row (the store's contents are compared before and after). It still answers
``query`` and ``windows``. The ingest writes a batch through the ingest's own sink; the jobs
role runs a retention round, session expiry, stream nibbles, join ticks, a run record and the
view refresh; neither can do the other's part.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pyarrow as pa
import pytest
from click.testing import CliRunner
from psycopg import sql

from slidewin.client.cli import cli
from slidewin.db import joins, key_windows, sessions, streams
from slidewin.db.roles import RoleError, can_become, create_login, create_roles, reader_dsn
from slidewin.db.streams import Column
from slidewin.ingest.batch import GOOD_SCHEMA
from slidewin.ingest.sink import BatchRows, write_batch
from slidewin.jobs.config import RetentionPolicy
from slidewin.jobs.retention import expire_sessions, nibble_streams, run_until_caught_up, tick_joins
from tests.invariants import assert_rollups_exact
from tests.serve_fixtures import BAD_SCHEMA
from tests.store_fixtures import PARTS, at, keys_in, put
from tests.test_sql_repeated import CALLS

S = timedelta(seconds=1)
SCHEMAS = ["slidewin", "slidewin_streams", "slidewin_rollups", "slidewin_joins"]
PASSWORD = "role-test-password"


@pytest.fixture(scope="module")
def prefix() -> str:
    return f"swt{secrets.token_hex(3)}"


@pytest.fixture(scope="module")
def store(make_store, prefix: str) -> Iterator[str]:
    """A store with data in every schema and the role set ``prefix``, with one login per group
    (``<prefix>_l_<group>``); the roles are dropped afterwards."""
    dsn = make_store(PARTS)
    with psycopg.connect(dsn, autocommit=True) as conn:
        create_roles(conn, prefix)
        _fill(conn)
        for group in ("reader", "ingest", "jobs"):
            create_login(conn, f"{prefix}_l_{group}", group, PASSWORD, prefix)
    yield dsn
    with psycopg.connect(dsn, autocommit=True) as conn:
        names = [f"{prefix}_l_{g}" for g in ("reader", "ingest", "jobs")] + [
            f"{prefix}_{g}" for g in ("reader", "ingest", "jobs", "owner")]
        me = conn.execute("SELECT current_user").fetchone()[0]
        for name in names:
            conn.execute(sql.SQL("REASSIGN OWNED BY {} TO {}").format(
                sql.Identifier(name), sql.Identifier(me)))
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
        for name in names:
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def _fill(conn: psycopg.Connection) -> None:
    """Streams and a join made after the roles: their tables get the grants when created."""
    sessions.define(conn, sessions.SessionDef("visits", 10 * S, 5 * S, timedelta(minutes=10)))
    put(conn, [(k, i, at(i * 1.5)) for i in range(27) for k in ("a", "b")])
    conn.execute("SELECT slidewin.ingest_advance('events', %s, %s, %s)", (at(40), at(40), 5 * S))
    streams.define(conn, "sensors", key="k", time="ts", measures=["v"], history=60 * S,
                   columns=[Column("k", "text"), Column("v", "double")])
    sessions.define(conn, sessions.SessionDef("readings", 10 * S, 5 * S, timedelta(minutes=10),
                                              stream="sensors"))
    conn.execute("INSERT INTO slidewin_streams.sensors (k, ts, v) SELECT 'k' || (i %% 3), "
                 "%s + i * interval '1.5 s', i / 7.0 FROM generate_series(0, 40) i", (at(0),))
    conn.execute("SELECT slidewin.ingest_advance('sensors', %s, %s, %s)", (at(40), at(40), S))
    streams.define(conn, "parcels", key="p", time="ts", history=60 * S,
                   columns=[Column("p", "text"), Column("k", "text")])
    conn.execute("INSERT INTO slidewin_streams.parcels (p, k, ts) SELECT 'p' || i, "
                 "'k' || (i %% 4), %s + i * interval '2 s' FROM generate_series(0, 20) i",
                 (at(0),))
    conn.execute("SELECT slidewin.ingest_advance('parcels', %s, %s, %s)", (at(40), at(40), S))
    joins.define(conn, "sp", left="sensors", right="parcels", on="k", join_type="full",
                 before=5 * S, after=3 * S, now=at(40))
    conn.execute("SELECT slidewin.refresh_minute_history()")


def login_dsn(dsn: str, prefix: str, group: str) -> str:
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    params.update(user=f"{prefix}_l_{group}", password=PASSWORD)
    return psycopg.conninfo.make_conninfo("", **params)


@pytest.fixture
def as_reader(store: str, prefix: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(login_dsn(store, prefix, "reader"), autocommit=True) as conn:
        yield conn


def relations(conn: psycopg.Connection, kinds: str = "rp") -> list[str]:
    rows = conn.execute(
        "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = ANY(%s) AND c.relkind = ANY(%s) "
        "ORDER BY 1", (SCHEMAS, list(kinds))).fetchall()
    return [r[0] for r in rows]


def contents(conn: psycopg.Connection) -> dict[str, str | None]:
    """Every table's and sequence's content as one digest each, read by a superuser."""
    found: dict[str, str | None] = {}
    for rel in relations(conn, "rpm"):
        query = sql.SQL("SELECT md5(string_agg(t::text, ',' ORDER BY t::text)) FROM {} t")
        found[rel] = conn.execute(query.format(sql.SQL(rel))).fetchone()[0]
    for rel in relations(conn, "S"):
        query = sql.SQL("SELECT last_value::text || is_called::text FROM {}")
        found[rel] = conn.execute(query.format(sql.SQL(rel))).fetchone()[0]
    return found


def test_the_set_has_its_tables_in_every_schema(store: str, prefix: str) -> None:
    with psycopg.connect(store, autocommit=True) as conn:
        schemas = {r.split(".")[0] for r in relations(conn)}
        assert schemas == set(SCHEMAS)
        rows = conn.execute("SELECT DISTINCT relowner::regrole::text FROM pg_class c JOIN "
                            "pg_namespace n ON n.oid = c.relnamespace WHERE nspname = ANY(%s)",
                            (SCHEMAS,)).fetchall()
        assert rows == [(f"{prefix}_owner",)]


def _change(conn: psycopg.Connection, rel: str, kind: str) -> sql.Composable:
    """A statement that would change table ``rel``: insert, update (its first column to
    itself), delete or truncate."""
    table = sql.SQL(rel)
    if kind == "update":
        column = conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
            "AND NOT attisdropped AND attidentity = '' AND attgenerated = '' ORDER BY attnum "
            "LIMIT 1", (rel,)).fetchone()[0]
        return sql.SQL("UPDATE {} SET {} = {}").format(table, sql.Identifier(column),
                                                       sql.Identifier(column))
    return {"insert": sql.SQL("INSERT INTO {} DEFAULT VALUES"),
            "delete": sql.SQL("DELETE FROM {}"),
            "truncate": sql.SQL("TRUNCATE {}")}[kind].format(table)


@pytest.mark.parametrize("kind", ["insert", "update", "delete", "truncate"])
def test_the_reader_changes_no_table(as_reader: psycopg.Connection, kind: str) -> None:
    tables = relations(as_reader)
    assert len(tables) > 20
    for rel in tables:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            as_reader.execute(_change(as_reader, rel, kind))


def test_the_reader_refreshes_no_view_and_draws_no_sequence(as_reader) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        as_reader.execute("REFRESH MATERIALIZED VIEW slidewin.minute_history")
    for seq in relations(as_reader, "S"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            as_reader.execute("SELECT nextval(%s)", (seq,))


def test_the_reader_may_execute_no_function_that_changes_data(store: str, prefix: str) -> None:
    with psycopg.connect(store, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT p.oid::regprocedure::text, p.provolatile, p.prosecdef, "
            "       has_function_privilege(%s, p.oid, 'EXECUTE'), "
            "       has_function_privilege('public', p.oid, 'EXECUTE') "
            "  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            " WHERE n.nspname = ANY(%s)", (f"{prefix}_reader", SCHEMAS)).fetchall()
    assert len(rows) > 100
    assert not [r[0] for r in rows if r[4]], "PUBLIC may execute these"
    assert not [r[0] for r in rows if r[3] and (r[1] == "v" or r[2])], "the reader may run these"
    assert sorted(r[0] for r in rows if r[2]) == ["slidewin.refresh_minute_history()",
                                                  "slidewin.session_def_forget(integer)"]


def test_every_function_called_as_the_reader_changes_nothing(
        store: str, as_reader: psycopg.Connection) -> None:
    """test_sql_repeated's sample call of every function, as the reader: refused, or no row
    changed in any table, view or sequence."""
    with psycopg.connect(store, autocommit=True) as admin:
        before = contents(admin)
        names = {r[0] for r in admin.execute(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = ANY(%s) AND p.prorettype <> 'trigger'::regtype",
            (SCHEMAS,)).fetchall()}
        assert names <= set(CALLS), names - set(CALLS)
        refused, answered = [], []
        for name, (text, params, _changing) in sorted(CALLS.items()):
            args = params(0) if callable(params) else params
            try:
                as_reader.execute(text, args)
                answered.append(name)
            except psycopg.errors.InsufficientPrivilege:
                refused.append(name)
            except psycopg.Error:
                answered.append(name)  # refused its arguments, before or after reading
        assert contents(admin) == before
    assert {"nibble", "insert_event", "stream_define", "create_roles", "rollups_add",
            "record_job_run", "refresh_minute_history"} <= set(refused)
    assert {"window_avg", "tumbling", "complete_up_to", "stream_tumbling"} <= set(answered)


def test_the_reader_answers_query_and_windows(store: str, prefix: str) -> None:
    runner = CliRunner()
    dsn = login_dsn(store, prefix, "reader")
    for args in (["query", "avg", "--seconds", "30", "--relative-to", "stream", "--json"],
                 ["windows", "tumbling", "--size", "10s", "--from", at(0).isoformat(),
                  "--to", at(60).isoformat(), "--json"]):
        result = runner.invoke(cli, ["--dsn", dsn, *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert "error" not in json.loads(result.stdout)


def test_only_the_owner_turns_a_key_index_on_or_off_and_every_role_asks(
        store: str, prefix: str) -> None:
    """One rule for every stream's key index, the built-in one's and a declared one's: building
    or dropping an index is its table owner's -- the owner role's; the ingest and the jobs are
    refused by PostgreSQL, the reader may not call slidewin.key_index at all. Which streams have
    one, every role may ask (`windows key-index status`, `slidewin serve`'s reader)."""
    def status_as(group: str) -> dict:
        result = CliRunner().invoke(cli, ["--dsn", login_dsn(store, prefix, group), "windows",
                                          "key-index", "--json"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    for group in ("ingest", "jobs"):
        with psycopg.connect(login_dsn(store, prefix, group), autocommit=True) as conn:
            for stream in ("events", "sensors"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="must be owner"):
                    conn.execute("SELECT slidewin.key_index(true, %s)", (stream,))
    with psycopg.connect(login_dsn(store, prefix, "reader"), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="key_index"):
            conn.execute("SELECT slidewin.key_index(true, 'sensors')")
    with psycopg.connect(store, autocommit=True) as admin:
        try:
            admin.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(f"{prefix}_owner")))
            assert key_windows.set_index(admin, True, "sensors") is True
            assert key_windows.set_index(admin, True) is True
            admin.execute("RESET ROLE")
            owners = admin.execute(
                "SELECT DISTINCT relowner::regrole::text FROM pg_class WHERE oid IN "
                "('slidewin_streams.\"sensors#key\"'::regclass, 'slidewin.events_key_ts'::regclass)"
                " OR oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = "
                "'slidewin_streams.\"sensors#key\"'::regclass)").fetchall()
            assert owners == [(f"{prefix}_owner",)]
            for group in ("reader", "ingest"):
                assert status_as(group) == {"key_index": True, "streams": {
                    "events": True, "parcels": False, "sensors": True}}
            with psycopg.connect(login_dsn(store, prefix, "ingest"), autocommit=True) as conn:
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="must be owner"):
                    conn.execute("SELECT slidewin.key_index(false, 'sensors')")
        finally:
            admin.execute("RESET ROLE")
            key_windows.set_index(admin, False, "sensors")
            key_windows.set_index(admin, False)


def test_the_ingest_writes_a_batch_and_deletes_nothing(store: str, prefix: str) -> None:
    good = pa.Table.from_pylist(
        [{"part": p, "uuid": k, "val": i, "copies": 1, "ts": datetime.now(UTC) - i * S}
         for p in range(PARTS) for i, k in enumerate(keys_in(p, 3, prefix="ing"))],
        schema=GOOD_SCHEMA)
    bad = pa.Table.from_pylist([{"source": "x.jsonl", "reason": "malformed",
                                 "detail": "not JSON", "raw": "{"}], schema=BAD_SCHEMA)
    with psycopg.connect(login_dsn(store, prefix, "ingest"), autocommit=True) as conn:
        result = write_batch(conn, "roles/text/1", "events", 1,
                             lambda _state: BatchRows(good, bad), grace=5 * S)
        assert result.accepted == 3 * PARTS
        now = datetime.now(UTC)
        conn.execute("INSERT INTO slidewin_streams.sensors (k, ts, v) VALUES ('k1', %s, 1)",
                     (now,))
        conn.execute("SELECT slidewin.ingest_advance('sensors', %s, %s, %s)", (now, now, S))
        conn.execute("SELECT slidewin.joins_advance('sensors', %s)", (now,))
        # a declared stream's batch holds its registry row (ingest.typed_sink): a row lock
        # needs UPDATE on some column, here its progress column alone
        conn.execute("SELECT 1 FROM slidewin.streams WHERE name = 'sensors' FOR SHARE")
        for statement in ("DELETE FROM slidewin.events", "TRUNCATE slidewin.events",
                          "DELETE FROM slidewin_streams.sensors",
                          "UPDATE slidewin.retention_settings SET name = name",
                          "DELETE FROM slidewin.apscheduler_jobs"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
    with psycopg.connect(store, autocommit=True) as admin:
        assert_rollups_exact(admin)


def test_the_jobs_run_retention_and_insert_nothing(store: str, prefix: str) -> None:
    from slidewin.jobs.runs import JobRun, record_run

    with psycopg.connect(store, autocommit=True) as admin:
        put(admin, [("old", 1, at(-3600)), ("old", 2, at(-3599))])
        # a row limit, which the jobs role keeps by the stream's rollups
        streams.define(admin, "capped", key="c", time="ts", max_rows=3,
                       columns=[Column("c", "text")])
        admin.execute("INSERT INTO slidewin_streams.capped (c, ts) SELECT 'c' || i, "
                      "%s + i * interval '1 s' FROM generate_series(1, 10) i", (at(0),))
    with psycopg.connect(login_dsn(store, prefix, "jobs"), autocommit=True) as conn:
        done = run_until_caught_up(conn, RetentionPolicy(history=30 * 60 * S, chunk=100),
                                   at(60))
        assert sum(done.deleted.values()) >= 2 and done.caught_up
        expire_sessions(conn, 100)
        nibble_streams(conn, at(600), 100)
        tick_joins(conn, at(600), 100)
        record_run(conn, JobRun("retention-test", "retention", at(0), at(1)))
        assert conn.execute("SELECT slidewin.refresh_minute_history()").fetchone() == (True,)
        for statement in ("INSERT INTO slidewin.events (part, uuid, val, ts) "
                          "VALUES (0, 'x', 1, now())",
                          "INSERT INTO slidewin.dead_letters (source, reason, raw, stream) "
                          "VALUES ('f', 'late', 'x', 'events')",
                          "TRUNCATE slidewin.rollups"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
    with psycopg.connect(store, autocommit=True) as admin:
        assert admin.execute("SELECT count(*) FROM slidewin.events WHERE uuid = 'old'"
                             ).fetchone() == (0,)
        assert admin.execute("SELECT array_agg(c ORDER BY ts) FROM slidewin_streams.capped"
                             ).fetchone() == (["c8", "c9", "c10"],)
        assert_rollups_exact(admin)
        streams.drop(admin, "capped")


def test_db_roles_twice_and_db_init_after(store: str, prefix: str) -> None:
    runner = CliRunner()
    outputs = []
    for _ in range(2):
        result = runner.invoke(cli, ["--dsn", store, "db", "roles", "--prefix", prefix, "--json"],
                               catch_exceptions=False)
        assert result.exit_code == 0, result.output
        outputs.append(json.loads(result.stdout))
    assert [r["created"] for r in outputs[1]["roles"]] == [False] * 4
    assert outputs[0]["roles"] == outputs[1]["roles"]
    reader = next(r for r in outputs[1]["roles"] if r["role"] == f"{prefix}_reader")
    assert {"on": "table", "name": "slidewin.events", "privileges": ["SELECT"]} in reader["grants"]
    ingest = next(r for r in outputs[1]["roles"] if r["role"] == f"{prefix}_ingest")
    assert {"on": "column", "name": "slidewin.joins.pairs",
            "privileges": ["UPDATE"]} in ingest["grants"]
    assert not [g for g in ingest["grants"] if g["name"].endswith("_sql")]
    result = runner.invoke(cli, ["--dsn", store, "db", "init"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    with psycopg.connect(store, autocommit=True) as conn:
        again = conn.execute("SELECT * FROM slidewin.role_grants(%s)", (prefix,)).fetchall()
    listed = {(r["role"], g["on"], g["name"]) for r in outputs[1]["roles"] for g in r["grants"]}
    assert {(r[0], r[1], r[2]) for r in again if r[1] != "member of"} == listed


def test_db_roles_names_the_fix_without_createrole(store: str, prefix: str) -> None:
    result = CliRunner().invoke(cli, ["--dsn", login_dsn(store, prefix, "reader"), "db",
                                      "roles", "--prefix", prefix])
    assert result.exit_code == 1
    assert "lacks CREATEROLE" in result.output and "ALTER ROLE" in result.output


def test_a_login_without_a_password_source_is_refused(store: str, prefix: str) -> None:
    result = CliRunner().invoke(cli, ["--dsn", store, "db", "roles", "--prefix", prefix,
                                      "--login", f"{prefix}_l_reader"],
                                env={"SLIDEWIN_LOGIN_PASSWORD": ""})
    assert result.exit_code == 2
    assert "SLIDEWIN_LOGIN_PASSWORD" in result.output


def test_serve_pool_connections_are_the_reader(store: str, prefix: str) -> None:
    from slidewin.client.serve.app import Store

    with psycopg.connect(store, autocommit=True) as conn:
        dsn, warning = reader_dsn(conn, store, None, prefix)
        assert warning is None
    served = Store(dsn, size=2)
    served.pool.open(wait=True)
    try:
        with served.connect() as conn:
            assert conn.execute("SELECT current_user").fetchone() == (f"{prefix}_reader",)
            conn.execute("RESET ROLE")  # a function's RESET ROLE keeps the reader
            assert conn.execute("SELECT current_user").fetchone() == (f"{prefix}_reader",)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SET default_transaction_read_only = off")
                conn.execute("DELETE FROM slidewin.events")
    finally:
        served.pool.close()


def test_serve_refuses_a_role_it_cannot_become_and_warns_without_roles(
        store: str, prefix: str, make_store) -> None:
    with psycopg.connect(login_dsn(store, prefix, "reader"), autocommit=True) as conn:
        assert "not a member" in (can_become(conn, f"{prefix}_jobs") or "")
        with pytest.raises(RoleError, match="--role"):
            reader_dsn(conn, store, f"{prefix}_jobs")
    result = CliRunner().invoke(cli, ["--dsn", store, "serve", "--role", "no_such_role"])
    assert result.exit_code == 1 and "does not exist" in result.output
    bare = make_store(1)
    with psycopg.connect(bare, autocommit=True) as conn:
        dsn, warning = reader_dsn(conn, bare, None, prefix)
    assert dsn == bare and warning is not None and "no grants in this database" in warning


# -- no role but the owner changes a definition or a statement another role runs --------------

GROUPS = ("reader", "ingest", "jobs")
# the registries: definitions and progress; tables holding a *_sql column are added from the
# catalog (registry_tables), so a new one is covered without a change here
REGISTRIES = ("slidewin.streams", "slidewin.joins", "slidewin.session_defs", "slidewin.role_sets",
              "slidewin.retention_settings", "slidewin.config")
# what a role may UPDATE there: the progress its own part writes, nothing else
PROGRESS = {
    ("ingest", "slidewin.streams"): {"retired_through"},
    ("jobs", "slidewin.streams"): {"retired_through"},
    ("ingest", "slidewin.joins"): {"pairs", "late_left", "late_right", "watermark", "left_only",
                                   "right_only"},
    ("jobs", "slidewin.joins"): {"watermark", "left_only", "right_only"},
    ("ingest", "slidewin.session_defs"): {
        "stream_ts", "base_ts", "base_xid", "version", "merges", "late", "events", "created",
        "apply_seconds", "longest_key", "longest_start", "longest_end"},
}


def registry_tables(conn: psycopg.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT DISTINCT a.attrelid::regclass::text FROM pg_attribute a JOIN pg_class c ON "
        "c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE "
        "n.nspname = ANY(%s) AND c.relkind IN ('r', 'p') AND a.attname LIKE '%%\\_sql' "
        "AND NOT a.attisdropped", (SCHEMAS,)).fetchall()
    return sorted({r[0] for r in rows} | set(REGISTRIES))


def statement_columns(conn: psycopg.Connection) -> list[tuple[str, str]]:
    """Every (table, column) in the slidewin schemas whose name says it holds SQL."""
    return conn.execute(
        "SELECT a.attrelid::regclass::text, a.attname::text FROM pg_attribute a JOIN pg_class c "
        "ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE "
        "n.nspname = ANY(%s) AND c.relkind IN ('r', 'p') AND a.attname LIKE '%%\\_sql' "
        "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1, 2", (SCHEMAS,)).fetchall()


def columns_of(conn: psycopg.Connection, rel: str) -> list[str]:
    rows = conn.execute("SELECT attname::text FROM pg_attribute WHERE attrelid = %s::regclass "
                        "AND attnum > 0 AND NOT attisdropped ORDER BY attnum", (rel,)).fetchall()
    return [r[0] for r in rows]


def test_the_statements_are_the_registries_sql_columns(store: str) -> None:
    with psycopg.connect(store, autocommit=True) as conn:
        found = statement_columns(conn)
        held = conn.execute("SELECT count(*) FROM slidewin.streams WHERE insert_sql IS NOT NULL"
                            ).fetchone()[0]
    assert {t for t, _ in found} == {"slidewin.streams", "slidewin.joins"}
    assert ("slidewin.joins", "show_sql") in found and ("slidewin.streams", "insert_sql") in found
    assert held >= 2  # the declared streams' statements are there to be protected


def test_no_role_but_the_owner_may_update_a_statement_column(store: str, prefix: str) -> None:
    with psycopg.connect(store, autocommit=True) as conn:
        found = statement_columns(conn)
        logins = [f"{prefix}_l_{g}" for g in GROUPS]
        roles = [*(f"{prefix}_{g}" for g in GROUPS), *logins, "public"]
        allowed = [(role, t, c, priv) for role in roles for t, c in found
                   for priv in ("UPDATE", "INSERT")
                   if conn.execute("SELECT has_column_privilege(%s, %s, %s, %s)",
                                   (role, t, c, priv)).fetchone()[0]]
        owner = conn.execute("SELECT bool_and(has_column_privilege(%s, t::regclass, c, "
                             "'UPDATE')) FROM unnest(%s::text[], %s::text[]) AS x(t, c)",
                             (f"{prefix}_owner", [t for t, _ in found],
                              [c for _, c in found])).fetchone()[0]
    assert len(found) >= 10
    assert allowed == []
    assert owner


@pytest.mark.parametrize("group", GROUPS)
def test_each_role_updates_only_its_progress_columns(store: str, prefix: str,
                                                     group: str) -> None:
    """Every column of every registry, updated to itself as ``group``: only that role's
    progress columns succeed, and no column holding a statement is among them; INSERT and
    DELETE fail on every registry."""
    updated: dict[str, set[str]] = {}
    with psycopg.connect(login_dsn(store, prefix, group), autocommit=True) as conn:
        tables = registry_tables(conn)
        for rel in tables:
            for column in columns_of(conn, rel):
                try:
                    with conn.transaction(force_rollback=True):
                        conn.execute(sql.SQL("UPDATE {} SET {} = {}").format(
                            sql.SQL(rel), sql.Identifier(column), sql.Identifier(column)))
                    updated.setdefault(rel, set()).add(column)
                except psycopg.Error:
                    pass
            for kind in ("insert", "delete"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                    conn.execute(_change(conn, rel, kind))
    assert {"slidewin.streams", "slidewin.joins", "slidewin.session_defs"} <= set(tables)
    for rel, columns in updated.items():
        assert columns <= PROGRESS.get((group, rel), set()), (rel, columns)
        assert not [c for c in columns if c.endswith("_sql")]


def test_a_statement_granted_by_mistake_is_still_refused(store: str, prefix: str) -> None:
    """A column grant made by hand on a statement column: the registry_guard trigger refuses
    the change all the same; the owner may still change it."""
    with psycopg.connect(store, autocommit=True) as admin:
        for rel in ("slidewin.streams", "slidewin.joins"):
            admin.execute(sql.SQL("GRANT UPDATE ON {} TO {}").format(
                sql.SQL(rel), sql.Identifier(f"{prefix}_ingest")))
        try:
            with psycopg.connect(login_dsn(store, prefix, "ingest"), autocommit=True) as conn:
                for statement in (
                        "UPDATE slidewin.streams SET insert_sql = 'SELECT 1' "
                        "WHERE name = 'sensors'",
                        "UPDATE slidewin.joins SET show_sql = 'SELECT 1', pairs = pairs"):
                    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="owner"):
                        conn.execute(statement)
                conn.execute("UPDATE slidewin.joins SET pairs = pairs")  # progress: allowed
            with admin.transaction(force_rollback=True):
                admin.execute(sql.SQL("SET LOCAL ROLE {}").format(
                    sql.Identifier(f"{prefix}_owner")))
                admin.execute("UPDATE slidewin.joins SET show_sql = show_sql || ' '")
        finally:
            admin.execute("SELECT slidewin.regrant_roles()")
        triggered = admin.execute(
            "SELECT array_agg(DISTINCT tgrelid::regclass::text ORDER BY tgrelid::regclass::text) "
            "FROM pg_trigger WHERE tgname = 'registry_guard' AND tgenabled = 'O'").fetchone()[0]
        holders = sorted({t for t, _ in statement_columns(admin)})
    assert triggered == holders


def test_no_role_but_the_owner_creates_objects_or_owns_functions(store: str,
                                                                 prefix: str) -> None:
    with psycopg.connect(store, autocommit=True) as conn:
        roles = [*(f"{prefix}_{g}" for g in GROUPS), *(f"{prefix}_l_{g}" for g in GROUPS)]
        creating = conn.execute(
            "SELECT r, n.nspname FROM unnest(%s::text[]) r, pg_namespace n "
            "WHERE has_schema_privilege(r, n.oid, 'CREATE')", (roles,)).fetchall()
        on_db = conn.execute("SELECT r FROM unnest(%s::text[]) r WHERE "
                             "has_database_privilege(r, current_database(), 'CREATE')",
                             (roles,)).fetchall()
        owners = conn.execute(
            "SELECT DISTINCT p.proowner::regrole::text FROM pg_proc p JOIN pg_namespace n "
            "ON n.oid = p.pronamespace WHERE n.nspname = ANY(%s)", (SCHEMAS,)).fetchall()
    assert creating == [] and on_db == []
    assert owners == [(f"{prefix}_owner",)]


# -- the SECURITY DEFINER functions: each pins its search path, and docs/roles.md lists them --

ROLES_DOC = Path(__file__).parent.parent / "docs" / "roles.md"


def test_every_security_definer_function_pins_its_search_path(store: str) -> None:
    with psycopg.connect(store, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT p.oid::regprocedure::text, p.proconfig FROM pg_proc p JOIN pg_namespace n "
            "ON n.oid = p.pronamespace WHERE n.nspname = ANY(%s) AND p.prosecdef ORDER BY 1",
            (SCHEMAS,)).fetchall()
    assert rows
    for fn, config in rows:
        paths = [c.split("=", 1)[1] for c in config or [] if c.startswith("search_path=")]
        assert paths, f"{fn} does not pin search_path"
        schemas = [s.strip() for s in paths[0].split(",")]
        assert schemas[-1] == "pg_temp", f"{fn}: pg_temp must come last, not first ({paths[0]})"


def test_docs_roles_lists_every_security_definer_function(store: str) -> None:
    """docs/roles.md's audit table: one row per SECURITY DEFINER function, with the arguments
    and the search path it pins, as the catalog has them."""
    with psycopg.connect(store, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT p.oid::regprocedure::text, pg_get_function_arguments(p.oid), "
            "       (SELECT substr(c, 13) FROM unnest(p.proconfig) c "
            "         WHERE c LIKE 'search\\_path=%%') "
            "  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            " WHERE n.nspname = ANY(%s) AND p.prosecdef ORDER BY 1", (SCHEMAS,)).fetchall()
    expected = {(fn, args or "(none)", path) for fn, args, path in rows}
    listed = set()
    for line in ROLES_DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if line.startswith("| `slidewin.") and len(cells) >= 3:
            listed.add((cells[0], cells[1], cells[2]))
    assert listed == expected


# -- the reader reads the jobs' status: no row lock, no migration write ------------------------


def test_the_reader_reads_the_jobs_status(store: str, prefix: str) -> None:
    """`jobs status --json`, its library function and /api/v1/jobs, as a reader login: the
    stored jobs are listed without the FOR UPDATE (an UPDATE privilege) that renaming them
    takes; the reader's migrate_job_refs changes nothing."""
    import warnings

    from slidewin.client.answers.jobs import jobs_status
    from slidewin.client.serve.app import create_app
    from slidewin.jobs.refs import migrate_job_refs
    from slidewin.jobs.store import add_retention

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    add_retention(store, RetentionPolicy(history=3600 * S, chunk=100), name="reader-sees")
    dsn = login_dsn(store, prefix, "reader")
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert migrate_job_refs(conn) == []
        answer = jobs_status(conn, dsn)
    assert "reader-sees" in [s.job.name for s in answer.statuses]
    result = CliRunner().invoke(cli, ["--dsn", dsn, "jobs", "status", "--json"])
    assert result.exit_code == 0, result.output
    assert "reader-sees" in [j["name"] for j in json.loads(result.stdout)["jobs"]]
    with TestClient(create_app(dsn, pool_size=1)) as client:
        response = client.get("/api/v1/jobs")
    assert response.status_code == 200, response.text
    assert "reader-sees" in [j["name"] for j in response.json()["jobs"]]


# -- no reader can stop retention ----------------------------------------------------------------


@pytest.mark.parametrize("group", ["reader", "ingest"])
def test_no_reader_or_ingest_can_stop_retention(store: str, prefix: str, group: str) -> None:
    """The retention lock is a row only the jobs (and the owner) may update: a reader or an
    ingest login cannot take it, lock it or hold the advisory lock retention used to take;
    while it tries, with a transaction open on the lock's table, the jobs' round runs."""
    from slidewin.jobs.retention import run_round

    with psycopg.connect(store, autocommit=True) as admin:
        put(admin, [("stale", 1, at(-7200)), ("stale", 2, at(-7199))])
    with psycopg.connect(login_dsn(store, prefix, group), autocommit=True) as hostile:
        hostile.execute("SELECT pg_advisory_lock(hashtext('slidewin.retention'))")
        for statement in ("SELECT * FROM slidewin.job_lock_take('retention')",
                          "SELECT * FROM slidewin.job_locks FOR UPDATE NOWAIT",
                          "SELECT * FROM slidewin.job_locks FOR KEY SHARE",
                          "UPDATE slidewin.job_locks SET holder_pid = pg_backend_pid()",
                          "LOCK TABLE slidewin.job_locks IN SHARE MODE NOWAIT"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), hostile.transaction():
                hostile.execute(statement)
        with hostile.transaction():
            hostile.execute("SELECT * FROM slidewin.job_locks")  # held open: ACCESS SHARE
            with psycopg.connect(login_dsn(store, prefix, "jobs"), autocommit=True) as jobs:
                result = run_round(jobs, RetentionPolicy(history=3600 * S, chunk=100), at(60))
    assert not result.skipped and result.total >= 2
    with psycopg.connect(store, autocommit=True) as admin:
        assert admin.execute("SELECT count(*) FROM slidewin.events WHERE uuid = 'stale'"
                             ).fetchone() == (0,)


# -- `db roles` while the ingest and the jobs run -------------------------------------------------


def drop_set(dsn: str, names: list[str]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        me = conn.execute("SELECT current_user").fetchone()[0]
        names = [n for n in names if conn.execute("SELECT to_regrole(%s)", (n,)).fetchone()[0]]
        for name in names:
            conn.execute(sql.SQL("REASSIGN OWNED BY {} TO {}").format(
                sql.Identifier(name), sql.Identifier(me)))
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
        for name in names:
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


@pytest.fixture
def unowned(make_store, prefix: str) -> Iterator[tuple[str, str]]:
    """A store with a declared stream holding old rows and no role set yet (every object is
    still its creator's), and a prefix of its own, dropped afterwards."""
    dsn, second = make_store(2), f"{prefix}h"
    with psycopg.connect(dsn, autocommit=True) as conn:
        streams.define(conn, "meters", key="k", time="ts", measures=["v"], history=60 * S,
                       columns=[Column("k", "text"), Column("v", "double")])
        conn.execute("INSERT INTO slidewin_streams.meters (k, ts, v) SELECT 'k' || (i %% 3), "
                     "%s + i * interval '1 s', i FROM generate_series(0, 99) i", (at(0),))
    yield dsn, second
    drop_set(dsn, [f"{second}_{g}" for g in ("reader", "ingest", "jobs", "owner")])


def open_batch(dsn: str) -> psycopg.Connection:
    """A transaction doing what an ingest batch of a declared stream does, left open: its temp
    staging table, rows into the stream (its rollup trigger), a nibble of the stream."""
    batch = psycopg.connect(dsn)
    batch.execute("CREATE TEMP TABLE staging (LIKE slidewin_streams.meters) ON COMMIT DROP")
    batch.execute("SELECT 1 FROM slidewin.streams WHERE name = 'meters' FOR SHARE")
    batch.execute("INSERT INTO slidewin_streams.meters (k, ts, v) VALUES ('k9', %s, 1)",
                  (at(200),))
    assert streams.nibble(batch, "meters", at(200), 10) == 10
    return batch


def owner_of(dsn: str, rel: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute("SELECT relowner::regrole::text FROM pg_class WHERE oid = %s::regclass",
                            (rel,)).fetchone()[0]


def test_db_roles_hands_over_while_a_batch_holds_its_locks(unowned: tuple[str, str]) -> None:
    """`db roles` the first time (every object changes owner) while a batch is open: it hands
    over what the batch does not hold, one object at a time, waits its turn for the rest, and
    the batch -- writing after into a table already handed over -- neither waits for it nor
    deadlocks; both finish."""
    import threading

    dsn, second = unowned
    batch = open_batch(dsn)
    done: list[object] = []

    def roles() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            try:
                done.append(create_roles(conn, second))
            except Exception as exc:  # the test reports it below
                done.append(exc)

    worker = threading.Thread(target=roles)
    worker.start()
    try:
        for _ in range(400):  # dead letters handed over (and committed) while the batch is open
            if owner_of(dsn, "slidewin.dead_letters") == f"{second}_owner" or done:
                break
            threading.Event().wait(0.025)
        assert owner_of(dsn, "slidewin.dead_letters") == f"{second}_owner", done
        assert owner_of(dsn, "slidewin_streams.meters") != f"{second}_owner"  # the batch's
        batch.execute("SET lock_timeout = '5s'")
        batch.execute("INSERT INTO slidewin.dead_letters (source, reason, raw, stream) VALUES "
                      "('x.jsonl', 'malformed', '{', 'meters')")
        batch.execute("INSERT INTO slidewin_streams.meters (k, ts, v) VALUES ('k9', %s, 2)",
                      (at(201),))
        batch.commit()
    finally:
        batch.close()
        worker.join(timeout=60)
    assert len(done) == 1 and not isinstance(done[0], Exception), done
    assert owner_of(dsn, "slidewin_streams.meters") == f"{second}_owner"
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT has_table_privilege(%s, 'slidewin_streams.meters', "
                            "'INSERT')", (f"{second}_ingest",)).fetchone() == (True,)
        assert conn.execute("SELECT count(*) FROM slidewin.role_handover(%s)",
                            (second,)).fetchone() == (0,)


def test_db_roles_gives_up_on_a_lock_held_throughout_and_says_so(
        unowned: tuple[str, str]) -> None:
    dsn, second = unowned
    batch = open_batch(dsn)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn, pytest.raises(RoleError) as caught:
            create_roles(conn, second, attempts=3)
        batch.commit()  # the batch lost nothing
    finally:
        batch.close()
    text = str(caught.value)
    # the first table the batch holds in the handover's order: the session definitions, which
    # the stream's session trigger reads on every insert
    assert f"could not make {second}_owner the owner of slidewin.session_defs" in text, text
    assert "3 tries" in text and "run it again" in text
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM slidewin_streams.meters WHERE k = 'k9'"
                            ).fetchone() == (1,)
        create_roles(conn, second)  # nothing in the way now
        assert conn.execute("SELECT count(*) FROM slidewin.role_handover(%s)",
                            (second,)).fetchone() == (0,)


def test_db_init_replaces_statements_written_before_the_guard(store: str) -> None:
    """A store upgraded from a version whose ingest could rewrite the stored statements: after
    `slidewin db init` they are again what the definitions make."""
    with psycopg.connect(store, autocommit=True) as conn:
        made = conn.execute("SELECT insert_sql, recompute_sql FROM slidewin.streams "
                            "WHERE name = 'sensors'").fetchone()
        shown = conn.execute("SELECT show_sql, pair_left_sql FROM slidewin.joins "
                             "WHERE name = 'sp'").fetchone()
        conn.execute("UPDATE slidewin.streams SET insert_sql = 'SELECT 1', recompute_sql = NULL "
                     "WHERE name = 'sensors'")  # as a hostile ingest once could
        conn.execute("UPDATE slidewin.joins SET show_sql = 'SELECT 2', pair_left_sql = 'x' "
                     "WHERE name = 'sp'")
    result = CliRunner().invoke(cli, ["--dsn", store, "db", "init"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    with psycopg.connect(store, autocommit=True) as conn:
        assert conn.execute("SELECT insert_sql, recompute_sql FROM slidewin.streams "
                            "WHERE name = 'sensors'").fetchone() == made
        assert conn.execute("SELECT show_sql, pair_left_sql FROM slidewin.joins "
                            "WHERE name = 'sp'").fetchone() == shown
    assert made[0].startswith("WITH s (") and "INSERT INTO slidewin_rollups.sensors" in made[0]


# -- the job store: the jobs role writes pickled job states, other processes load them ----------


class _Mkdir:
    """Pickles to a call of Path.mkdir: a job state that runs code wherever it is loaded."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[Path]]:
        return (Path.mkdir, (self.path,))


def test_a_job_state_written_by_the_jobs_role_runs_no_code_where_it_is_loaded(
        store: str, prefix: str, tmp_path: Path) -> None:
    """The jobs role may write slidewin.apscheduler_jobs (APScheduler stores each run there).
    A state naming any other class, or any other function than slidewin's jobs, is refused by
    every process that loads the jobs (the owner's `jobs list`, `jobs status`, db init)."""
    import pickle

    from slidewin.jobs.refs import migrate_job_refs
    from slidewin.jobs.store import add_periodic, list_jobs

    add_periodic(store, "stats", timedelta(hours=1), name="hostile-code")
    add_periodic(store, "stats", timedelta(hours=1), name="hostile-func")
    marker = tmp_path / "ran"
    with psycopg.connect(store, autocommit=True) as admin:
        blob = admin.execute("SELECT job_state FROM slidewin.apscheduler_jobs WHERE id = "
                             "'hostile-code'").fetchone()[0]
    state = pickle.loads(blob)  # the test's own job, just stored
    code = pickle.dumps({**state, "kwargs": {"name": _Mkdir(marker)}})
    func = pickle.dumps({**state, "id": "hostile-func", "func": "slidewin.client.cli:cli"})
    with psycopg.connect(login_dsn(store, prefix, "jobs"), autocommit=True) as jobs:
        for job_id, hostile in (("hostile-code", code), ("hostile-func", func)):
            jobs.execute("UPDATE slidewin.apscheduler_jobs SET job_state = %s WHERE id = %s",
                         (hostile, job_id))
    with psycopg.connect(store, autocommit=True) as admin:
        migrate_job_refs(admin)
    names = [j.name for j in list_jobs(store)]
    assert not marker.exists()
    assert "hostile-code" not in names and "hostile-func" not in names
    with psycopg.connect(store, autocommit=True) as admin:  # APScheduler removed them
        assert admin.execute("SELECT count(*) FROM slidewin.apscheduler_jobs WHERE id LIKE "
                             "'hostile-%'").fetchone() == (0,)


def test_the_jobs_expire_a_removed_session_definition(store: str, prefix: str) -> None:
    """A removed session window: the jobs delete its sessions, then its row (sessions_expire)."""
    with psycopg.connect(store, autocommit=True) as admin:
        sessions.define(admin, sessions.SessionDef("gone", 10 * S, 5 * S, timedelta(minutes=10)))
        admin.execute("SELECT slidewin.session_remove('gone', now())")
    with psycopg.connect(login_dsn(store, prefix, "jobs"), autocommit=True) as jobs:
        expire_sessions(jobs, 100)
    with psycopg.connect(store, autocommit=True) as admin:
        assert admin.execute("SELECT count(*) FROM slidewin.session_defs WHERE name = 'gone'"
                             ).fetchone() == (0,)


def test_a_declared_streams_session_windows_under_every_role(store: str, prefix: str) -> None:
    """The ingest's inserts keep them (late events dead-lettered too), the reader reads them,
    and the jobs delete them once their definition is removed."""
    with psycopg.connect(store, autocommit=True) as admin:
        base = sessions.definition(admin, "readings").stream_ts
    assert base is not None
    with psycopg.connect(login_dsn(store, prefix, "ingest"), autocommit=True) as conn:
        conn.execute("INSERT INTO slidewin_streams.sensors (k, ts, v) "
                     "VALUES ('role', %s, 1), ('role', %s, 2)", (base + 100 * S, base + 104 * S))
        conn.execute("INSERT INTO slidewin_streams.sensors (k, ts, v) VALUES ('role', %s, 3)",
                     (base + 10 * S,))  # older than its stream time - grace 5 s: late
    with psycopg.connect(login_dsn(store, prefix, "reader"), autocommit=True) as conn:
        [s] = sessions.sessions(conn, "role", "readings")
        assert (s.n, s.total) == (2, None)  # v is a double: the sessions count events
        assert sessions.stats(conn, "readings").late == 1
        assert conn.execute("SELECT count(*) FROM slidewin.dead_letters WHERE stream = "
                            "'sensors' AND source = 'session:readings'").fetchone() == (1,)
    with psycopg.connect(store, autocommit=True) as admin:
        assert sessions.remove(admin, "readings", at(200))
    with psycopg.connect(login_dsn(store, prefix, "jobs"), autocommit=True) as jobs:
        expire_sessions(jobs, 100)
    with psycopg.connect(store, autocommit=True) as admin:
        assert admin.execute("SELECT count(*) FROM slidewin.session_defs WHERE name = "
                             "'readings'").fetchone() == (0,)
        sessions.define(admin, sessions.SessionDef("readings", 10 * S, 5 * S,
                                                   timedelta(minutes=10), stream="sensors"))
