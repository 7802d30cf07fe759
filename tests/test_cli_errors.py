"""Every failure ends in one ``error: ...`` line, a non-zero exit and no traceback.

The first tests run EVERY slidewin command -- found by walking the click tree, so a new command
is covered the day it is added, and fails here until it has an entry in ARGS -- as a real
subprocess against a server that is down (a port where nothing listens), with a password in
the DSN: each must exit non-zero with ``error: `` on the last line of stderr, print no
traceback, never print the password, and, given --json, still end stdout with a JSON object
that says the error. Commands that start Spark must fail before it starts.

Then: errors raised mid-command (a database without the slidewin schema, a connection killed
under a statement), the boundary's handling of every kind of exception, and -- with Spark -- a
batch that fails inside foreachBatch and a JVM that is killed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import click
import psycopg
import pytest
from click.testing import CliRunner

from slidewin.client.cli import SlidewinGroup, cli
from slidewin.client.cli.context import AppContext, pass_app
from slidewin.client.cli.failures import describe, scrub
from slidewin.client.processes import slidewin_argv
from tests.pgfixture import create_database, drop_database

PASSWORD = "Sw0rdfish-42"

# The least each command needs to get as far as the database. A new command fails
# test_every_command_has_an_entry until it is added here (or to NO_DATABASE).
ARGS: dict[str, list[str]] = {
    "bench client": [],
    "bench ingest": [],
    "bench joins": [],
    "bench peers": [],
    "bench queries": [],
    "bench retention": [],
    "bench serve": [],
    "bench sessions": [],
    "bench windows": [],
    "client": ["--duration", "10"],
    "db batches": [],
    "db dead-letters": [],
    "db init": [],
    "db start": [],  # refuses: a DSN is configured (exit 2)
    "db status": [],
    "db stop": [],  # refuses: a DSN is configured (exit 2)
    "demo": ["--duration", "10"],
    "ingest": ["--landing", "{tmp}"],
    "jobs add refresh": [],
    "jobs add retention": ["--history", "30s"],
    "jobs add stats": [],
    "jobs list": [],
    "db reset": ["--yes"],
    "db roles": [],
    "jobs pause": ["default"],
    "jobs remove": ["default"],
    "jobs resume": ["default"],
    "jobs runs": [],
    "jobs run": ["--for", "5s"],
    "jobs status": [],
    "joins add": ["x", "--left", "a", "--right", "b", "--on", "id", "--within", "1m"],
    "joins drop": ["x", "--yes"],
    "joins list": [],
    "joins show": ["x"],
    "query avg": [],
    "query count": [],
    "query max": [],
    "query min": [],
    "query sum": [],
    "serve": ["--port", "0"],
    "streams add": ["x", "--key", "k", "--time", "ts"],
    "streams alter": ["x", "--history", "1h"],
    "streams drop": ["x", "--yes"],
    "streams list": [],
    "streams show": ["x"],
    "windows add session": ["x", "--gap", "10s"],
    "windows current": ["--size", "10s"],
    "windows expire": [],
    "windows key-index": [],
    "windows list": [],
    "windows remove": ["x"],
    "windows sessions": [],
    "windows hopping": ["--size", "1m", "--advance", "10s"],
    "windows rows": ["--size", "100"],
    "windows sliding": ["--size", "30s"],
    "windows tumbling": ["--size", "10s"],
}
# Commands that never touch the database: they succeed with any DSN.
NO_DATABASE = {"db url", "query sql"}
PER_COMMAND_TIMEOUT_S = 60


def _leaves(group: click.Group, path: tuple[str, ...] = ()) -> dict[str, click.Command]:
    found: dict[str, click.Command] = {}
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the root imports its commands on first use
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            found |= _leaves(command, (*path, name))
        elif command is not None:
            found[" ".join((*path, name))] = command
    return found


LEAVES = _leaves(cli)


def _has_json(command: click.Command) -> bool:
    return any("--json" in p.opts for p in command.params)


def _down_port() -> int:
    """A port on 127.0.0.1 where nothing listens: bound by us, then closed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Ran:
    argv: list[str]
    code: int
    out: str
    err: str
    seconds: float

    def context(self) -> str:
        return f"argv: {self.argv[3:]}\nexit {self.code}\nstdout:\n{self.out}\nstderr:\n{self.err}"


