"""The ``db`` and ``query`` commands through click's CliRunner, against a real PostgreSQL.

Covers help on every command, --json shapes, bad options naming themselves, the DSN resolution
order (--dsn > SLIDEWIN_DSN > DATABASE_URL) with passwords never printed, and the embedded
server's start/stop leaving no process behind.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result

from slidewin.client.cli import cli
from slidewin.db import embedded
from tests import store_fixtures
from tests.pgfixture import create_database, drop_database
from tests.store_fixtures import at, keys_in, put

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn

COMMANDS = [
    ["db", "init"], ["db", "status"], ["db", "url"], ["db", "start"], ["db", "stop"],
    ["db", "reset"],
    ["query", "avg"], ["query", "max"], ["query", "sql"], ["bench", "queries"],
]


@pytest.fixture(autouse=True)
def no_configured_dsn(monkeypatch):
    """Each test says where the store is; none inherits the caller's environment."""
    for name in ("SLIDEWIN_DSN", "DATABASE_URL", "SLIDEWIN_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def last_json(result: Result) -> dict:
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture
def empty_database(pg_admin_dsn) -> Iterator[str]:
    dsn = create_database(pg_admin_dsn, prefix="slidewin_cli")
    yield dsn
    drop_database(pg_admin_dsn, dsn)


# --- help ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_command_has_help_with_an_example(command, flag):
    result = run(*command, flag)
    assert result.exit_code == 0, result.output
    assert "Example" in result.stdout
    assert f"slidewin {' '.join(command)}" in result.stdout


# --- db init / status ---------------------------------------------------------------------------


def test_db_init_then_status_json(empty_database):
    result = run("--dsn", empty_database, "db", "init", "--partitions", "3")
    assert result.exit_code == 0, result.output
    assert "3 partitions" in result.stderr
    again = run("--dsn", empty_database, "db", "init")  # idempotent, keeps the count
    assert again.exit_code == 0 and "3 partitions" in again.stderr
    with psycopg.connect(empty_database, autocommit=True) as conn:
        put(conn, [(k, 5, at(i)) for i, k in enumerate(keys_in(1, 4))])
    status = run("--dsn", empty_database, "db", "status", "--json")
    assert status.exit_code == 0, status.output
    body = last_json(status)
    assert body["schema_version"] >= 1 and body["stream_time"] == at(3).isoformat()
    assert {"dead_letters", "ingest_batches"} <= body.keys()
    assert [p["part"] for p in body["partitions"]] == [0, 1, 2]
    one = body["partitions"][1]
    assert set(one) == {"part", "rows", "oldest", "newest", "rollup_seconds", "table_bytes",
                        "index_bytes", "dead_tuples"}
    assert (one["rows"], one["rollup_seconds"]) == (4, 4)
    assert (one["oldest"], one["newest"]) == (at(0).isoformat(), at(3).isoformat())
    assert body["partitions"][0]["rows"] == 0 and body["partitions"][0]["oldest"] is None
    text = run("--dsn", empty_database, "db", "status")
    assert text.exit_code == 0 and "3 partitions" in text.stdout


def test_db_status_without_schema_says_run_init(empty_database):
    result = run("--dsn", empty_database, "db", "status")
    assert result.exit_code == 1
    assert "slidewin db init" in result.stderr
    assert "Traceback" not in result.output


# --- query --------------------------------------------------------------------------------------


def test_query_avg_and_max_json(sconn, small_store_dsn):
    put(sconn, [(k, v, at(0.5)) for k, v in zip(keys_in(0, 3), (10, 20, 60), strict=True)])
    avg = run("--dsn", small_store_dsn, "query", "avg", "--seconds", "5", "--relative-to",
              "stream", "--json")
    assert avg.exit_code == 0, avg.output
    assert last_json(avg) == {"what": "avg", "seconds": 5, "relative_to": "stream",
                              "end": at(0).isoformat(), "value": 30.0, "rows": 3}
    top = last_json(run("--dsn", small_store_dsn, "query", "max", "--relative-to", "stream",
                        "--json"))
    assert (top["what"], top["value"], top["seconds"]) == ("max", 60, 30)
    # relative to the wall clock the pinned data is months old: no data, not zero
    now = last_json(run("--dsn", small_store_dsn, "query", "avg", "--json"))
    assert (now["value"], now["rows"]) == (None, 0)
    text = run("--dsn", small_store_dsn, "query", "avg", "--seconds", "3")
    assert text.stdout == "avg over the last 3 s: no data\n"
    text = run("--dsn", small_store_dsn, "query", "max", "--relative-to", "stream")
    assert text.stdout == "max over the last 30 s: 60 (3 rows)\n"


def test_query_sql_prints_the_psql_text():
    result = run("query", "sql", "--seconds", "12")  # needs no database
    assert result.exit_code == 0
    assert "SELECT slidewin.window_avg(12);" in result.stdout
    assert "slidewin.window_max(12)" in result.stdout


# --- bad options --------------------------------------------------------------------------------

BAD_OPTIONS = [
    (["query", "avg", "--seconds", "0"], "--seconds"),
    (["query", "max", "--seconds", "86401"], "--seconds"),
    (["query", "avg", "--relative-to", "yesterday"], "--relative-to"),
    (["db", "init", "--partitions", "0"], "--partitions"),
    (["db", "init", "--partitions", "2000"], "--partitions"),
    (["--dsn", "host=127.0.0.1 port", "db", "url"], "--dsn"),
    (["--dsn", "postgresql://u:pw@[bad", "db", "status"], "--dsn"),
]


@pytest.mark.parametrize(("args", "option"), BAD_OPTIONS, ids=[" ".join(a) for a, _ in BAD_OPTIONS])
def test_bad_options_name_themselves(args, option):
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert option in result.stderr
    assert "Traceback" not in result.output


def test_malformed_dsn_from_the_environment_names_the_variable(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "host=127.0.0.1 port")
    result = run("db", "url")
    assert result.exit_code == 2
    assert "DATABASE_URL" in result.stderr


def test_unreachable_server_is_a_clean_error():
    result = run("--dsn", "postgresql://nobody:hush@127.0.0.1:1/none", "db", "status")
    assert result.exit_code == 1
    assert "cannot connect" in result.stderr and "hush" not in result.output
    assert "Traceback" not in result.output


# --- where the store is -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "slidewin_dsn", "database_url", "winner"),
    [
        (None, None, "db-url", "db-url"),
        (None, "slidewin-dsn", "db-url", "slidewin-dsn"),
        ("flag", "slidewin-dsn", "db-url", "flag"),
        ("flag", None, None, "flag"),
    ],
)
def test_dsn_resolution_order_and_passwords_never_printed(
    monkeypatch, flag, slidewin_dsn, database_url, winner
):
    def dsn(name: str) -> str:
        return f"postgresql://u:secret-{name}@127.0.0.1:5432/{name.replace('-', '_')}"

    if slidewin_dsn:
        monkeypatch.setenv("SLIDEWIN_DSN", dsn(slidewin_dsn))
    if database_url:
        monkeypatch.setenv("DATABASE_URL", dsn(database_url))
    args = ["--dsn", dsn(flag)] if flag else []
    result = run(*args, "db", "url")
    assert result.exit_code == 0, result.output
    assert f"dbname={winner.replace('-', '_')}" in result.stdout
    assert "password=***" in result.stdout
    assert "secret" not in result.output


