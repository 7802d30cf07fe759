"""A DSN's password never shows on a child process's command line (``ps`` shows argv to every
user of the machine): slidewin hands the DSN to its children in SLIDEWIN_DSN.

Children are started in three places: the demo (ingest, ``jobs add``, ``jobs run``), the
client benchmark (``slidewin ingest --once``) -- both through ``client.processes
.slidewin_child`` -- and the retention benchmark (a spawned inserter process). The live demo's
children are checked in tests/test_demo.py.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import psutil
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from slidewin.client.cli.demo import ingest_launch, jobs_add_launch
from slidewin.client.processes import slidewin_child
from slidewin.client.sim.config import ClientConfig

PASSWORD = "Pa55-in-argv-never"
DSN = f"postgresql://slidewin:{PASSWORD}@db.example:5432/slidewin"
ROOT = Path(__file__).resolve().parent.parent
STARTERS = {"slidewin_argv", "slidewin_child", "Popen", "run", "start_child", "check_output"}


def _with_password(dsn: str) -> str:
    return make_conninfo(**{**conninfo_to_dict(dsn), "password": PASSWORD})


def test_a_child_gets_the_dsn_in_its_environment_only():
    launch = slidewin_child(DSN, "jobs", "run", base_env={"PATH": "/bin"})
    assert PASSWORD not in " ".join(launch.argv)
    # and the parent's pid, which the child watches to end with it (client.processes)
    assert launch.env == {
        "PATH": "/bin", "SLIDEWIN_DSN": DSN, "SLIDEWIN_PARENT_PID": str(os.getpid())
    }
    assert launch.argv[-2:] == ["jobs", "run"]


@pytest.mark.parametrize("args", [["--dsn", DSN, "db", "status"], [f"--dsn={DSN}"]])
def test_a_dsn_on_the_command_line_is_refused(args):
    with pytest.raises(ValueError, match="not as --dsn"):
        slidewin_child(DSN, *args)


@pytest.mark.parametrize("inline", [False, True])
def test_the_demo_s_children_carry_no_password(tmp_path, inline):
    config = ClientConfig(landing=tmp_path / "landing", inline=inline, maxrows=1000)
    launches = [ingest_launch(DSN, tmp_path, config, tmp_path, "1s"),
                jobs_add_launch(DSN, config)]
    for launch in launches:
        assert PASSWORD not in " ".join(launch.argv), launch.argv
        assert launch.env["SLIDEWIN_DSN"] == DSN


def _child_starts_with_dsn_flag(path: Path) -> list[str]:
    """``--dsn`` in an argument list being built (a list or tuple literal) or passed to a call
    that builds an argv or starts a process, as ``file:line``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.List | ast.Tuple):
            items = node.elts
        elif isinstance(node, ast.Call) and _name(node.func) in STARTERS:
            items = node.args
        else:
            continue
        parts = [c for i in items for c in ast.walk(i) if isinstance(c, ast.Constant)]
        if any(str(c.value).startswith("--dsn") for c in parts):
            found.append(f"{path}:{node.lineno}")
    return sorted(set(found))


def _name(func: ast.expr) -> str | None:
    return getattr(func, "id", None) or getattr(func, "attr", None)


def test_no_code_starts_a_child_with_dsn_on_its_command_line():
    sources = [p for pkg in ("client", "db", "ingest", "jobs") for p in (ROOT / pkg).rglob("*.py")]
    assert len(sources) > 20
    offenders = [hit for path in sources for hit in _child_starts_with_dsn_flag(path)]
    assert not offenders, offenders


@pytest.mark.parametrize("code", [
    'args = ["--dsn", dsn, "ingest"]\n',
    'start_child("x", slidewin_argv("--dsn", dsn, "ingest"), log)\n',
    'subprocess.run([sys.executable, "-c", MAIN, "--dsn=" + dsn])\n',
    'argv = (*head, f"--dsn={dsn}")\n',
])
def test_the_scan_finds_a_dsn_flag(tmp_path, code):
    bad = tmp_path / "bad.py"
    bad.write_text(code, encoding="utf-8")
    assert _child_starts_with_dsn_flag(bad) == [f"{bad}:1"]


def test_the_retention_benchmark_s_inserter_carries_no_password(make_store):
    from slidewin.client.bench.retention import RetentionBenchSpec, start_inserter

    dsn = _with_password(make_store(2))
    spec = RetentionBenchSpec(rate=100, seconds=30, partitions=2)
    inserter, stop, _sent, ready = start_inserter(dsn, spec)
    try:
        assert ready.wait(60), "the inserter never connected (so it never got the DSN)"
        argv = psutil.Process(inserter.pid).cmdline()
        assert argv and PASSWORD not in " ".join(argv), argv
    finally:
        stop.set()
        inserter.join(timeout=30)
    assert inserter.exitcode == 0