def _run(args: list[str], env: dict[str, str] | None = None, timeout_s: float = 60) -> Ran:
    argv = slidewin_argv(*args)
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,
                          env={**os.environ, **(env or {})})
    return Ran(argv, done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def _assert_one_error_line(ran: Ran, password: str = PASSWORD) -> str:
    """Non-zero exit, ``error: `` on stderr's last line, no traceback, no password. Returns
    the error line."""
    lines = ran.err.strip().splitlines()
    assert ran.code != 0, ran.context()
    assert lines and lines[-1].startswith("error: "), ran.context()
    assert "Traceback" not in ran.out + ran.err, ran.context()
    assert password not in ran.out + ran.err, ran.context()
    return lines[-1]


def test_every_command_has_an_entry():
    missing = sorted(set(LEAVES) - set(ARGS) - NO_DATABASE)
    assert not missing, f"add these commands to ARGS (or NO_DATABASE) in {__file__}: {missing}"
    stale = sorted((set(ARGS) | NO_DATABASE) - set(LEAVES))
    assert not stale, f"no such commands any more: {stale}"


@pytest.fixture(scope="module")
def down_runs(tmp_path_factory) -> dict[str, Ran]:
    """Every command against a server that is down, a few at a time (each is a process)."""
    tmp = tmp_path_factory.mktemp("down")
    dsn = f"postgresql://slidewin:{PASSWORD}@127.0.0.1:{_down_port()}/slidewin"

    def one(name: str) -> Ran:
        args = [a.replace("{tmp}", str(tmp)) for a in ARGS[name]]
        if _has_json(LEAVES[name]):
            args.append("--json")
        return _run(["--dsn", dsn, "--data-dir", str(tmp / "data"), *name.split(), *args],
                    timeout_s=PER_COMMAND_TIMEOUT_S)

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(ARGS, pool.map(one, ARGS), strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ARGS))
def test_a_server_that_is_down_is_one_error_line(down_runs, name):
    ran = down_runs[name]
    line = _assert_one_error_line(ran)
    if name not in ("db start", "db stop"):
        assert "cannot connect to PostgreSQL" in line, ran.context()
        assert "password=***" in line, ran.context()
    if _has_json(LEAVES[name]):
        summary = json.loads(ran.out.strip().splitlines()[-1])
        assert summary["error"] == line.removeprefix("error: "), ran.context()
        assert summary["exit_code"] == ran.code


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ingest", "demo", "bench ingest"])
def test_commands_that_start_spark_fail_before_it_starts(down_runs, name):
    ran = down_runs[name]
    assert ran.seconds < 15, f"{name} took {ran.seconds:.1f} s: did it start Spark?"
    assert "jdk.incubator" not in ran.err, ran.context()  # what a starting JVM prints


@pytest.mark.slow
def test_ingest_json_error_line_carries_its_totals(down_runs):
    summary = json.loads(down_runs["ingest"].out.strip().splitlines()[-1])
    assert summary["batches"] == 0 and summary["rows_in"] == 0, summary


@pytest.mark.parametrize("name", sorted(NO_DATABASE))
def test_commands_without_a_database_ignore_it(name, tmp_path):
    dsn = f"postgresql://slidewin:{PASSWORD}@127.0.0.1:{_down_port()}/slidewin"
    ran = _run(["--dsn", dsn, *name.split()])
    assert ran.code == 0, ran.context()
    assert PASSWORD not in ran.out + ran.err


# -- errors in the middle of a command -------------------------------------------------------


@pytest.fixture(scope="module")
def bare_database(pg_admin_dsn):
    """A database that exists but holds no slidewin schema."""
    dsn = create_database(pg_admin_dsn)
    yield dsn
    drop_database(pg_admin_dsn, dsn)


def _with_password(dsn: str) -> str:
    """``dsn`` with a password added (the test servers trust local connections, so any
    password is accepted) -- then the output can be searched for it."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    return make_conninfo(**{**conninfo_to_dict(dsn), "password": PASSWORD})


@pytest.mark.parametrize(
    "args", [["query", "avg", "--json"], ["query", "max"], ["db", "status", "--json"],
             ["jobs", "status"], ["jobs", "list"], ["client", "--duration", "10"]],
    ids=" ".join,
)
def test_a_database_without_the_schema_says_db_init(bare_database, args, tmp_path):
    ran = _run(["--dsn", _with_password(bare_database), "--data-dir", str(tmp_path), *args])
    line = _assert_one_error_line(ran)
    assert "slidewin db init" in line, ran.context()
    if "--json" in args:
        assert json.loads(ran.out.strip().splitlines()[-1])["error"] in line


def test_a_connection_killed_mid_command_is_one_line(pg_admin_dsn, bare_database):
    dsn = _with_password(bare_database)
    with psycopg.connect(dsn, autocommit=True) as victim:
        pid = victim.info.backend_pid
        with psycopg.connect(pg_admin_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(psycopg.Error) as lost:
            victim.execute("SELECT 1")
    message, code = describe(lost.value, dsn)
    assert message.startswith("lost the connection to PostgreSQL at "), message
    assert "password=***" in message and PASSWORD not in message
    assert code == 1 and "\n" not in message


def test_a_refused_statement_names_the_fix(bare_database):
    with psycopg.connect(bare_database, autocommit=True) as conn, \
            pytest.raises(psycopg.Error) as refused:
        conn.execute("SELECT slidewin.window_avg(30)")
    message, _code = describe(refused.value, bare_database)
    assert message.startswith("PostgreSQL refused the command: "), message
    assert "run `slidewin db init`" in message


# -- the boundary, exception by exception ------------------------------------------------------


@click.group(cls=SlidewinGroup)
@click.option("--debug", is_flag=True)
@click.pass_context
def probe(ctx: click.Context, debug: bool) -> None:
    """A root group like ``slidewin``'s, whose one command raises what it is told to."""
    ctx.obj = AppContext(dsn_option=f"postgresql://u:{PASSWORD}@127.0.0.1:1/x", debug=debug)