def test_db_start_refuses_when_a_dsn_is_configured(tmp_path):
    result = run("--dsn", "postgresql://u:pw@127.0.0.1/x", "--data-dir", str(tmp_path),
                 "db", "start")
    assert result.exit_code == 2
    assert "unset it" in result.stderr and "pw" not in result.output
    assert not (tmp_path / "pgdata").exists()


def _postgres_processes_for(folder: Path) -> list[int]:
    """PIDs of processes whose command line mentions ``folder`` (the server's -D pgdata)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(folder) in cmdline and "postgres" in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="process check reads /proc")
def test_db_start_and_stop_the_embedded_server(tmp_path):
    data = tmp_path / "sw"
    started = run("--data-dir", str(data), "db", "start")
    try:
        assert started.exit_code == 0, started.output
        dsn = started.stdout.strip().splitlines()[-1]
        assert embedded.is_running(data)
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == ("slidewin",)
        assert _postgres_processes_for(embedded.pgdata(data))
        url = run("--data-dir", str(data), "db", "url")  # joins the running server
        assert url.exit_code == 0 and "slidewin" in url.stdout
    finally:
        stopped = run("--data-dir", str(data), "db", "stop")
    assert stopped.exit_code == 0, stopped.output
    assert "stopped" in stopped.stderr
    assert not embedded.is_running(data)
    assert _postgres_processes_for(embedded.pgdata(data)) == []
    assert not embedded.keep_marker(data).exists()
    again = run("--data-dir", str(data), "db", "stop")
    assert again.exit_code == 0 and "was not running" in again.stderr


# --- db reset -----------------------------------------------------------------------------------


def _fill(dsn: str) -> None:
    """Data in every table reset empties, and a definition in every table it keeps."""
    from datetime import timedelta

    from slidewin.db import sessions

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO slidewin.retention_settings (name, history_s, max_rows, chunk) "
            "VALUES ('default', 30, NULL, 50)"
        )
        sessions.define(conn, sessions.SessionDef("visits", timedelta(seconds=30)))
        put(conn, [(k, 5, at(i)) for i, k in enumerate(keys_in(1, 4))])
        conn.execute("INSERT INTO slidewin.dead_letters (source, reason, raw, stream) "
                     "VALUES ('f.jsonl', 'malformed', 'x', 'events')")
        conn.execute("INSERT INTO slidewin.ingest_batches (query_id, batch_id) VALUES ('q', 0)")
        conn.execute("INSERT INTO slidewin.stream_state (stream, newest_ts) VALUES ('q', now())")
        conn.execute("SELECT slidewin.delete_after_date(1, %s, 1)", (at(1),))
        progress = conn.execute(
            "SELECT stream_ts, events FROM slidewin.session_defs WHERE name = 'visits'"
        ).fetchone()
        assert progress is not None and progress[0] is not None and progress[1] > 0


def _counts(dsn: str) -> dict[str, int]:
    from slidewin.db.reset import DATA_TABLES, KEPT_TABLES

    with psycopg.connect(dsn, autocommit=True) as conn:
        return {
            table: conn.execute(f"SELECT count(*) FROM slidewin.{table}").fetchone()[0]
            for table in (*DATA_TABLES, *KEPT_TABLES)
        }


def test_db_reset_without_yes_refuses_in_one_line(make_store, tmp_path):
    dsn = make_store(3)
    _fill(dsn)
    before = _counts(dsn)
    result = run("--dsn", dsn, "--data-dir", str(tmp_path), "db", "reset")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: db reset deletes all data in ")
    assert line.endswith("add --yes to do it")
    assert _counts(dsn) == before


def test_db_reset_empties_the_data_keeps_the_definitions_and_forgets_the_checkpoints(
    make_store, tmp_path
):
    from slidewin.ingest.checkpoints import RECORD

    dsn = make_store(3)
    _fill(dsn)
    data, elsewhere = tmp_path / "data", tmp_path / "drop"
    # the default landing folder's checkpoint and archive, and another folder's with its own
    # --archive-dir shared with something else
    (data / "landing").mkdir(parents=True)
    (data / "landing" / "unread.jsonl").write_text("{}\n")
    (data / "checkpoints" / "ingest" / "text").mkdir(parents=True)
    (data / "landing-archive" / "x").mkdir(parents=True)
    shared = tmp_path / "shared-archive"
    (shared / str(elsewhere).lstrip("/")).mkdir(parents=True)
    (shared / str(elsewhere).lstrip("/") / "old.jsonl").write_text("{}\n")
    (shared / "not-ours.txt").write_text("keep me\n")
    other = data / "checkpoints" / "ingest-drop-1234abcd"
    other.mkdir(parents=True)
    (other / RECORD).write_text(json.dumps({"landing": str(elsewhere), "archive_dir": str(shared)}))

    result = run("--dsn", dsn, "--data-dir", str(data), "db", "reset", "--yes", "--json")

    assert result.exit_code == 0, result.output
    counts = _counts(dsn)
    from slidewin.db.reset import DATA_TABLES

    assert {t: counts[t] for t in DATA_TABLES} == dict.fromkeys(DATA_TABLES, 0)
    assert (counts["retention_settings"], counts["session_defs"], counts["config"]) == (1, 1, 1)
    with psycopg.connect(dsn, autocommit=True) as conn:
        visits = conn.execute(  # the definition kept, its progress over the old events gone
            "SELECT gap, stream_ts, base_ts, merges, late, events, created, longest_key "
            "FROM slidewin.session_defs WHERE name = 'visits'"
        ).fetchone()
    assert visits is not None and visits[0].total_seconds() == 30
    assert visits[1:] == (None, None, 0, 0, 0, 0, None)
    assert not (data / "checkpoints" / "ingest").exists() and not other.exists()
    assert not (data / "landing-archive").exists()
    assert not (shared / str(elsewhere).lstrip("/")).exists()
    assert (shared / "not-ours.txt").read_text() == "keep me\n"  # only the folder's own files
    assert (data / "landing" / "unread.jsonl").exists()  # never stored: read after the reset
    body = last_json(result)
    assert len(body["tables"]) == len(DATA_TABLES) and len(body["removed"]) == 4


@pytest.mark.slow
def test_db_reset_refuses_while_something_is_connected(make_store, tmp_path):
    dsn = make_store(3)
    _fill(dsn)
    before = _counts(dsn)
    with psycopg.connect(dsn, autocommit=True, application_name="slidewin ingest"):
        result = run("--dsn", dsn, "--data-dir", str(tmp_path), "db", "reset", "--yes")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert "1 other connection(s)" in line and "slidewin ingest (pid " in line
    assert "stop the ingest" in line
    assert _counts(dsn) == before
