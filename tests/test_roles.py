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

import psycopg
import pyarrow as pa
import pytest
from click.testing import CliRunner
from psycopg import sql

from slidewin.client.cli import cli
from slidewin.db import joins, sessions, streams
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
    assert [r[0] for r in rows if r[2]] == ["slidewin.refresh_minute_history()"]


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
                          "INSERT INTO slidewin.dead_letters (reason) VALUES ('late')",
                          "TRUNCATE slidewin.rollups"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
    with psycopg.connect(store, autocommit=True) as admin:
        assert admin.execute("SELECT count(*) FROM slidewin.events WHERE uuid = 'old'"
                             ).fetchone() == (0,)
        assert_rollups_exact(admin)


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
