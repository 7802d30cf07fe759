"""What the README promises of every command, checked from the outside.

- ``slidewin --help``/``--version`` import nothing heavy (pandas, pyarrow, Spark, SQLAlchemy,
  APScheduler, psycopg, the ingest sink): the root group loads its commands on first use.

Everything runs against a real PostgreSQL (the session's test server).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from client.cli import cli
from client.processes import slidewin_argv

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


# -- --help and --version import nothing heavy -------------------------------------------------

HEAVY = ("pandas", "pyarrow", "pyspark", "py4j", "sqlalchemy", "apscheduler", "psycopg", "numpy",
         "rich", "psutil", "ingest", "jobs", "client.sim", "client.bench")
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
    assert "client.cli.root" in names  # the import log was read
    heavy = sorted(n for n in names if any(n == h or n.startswith(h + ".") for h in HEAVY))
    assert heavy == [], heavy


def test_help_lists_every_command_with_its_short_help():
    from client.cli.bench import COMMANDS as BENCH
    from client.cli.root import COMMANDS

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
