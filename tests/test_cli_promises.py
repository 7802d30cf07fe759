"""What the README promises of every command, checked from the outside.

- A usage error (bad value, unknown option, missing option or argument, unknown command) is ONE
  line on stderr, ``error: ...`` naming the option and pointing at ``-h``, exit code 2 -- for
  every command and group, found by walking the click tree.
- ``slidewin --help``/``--version`` import nothing heavy (pandas, pyarrow, Spark, SQLAlchemy,
  APScheduler, psycopg, the ingest sink): the root group loads its commands on first use.
- ``--json`` means stdout holds the JSON object alone: the client's reports and summary text go
  to stderr (nowhere with -q), and so do the benchmarks' tables.
- A run cut short by a signal exits 128 + the signal (130 after Ctrl-C, 143 after SIGTERM) once
  it has stopped cleanly: the client, and the demo with its Spark ingest and scheduler, whose
  processes must all be gone.
- ``windows current --delta`` prints the window, and says "no data" for an empty one.

Everything runs against a real PostgreSQL (the session's test server).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import click
import psycopg
import pytest
from click.testing import CliRunner, Result

from slidewin.client.cli import cli
from slidewin.client.processes import slidewin_argv
from tests import store_fixtures
from tests.process_watch import ProcessWatch
from tests.store_fixtures import at, keys_in, put
from tests.test_client_session import loader
from tests.waiting import wait_until

DOWN_DSN = "postgresql://nobody@127.0.0.1:1/none"  # nothing here may reach a database


def _walk(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                                          click.Command]]:
    yield path, group
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, f"{' '.join((*path, name))} is listed but does not load"
        if isinstance(command, click.Group):
            yield from _walk(command, (*path, name))
        else:
            yield (*path, name), command


TREE = dict(_walk(cli))


# -- usage errors: one line, exit 2 ------------------------------------------------------------

LEAVES_WITH_REQUIRED = [path for path, command in TREE.items()
                        if not isinstance(command, click.Group)
                        and any(p.required for p in command.params)]


def _path_id(path: tuple[str, ...]) -> str:
    return " ".join(path) or "slidewin"


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="slidewin",
                              env={"SLIDEWIN_DSN": DOWN_DSN})


def _assert_usage_line(result: Result, path: tuple[str, ...], *named: str) -> str:
    """Exit 2, nothing on stdout, exactly one ``error:`` line naming ``named`` and the help."""
    context = f"exit {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.exit_code == 2, context
    assert result.stdout == "", context
    lines = result.stderr.splitlines()
    assert len(lines) == 1, context
    line = lines[0]
    assert line.startswith("error: "), context
    assert line.endswith(f"see `{' '.join(('slidewin', *path))} -h`"), context
    for name in named:
        assert name in line, context
    return line


@pytest.mark.parametrize("path", list(TREE), ids=_path_id)
def test_an_unknown_option_is_one_line_everywhere(path):
    result = _invoke(*path, "--no-such-option")
    line = _assert_usage_line(result, path, "--no-such-option")
    assert line.startswith("error: no such option --no-such-option")


@pytest.mark.parametrize("path", LEAVES_WITH_REQUIRED, ids=_path_id)
def test_a_missing_option_or_argument_is_one_line(path):
    required = [max(p.opts, key=len) if isinstance(p, click.Option) else p.human_readable_name
                for p in TREE[path].params if p.required]
    line = _assert_usage_line(_invoke(*path), path)
    assert line.startswith("error: missing "), line
    assert any(name in line for name in required), (required, line)


BAD_VALUES = [
    (("windows", "tumbling"), ["--size", "0x"], "--size"),
    (("windows", "tumbling"), ["--size", "10s", "--relative-to", "yesterday"], "--relative-to"),
    (("windows", "current"), ["--size"], "--size"),  # an option without its value
    (("windows", "sessions"), ["--from", "noon"], "--from"),
    (("client",), ["--format", "xml"], "--format"),
    (("client",), ["--deletechunksize", "0"], "--deletechunksize"),
    (("demo",), ["--ratelimit", "lots"], "--ratelimit"),
    (("query", "avg"), ["--seconds", "x"], "--seconds"),
    (("jobs", "add", "retention"), ["--history", "soon"], "--history"),
    (("joins", "add"), ["j", "--left", "a", "--right", "b", "--on", "id", "--within", "2x"],
     "--within"),
    (("joins", "show"), ["j", "--emit", "sometimes"], "--emit"),
    (("db", "init"), ["extra"], "extra"),
    (("bench", "sessions"), ["--keys", "10", "--events", "5"], "--keys"),  # raised by the command
]


@pytest.mark.parametrize(("path", "args", "named"), BAD_VALUES, ids=lambda x: " ".join(x)
                         if isinstance(x, tuple | list) else x)
def test_a_bad_value_is_one_line_naming_the_option(path, args, named):
    _assert_usage_line(_invoke(*path, *args), path, named)


def test_an_unknown_command_is_one_line():
    line = _assert_usage_line(_invoke("windows", "tumble"), ("windows",), "tumble")
    assert line.startswith("error: no such command")


def test_a_usage_error_of_a_json_command_still_ends_stdout_with_json():
    result = _invoke("windows", "tumbling", "--json", "--size", "0x")
    assert result.exit_code == 2
    assert json.loads(result.stdout) == {
        "error": result.stderr.strip().removeprefix("error: "), "exit_code": 2}


def test_the_real_entry_point_prints_one_line_too():
    done = subprocess.run(slidewin_argv("windows", "tumbling", "--size", "0x"),
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "SLIDEWIN_DSN": DOWN_DSN})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "error: --size '0x' is not a duration; use a number with a unit, e.g. 500ms, 30s, 5m, "
        "1h; see `slidewin windows tumbling -h`"]


# -- --help and --version import nothing heavy -------------------------------------------------

HEAVY = ("pandas", "pyarrow", "pyspark", "py4j", "sqlalchemy", "apscheduler", "psycopg", "numpy",
         "rich", "psutil", "slidewin.ingest", "slidewin.jobs", "slidewin.client.sim",
         "slidewin.client.bench")
_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$")


def _imported(*args: str) -> tuple[set[str], float, subprocess.CompletedProcess[str]]:
    argv = [sys.executable, "-X", "importtime", *slidewin_argv(*args)[1:]]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    wall_s = time.monotonic() - started
    names = {m.group(1) for m in map(_IMPORTED.match, done.stderr.splitlines()) if m}
    return names, wall_s, done


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"], ["bench", "--help"]],
                         ids=" ".join)
def test_help_and_version_import_no_heavy_module(args, record_property):
    names, wall_s, done = _imported(*args)
    record_property("wall_s", round(wall_s, 3))  # reported, not asserted: the machine is shared
    assert done.returncode == 0, done.stderr[-2000:]
    assert "slidewin.client.cli.root" in names  # the import log was read
    heavy = sorted(n for n in names if any(n == h or n.startswith(h + ".") for h in HEAVY))
    assert heavy == [], heavy


def test_help_lists_every_command_with_its_short_help():
    from slidewin.client.cli.bench import COMMANDS as BENCH
    from slidewin.client.cli.root import COMMANDS

    for path, table in (((), COMMANDS), (("bench",), BENCH)):
        group = TREE[path]
        assert isinstance(group, click.Group)
        ctx = click.Context(group)
        for name in table:  # each entry loads the command it names
            command = group.get_command(ctx, name)
            assert command is not None and command.name == name, name
        shown = CliRunner().invoke(cli, [*path, "--help"]).output
        for name, (_target, short_help) in table.items():
            assert re.search(rf"^  {re.escape(name)} +{re.escape(short_help)}$", shown, re.M), (
                name, shown)


# -- --json: stdout is the JSON object alone ---------------------------------------------------

@pytest.fixture
def client_store(make_store, tmp_path) -> Iterator[tuple[str, Path]]:
    """A 4-partition store with a stand-in ingest loading the client's CSV files (no Spark)."""
    dsn = make_store(4)
    landing = tmp_path / "landing"
    landing.mkdir()
    stop = threading.Event()
    thread = threading.Thread(target=loader, args=(dsn, landing, stop), daemon=True)
    thread.start()
    yield dsn, landing
    stop.set()
    thread.join(timeout=30)


