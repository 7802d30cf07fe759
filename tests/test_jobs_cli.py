"""``slidewin jobs``: bad input refused with clear messages (exit 2), the store edited through
the commands, status and list as JSON."""

from __future__ import annotations

import json

import psycopg
import pytest
from click.testing import CliRunner

from slidewin.client.cli import cli

ADD = ["jobs", "add", "retention"]


@pytest.fixture(scope="module")
def cli_dsn(make_store) -> str:
    return make_store(2)


def invoke(dsn: str, *args: str):
    return CliRunner().invoke(cli, ["--dsn", dsn, *args])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "--history and --max-rows are both missing or zero"),
        (["--history", "0", "--max-rows", "0"], "both missing or zero"),
        (["--history", "30s", "--chunk", "0"], "--chunk 0 must be from 1"),
        (["--history", "3x"], "--history '3x' is not a duration"),
        (["--history", "30s", "--yield", "soon"], "--yield 'soon' is not a duration"),
        (["--max-rows", "10q"], "--max-rows '10q' is not a row count"),
        (["--max-rows", "-5"], "--max-rows '-5' is not a row count"),
        (["--history", "30s", "--name", "bad name"], "job name 'bad name' is not valid"),
    ],
)
def test_bad_input_is_refused_naming_the_option(cli_dsn, args, message):
    result = invoke(cli_dsn, *ADD, *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert json.loads(invoke(cli_dsn, "jobs", "list", "--json").stdout)["jobs"] == []


def test_add_list_pause_resume_remove(cli_dsn):
    added = invoke(cli_dsn, *ADD, "--history", "30s", "--max-rows", "1M", "--chunk", "250",
                   "--yield", "50", "--json")
    assert added.exit_code == 0, added.output
    job = json.loads(added.stdout.splitlines()[-1])
    assert job["kwargs"] == {"name": "default", "history_s": 30.0, "max_rows": 1_000_000,
                             "chunk": 250, "yield_ms": 50.0, "split": "global",
                             "workers": 1}
    assert invoke(cli_dsn, "jobs", "add", "refresh", "--every", "30s").exit_code == 0
    listed = json.loads(invoke(cli_dsn, "jobs", "list", "--json").stdout)["jobs"]
    assert [(j["name"], j["kind"]) for j in listed] == [("default", "retention"),
                                                        ("refresh", "refresh")]
    assert invoke(cli_dsn, "jobs", "pause", "default").exit_code == 0
    listed = json.loads(invoke(cli_dsn, "jobs", "list", "--json").stdout)["jobs"]
    assert listed[0]["paused"] is True
    assert invoke(cli_dsn, "jobs", "resume", "default").exit_code == 0
    status = json.loads(invoke(cli_dsn, "jobs", "status", "--json").stdout.splitlines()[-1])
    lag = status["jobs"][0]["lag"]
    assert [p["part"] for p in lag] == [0, 1] and status["jobs"][0]["paused"] is False
    with psycopg.connect(cli_dsn) as conn:
        row = conn.execute(
            "SELECT history_s, max_rows, chunk, yield_ms FROM slidewin.retention_settings"
        ).fetchone()
    assert row == (30.0, 1_000_000, 250, 50)
    for name in ("default", "refresh"):
        assert invoke(cli_dsn, "jobs", "remove", name).exit_code == 0
    missing = invoke(cli_dsn, "jobs", "pause", "default")
    assert missing.exit_code == 2 and "no job named 'default'" in missing.output


def test_every_jobs_command_has_help_with_an_example(cli_dsn):
    for args in (["jobs"], ["jobs", "run"], [*ADD], ["jobs", "add", "refresh"],
                 ["jobs", "add", "stats"], ["jobs", "list"], ["jobs", "remove"],
                 ["jobs", "pause"], ["jobs", "resume"], ["jobs", "status"],
                 ["bench", "retention"]):
        result = CliRunner().invoke(cli, [*args, "-h"])
        assert result.exit_code == 0 and "Example" in result.output, args
