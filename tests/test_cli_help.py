"""Every command, found by walking the click tree (so new commands are covered automatically):
``-h``/``--help`` works and shows an example; an unknown option names itself and exits 2.

Plus the bad values of the client's and the demo's options: each error names the option and
shows the fix, before anything starts (no database, no Java is touched).
"""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from slidewin.client.cli import cli


def _walk(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path; through list_commands/get_command, as the root loads them lazily."""
    found = [path]
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            found += _walk(command, (*path, name))
        else:
            found.append((*path, name))
    return found


COMMANDS = _walk(cli)


def _run(args: list[str], env: dict[str, str] | None = None):
    # a DSN that cannot be reached: nothing here may need a database
    base = {"SLIDEWIN_DSN": "postgresql://nobody@127.0.0.1:1/none"}
    return CliRunner().invoke(cli, args, env={**base, **(env or {})}, catch_exceptions=False)


def test_the_tree_holds_the_commands_of_every_area():
    names = {" ".join(p) for p in COMMANDS}
    for expected in ("client", "demo", "query avg", "query max", "query sql", "db init",
                     "bench client"):
        assert expected in names, sorted(names)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "slidewin")
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_works_and_shows_an_example(path, flag):
    result = _run([*path, flag])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    assert "Example" in result.output, f"{' '.join(path)} --help has no example block"


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "slidewin")
def test_unknown_option_is_named(path):
    result = _run([*path, "--no-such-option"])
    assert result.exit_code == 2, result.output
    assert "--no-such-option" in result.output
    assert "Traceback" not in result.output


BAD_CLIENT_OPTIONS = [
    (["--displayinterval", "0"], "--displayinterval"),
    (["--displayinterval", "soon"], "--displayinterval"),
    (["--duration", "0"], "--duration"),
    (["--duration", "-5"], "--duration"),
    (["--warmup", "200"], "--warmup"),
    (["--ratelimit", "0"], "--ratelimit"),
    (["--ratelimit", "lots"], "--ratelimit"),
    (["--maxrows", "-1"], "--maxrows"),
    (["--maxrows", "1.5"], "--maxrows"),
    (["--historyseconds", "0"], "--historyseconds"),  # and --maxrows 0: no limit at all
    (["--deletechunksize", "0"], "--deletechunksize"),
    (["--deleteyieldtime", "never"], "--deleteyieldtime"),
    (["--seed", "x"], "--seed"),
    (["--maxinterval", "0"], "--maxinterval"),
    (["--format", "xml"], "--format"),
    (["--view", "3d"], "--view"),
]


@pytest.mark.parametrize("command", ["client", "demo"])
@pytest.mark.parametrize(("args", "named"), BAD_CLIENT_OPTIONS, ids=lambda a: " ".join(a))
def test_bad_client_options_name_the_option_and_the_fix(command, args, named):
    result = _run([command, *args])
    assert result.exit_code == 2, result.output
    assert named in result.output, result.output
    assert "Traceback" not in result.output


def test_both_limits_zero_says_set_one():
    result = _run(["client", "--historyseconds", "0", "--maxrows", "0"])
    assert result.exit_code == 2
    assert "set at least one" in result.output


def test_client_deleter_choice_is_checked():
    result = _run(["client", "--deleter", "cron"])
    assert result.exit_code == 2 and "--deleter" in result.output


def test_unreachable_database_is_explained_before_anything_starts(tmp_path):
    result = _run(["--data-dir", str(tmp_path), "client", "--duration", "10",
                   "--landing", str(tmp_path / "landing")])
    assert result.exit_code == 1
    assert "cannot connect to PostgreSQL" in result.output
    assert not (tmp_path / "landing").exists()


@pytest.mark.parametrize("bench", ["queries", "ingest", "retention", "client", "joins", "peers"])
def test_benchmarks_explain_an_unreachable_database_before_they_start(bench, tmp_path):
    result = _run(["--data-dir", str(tmp_path), "bench", bench])
    assert result.exit_code == 1, result.output
    assert "cannot connect to PostgreSQL" in result.output
    assert "generat" not in result.output and "Traceback" not in result.output


def test_demo_missing_java_is_explained_before_anything_starts(tmp_path):
    env = {"JAVA_HOME": str(tmp_path / "no-java-here"), "PATH": "/nonexistent"}
    result = _run(["--data-dir", str(tmp_path), "demo", "--duration", "10"], env=env)
    assert result.exit_code == 2, result.output
    assert "Java 17" in result.output
    assert not (tmp_path / "demo").exists()
    assert not (tmp_path / "pgdata").exists()