def _client_argv(landing: Path, duration: str, *extra: str, root: tuple[str, ...] = ()):
    return slidewin_argv(
        *root, "client", "--duration", duration, "--warmup", "1", "--displayinterval", "1",
        "--ratelimit", "500", "--historyseconds", "30", "--seed", "3", "--landing", str(landing),
        *extra)


@pytest.mark.slow
@pytest.mark.parametrize(("root", "extra"), [((), ()), (("-q",), ()), ((), ("--view", "live"))],
                         ids=["plain", "quiet", "live"])
def test_client_json_prints_only_the_json_object(client_store, root, extra):
    dsn, landing = client_store
    done = subprocess.run(_client_argv(landing, "3", "--json", *extra, root=root),
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "SLIDEWIN_DSN": dsn})
    context = f"stdout:\n{done.stdout}\nstderr:\n{done.stderr[-3000:]}"
    assert done.returncode == 0, context
    summary = json.loads(done.stdout)  # the whole of stdout: one JSON object, nothing else
    assert isinstance(summary, dict) and summary["written"] > 0, context
    assert done.stdout.count("\n") == 1, context
    if root == ("-q",):
        assert "Report:" not in done.stderr and "Final summary" not in done.stderr, context
    else:
        assert "Report:" in done.stderr and "Final summary" in done.stderr, context