RAISE = {
    "keyboard": KeyboardInterrupt(),
    "missing-file": FileNotFoundError(2, "No such file or directory", "/no/such/landing"),
    "bug": ZeroDivisionError("division by zero"),
    "secret": RuntimeError(f"could not use postgresql://u:{PASSWORD}@127.0.0.1:1/x"),
    "usage": click.BadParameter("must be positive", param_hint="--rows"),
}


@probe.command("fail")
@click.argument("what", type=click.Choice(sorted(RAISE)))
@click.option("--json", "as_json", is_flag=True)
@pass_app
def fail(app: AppContext, what: str, as_json: bool) -> None:
    """Raise RAISE[WHAT] after counting two things."""
    app.error_totals = lambda: {"things": 2}
    raise RAISE[what]


def _probe(*args: str):
    return CliRunner().invoke(probe, list(args))


def test_ctrl_c_exits_130_quietly():
    result = _probe("fail", "keyboard")
    assert result.exit_code == 130
    assert result.output == "" and "Aborted" not in result.output


def test_ctrl_c_of_a_json_command_still_ends_stdout_with_json():
    result = _probe("fail", "keyboard", "--json")
    assert result.exit_code == 130 and result.stderr == ""
    assert json.loads(result.stdout) == {
        "error": "interrupted (Ctrl-C)", "exit_code": 130, "things": 2}


def test_a_file_error_names_the_path():
    result = _probe("fail", "missing-file")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: No such file or directory: '/no/such/landing'; check the path exists and "
        "that you may read and write it"
    )


def test_an_unexpected_error_points_to_debug():
    result = _probe("fail", "bug")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: unexpected ZeroDivisionError: division by zero "
        "(rerun with --debug for the traceback)"
    )
    assert isinstance(_probe("--debug", "fail", "bug").exception, ZeroDivisionError)


def test_a_password_in_any_message_is_masked():
    result = _probe("fail", "secret", "--json")
    assert PASSWORD not in result.output + result.stderr
    assert "***" in result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {
        "error": result.stderr.strip().removeprefix("error: "), "exit_code": 1, "things": 2}


def test_a_usage_error_raised_by_a_command_is_one_line():
    result = _probe("fail", "usage")
    assert result.exit_code == 2
    assert result.stderr == "error: --rows: must be positive; see `probe fail -h`\n"


def test_scrub_masks_the_dsn_and_its_password():
    dsn = f"postgresql://u:{PASSWORD}@h/db"
    assert PASSWORD not in scrub(f"at {dsn}: password {PASSWORD} wrong", dsn)
    assert scrub("nothing secret", None) == "nothing secret"


# -- Spark: a batch that fails, a JVM that dies ------------------------------------------------


def _landing_with_one_file(tmp_path: Path) -> Path:
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "a.csv").write_text("u1,5,2026-01-01T00:00:00Z\n", encoding="utf-8")
    return landing


@pytest.mark.slow
@pytest.mark.spark
def test_a_failed_batch_reports_its_own_cause(make_store, tmp_path):
    dsn = _with_password(make_store(2))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE slidewin.ingest_batches CASCADE")  # preflight does not look
    ran = _run(["--dsn", dsn, "--data-dir", str(tmp_path), "ingest", "--once", "--json",
                "--landing", str(_landing_with_one_file(tmp_path))], timeout_s=300)
    line = _assert_one_error_line(ran)
    assert line.startswith("error: stream text failed in batch 0: UndefinedTable: "), line
    assert "slidewin.ingest_batches" in line and "slidewin db init" in line, line
    assert "FOREACH_BATCH_USER_FUNCTION_ERROR" not in ran.err, ran.context()
    summary = json.loads(ran.out.strip().splitlines()[-1])
    assert summary["error"] == line.removeprefix("error: ") and summary["batches"] == 0


@pytest.mark.slow
@pytest.mark.spark
def test_a_killed_jvm_is_one_spark_error_line(make_store, tmp_path):
    import psutil

    dsn = _with_password(make_store(2))
    argv = slidewin_argv("--dsn", dsn, "--data-dir", str(tmp_path), "ingest", "--json",
                         "--landing", str(_landing_with_one_file(tmp_path)))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stderr is not None
        err = []
        for line in proc.stderr:  # wait until the streams run
            err.append(line)
            if line.startswith("[text] batch 0"):
                break
        else:
            pytest.fail("the ingest never committed a batch:\n" + "".join(err))
        jvms = [p for p in psutil.Process(proc.pid).children() if "java" in p.name()]
        assert jvms, "no JVM under the ingest"
        jvms[0].send_signal(signal.SIGKILL)
        out, rest = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    ran = Ran(argv, proc.returncode, out, "".join(err) + rest, 0.0)
    line = _assert_one_error_line(ran)
    assert line.startswith("error: spark failed: the Spark JVM stopped answering"), line
    assert "str() failed" not in ran.err
    assert json.loads(out.strip().splitlines()[-1])["batches"] == 1