BENCHES = [
    ["bench", "windows", "--events", "20k", "--repeat", "1", "--naive-repeat", "1"],
    ["bench", "queries", "--rows", "8k", "--seconds", "2", "--partitions", "2", "--repeat", "2",
     "--naive-repeat", "1", "--nibbles", "2", "--copy-rows", "0"],
    ["bench", "retention", "--rate", "1k", "--seconds", "2", "--history", "1s",
     "--partitions", "2"],
    ["bench", "client", "--skip-ingest", "--seconds", "0.5", "--repeats", "1"],
]


@pytest.mark.slow
@pytest.mark.parametrize("args", BENCHES, ids=lambda a: " ".join(a[:2]))
def test_benchmarks_json_prints_only_the_json_object(pg_admin_dsn, args):
    result = CliRunner().invoke(cli, ["--dsn", pg_admin_dsn, *args, "--json"])
    assert result.exit_code == 0, result.output
    assert isinstance(json.loads(result.stdout), dict), result.stdout  # nothing but the object
    assert result.stdout.count("\n") == 1, result.stdout


# -- a run cut short by a signal: 128 + the signal ---------------------------------------------

class StderrLines:
    """A process's stderr read line by line in a thread; ``wait_for`` blocks until a match."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._proc = proc
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            self.lines.append(line)

    def wait_for(self, text: str, timeout_s: float) -> None:
        def said() -> bool:
            assert self._proc.poll() is None, "".join(self.lines)[-3000:]
            return any(text in line for line in self.lines)

        try:
            wait_until(said, timeout_s, what=repr(text))
        except AssertionError as exc:
            raise AssertionError(f"{exc} in:\n{''.join(self.lines)[-3000:]}") from None

    def text(self) -> str:
        self._thread.join(timeout=30)
        return "".join(self.lines)


def _stop_and_collect(proc: subprocess.Popen[str], err: StderrLines, sig: int,
                      timeout_s: float) -> tuple[str, str]:
    proc.send_signal(sig)
    try:
        assert proc.stdout is not None
        out = proc.stdout.read()
        proc.wait(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
    return out, err.text()


def _assert_interrupted(code: int, out: str, err: str, sig: int, expected: int) -> dict:
    context = f"exit {code}\nstdout:\n{out}\nstderr:\n{err[-3000:]}"
    assert code == expected, context
    name = signal.Signals(sig).name
    assert err.splitlines()[-1].startswith(f"error: stopped by {name}"), context
    doc = json.loads(out)  # --json: still exactly one JSON object, saying so
    assert doc["exit_code"] == expected and doc["error"].startswith(f"stopped by {name}"), doc
    assert doc["written"] > 0, doc  # the summary so far
    return doc


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "expected"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_client_stopped_by_a_signal_exits_128_plus_the_signal(client_store, sig, expected):
    dsn, landing = client_store
    proc = subprocess.Popen(_client_argv(landing, "120", "--json"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "SLIDEWIN_DSN": dsn, "PYTHONUNBUFFERED": "1"})
    err = StderrLines(proc)
    err.wait_for("writing 500 events/s", timeout_s=60)  # the run starts
    err.wait_for(" Report:", timeout_s=60)  # a report before the signal: written > 0
    out, text = _stop_and_collect(proc, err, sig, timeout_s=60)
    doc = _assert_interrupted(proc.returncode, out, text, sig, expected)
    assert doc["duration_s"] < 100, doc  # it stopped early, not at --duration
    assert "Final summary" in text  # the summary so far, in words, on stderr


@pytest.mark.slow
@pytest.mark.spark
def test_demo_stopped_by_ctrl_c_exits_130_and_leaves_nothing(make_store, tmp_path):
    dsn = make_store(8)
    argv = slidewin_argv(
        "--data-dir", str(tmp_path), "demo", "--duration", "30", "--warmup", "1",
        "--displayinterval", "2", "--ratelimit", "500", "--historyseconds", "30", "--keys", "0",
        "--seed", "1", "--view", "plain", "--json")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "SLIDEWIN_DSN": dsn, "PYTHONUNBUFFERED": "1"})
    watch = ProcessWatch(proc.pid)
    err = StderrLines(proc)
    try:
        err.wait_for("client: 500 events/s", timeout_s=600)  # Spark is up, the client starts
        err.wait_for(" Report:", timeout_s=60)  # a report before Ctrl-C: written > 0
        out, text = _stop_and_collect(proc, err, signal.SIGINT, timeout_s=180)
    finally:
        watch.stop()
    _assert_interrupted(proc.returncode, out, text, signal.SIGINT, 130)
    started = " | ".join(watch.command_lines.values())
    assert " ingest " in started and " jobs run" in started, started
    assert watch.still_running() == [], "processes left behind"
    assert "stopping ingest" in text and "stopping jobs" in text, text[-3000:]
    assert not any((tmp_path / "demo").glob("*/landing")), "landing dir left behind"


# -- windows current --delta: the window, or "no data" -----------------------------------------

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn

KEYS = keys_in(0, 2, "d") + keys_in(1, 2, "d")
EVENTS = [(KEYS[0], 1, at(0)), (KEYS[1], 2, at(10)), (KEYS[2], 3, at(12))]
AT = at(15).isoformat()  # the reference time: windows of 10 s hold 12:00:10-12:00:20


@pytest.fixture
def timeline(sconn, small_store_dsn):
    put(sconn, EVENTS)
    return small_store_dsn


def _current(dsn: str, *args: str) -> Result:
    result = CliRunner().invoke(cli, ["--dsn", dsn, "windows", "current", "--size", "10s",
                                      "--relative-to", AT, *args])
    assert result.exit_code == 0, result.output
    assert "None" not in result.stdout, result.stdout
    return result


@pytest.mark.parametrize("key", [None, KEYS[0]], ids=["all keys", "one key"])
def test_delta_into_an_empty_window_says_no_data(timeline, key):
    keyed = ["--key", key] if key else []
    text = _current(timeline, "--delta", "1m", *keyed).stdout.splitlines()
    assert text[0].startswith("windows of 10s every 10s holding 2026-01-01T11:59:15+00:00")
    assert "(" + AT + " minus 60s)" in text[0]
    assert text[2].split()[:5] == ["2026-01-01", "11:59:10", "2026-01-01", "11:59:20", "0"]
    assert text[2].split()[5:9] == ["-", "-", "-", "-"]
    assert text[-1].startswith("no data: no events")
    doc = json.loads(_current(timeline, "--delta", "1m", "--json", *keyed).stdout)
    assert doc["delta_s"] == 60 and doc["at"] == "2026-01-01T11:59:15+00:00"
    assert [(w["start"][11:19], w["n"], w["sum"]) for w in doc["windows"]] == [
        ("11:59:10", 0, None)]


@pytest.mark.parametrize(("key", "n", "total"), [(None, 2, 5), (KEYS[1], 1, 2)],
                         ids=["all keys", "one key"])
def test_delta_prints_the_window_it_lands_in(timeline, key, n, total):
    keyed = ["--key", key] if key else []
    text = _current(timeline, "--delta", "5s", *keyed).stdout.splitlines()
    assert "(" + AT + " minus 5s)" in text[0]  # 12:00:15 minus 5 s: [12:00:10, 12:00:20)
    cells = text[2].split()
    assert (cells[1], cells[3], int(cells[4]), int(cells[5])) == ("12:00:10", "12:00:20", n, total)
    assert not any(line.startswith("no data") for line in text), text
    doc = json.loads(_current(timeline, "--delta", "5s", "--json", *keyed).stdout)
    assert [(w["start"][11:19], w["n"], w["sum"]) for w in doc["windows"]] == [
        ("12:00:10", n, total)]


# -- the client leaves the scheduler's policy alone -------------------------------------------

def _default_history(dsn: str) -> float | None:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT history_s FROM slidewin.retention_settings "
                           "WHERE name = 'default'").fetchone()
    return None if row is None else float(row[0])


@pytest.mark.slow
def test_client_with_deleter_jobs_keeps_the_stored_policy_unless_told(client_store):
    """`slidewin jobs add retention --history 2h`, then `slidewin client --deleter jobs`: the
    scheduler goes on keeping two hours (the client once wrote its own default, 30 s, over it,
    and 1 min windows were then refused); given --historyseconds, the client sets it."""
    dsn, landing = client_store
    env = {**os.environ, "SLIDEWIN_DSN": dsn}
    subprocess.run(slidewin_argv("jobs", "add", "retention", "--history", "2h"), env=env,
                   check=True, capture_output=True)
    argv = slidewin_argv("client", "--duration", "2", "--warmup", "0", "--ratelimit", "100",
                         "--landing", str(landing), "--deleter", "jobs", "--view", "plain")
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _default_history(dsn) == 7200.0
    assert "the scheduler keeps the store's policy 'default'" in done.stderr
    done = subprocess.run([*argv, "--historyseconds", "60"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _default_history(dsn) == 60.0
