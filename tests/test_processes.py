"""Children end with their parent, and hold the embedded server while they use it.

A parent started like the demo (``client.processes.slidewin_child`` + ``start_child``: the
child in a session of its own) is killed with SIGKILL. Its ``slidewin jobs run`` child used to
live on indefinitely -- nothing tells a process in its own session that its parent died -- and,
not being a holder of the embedded server, had the server stopped under it by the next
command. Timeline (embedded)::

    parent   |--attach--start child-------X (SIGKILL)
    child         |--hold----- jobs run -----|SIGTERM (parent gone): clean stop, last holder
    server   |==start==========================================stop|

Real processes, real signals; every wait is a bounded poll for a process to exit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from slidewin.db import embedded
from tests.test_embedded_server import _stop_everything, alive, gone_within
from tests.waiting import wait_until

# slow: real processes holding and stopping the embedded server
pytestmark = [pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and Unix sockets"),
              pytest.mark.slow]

# Start ``slidewin jobs run`` as the demo starts its children, print the child's pid, wait to be
# killed. argv: DSN (or "embedded"), data dir, log file.
PARENT = """
import sys, time
from pathlib import Path
from slidewin.client.processes import slidewin_child, start_child
dsn = sys.argv[1]
if dsn == "embedded":
    from slidewin.db.connect import resolve_dsn
    from slidewin.db.schema import init_schema
    import psycopg
    dsn = resolve_dsn(None, sys.argv[2])
    with psycopg.connect(dsn) as conn:
        init_schema(conn, 2)
launch = slidewin_child(dsn, "jobs", "run")
child = start_child("jobs", launch.argv, Path(sys.argv[3]), env=launch.env)
print(child.proc.pid, flush=True)
time.sleep(600)  # a parent that lives on until the test kills it: not a wait
"""
EXIT_TIMEOUT_S = 60.0


def _env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SLIDEWIN_DSN", "DATABASE_URL", "SLIDEWIN_TEST_DSN")}
    env["SLIDEWIN_DATA_DIR"] = str(data)
    return env


@contextlib.contextmanager
def parent_with_child(dsn: str, data: Path, log: Path) -> Iterator[tuple[subprocess.Popen, int]]:
    """A parent process and the pid of its ``jobs run`` child; teardown kills both."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, dsn, str(data), str(log)], env=_env(data),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    child = 0
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline().strip()
        assert line.isdigit(), f"the parent failed: {parent.stderr.read() if parent.stderr else ''}"
        child = int(line)
        yield parent, child
    finally:
        for pid in (parent.pid, child):
            with contextlib.suppress(ProcessLookupError, ValueError):
                if pid:
                    os.kill(pid, signal.SIGKILL)
        parent.communicate(timeout=30)


def running_jobs(pid: int, log: Path, timeout_s: float = 120.0) -> None:
    """Wait until the child says its scheduler runs (it has started, imports and all)."""
    def text() -> str:
        return log.read_text() if log.exists() else ""

    def running() -> bool:
        assert alive(pid), f"the child exited: {text()}"
        return "scheduler running" in text()

    wait_until(running, timeout_s, what="the child's scheduler to start")


def test_a_child_ends_when_its_parent_is_killed(make_store, tmp_path):
    dsn = make_store(2)
    log = tmp_path / "jobs.log"
    with parent_with_child(dsn, tmp_path / "data", log) as (parent, child):
        running_jobs(child, log)
        parent.send_signal(signal.SIGKILL)
        assert parent.wait(timeout=30) == -signal.SIGKILL

        # within EXIT_TIMEOUT_S, short of ORPHAN_GRACE_S: its own clean stop, not the SIGKILL
        assert gone_within(child, EXIT_TIMEOUT_S), "the child outlived its killed parent"


@pytest.fixture
def data() -> Iterator[Path]:
    """A data dir under /tmp (see tests/test_embedded_server.py for why not tmp_path)."""
    with tempfile.TemporaryDirectory(prefix="slidewin-processes-") as tmp:
        folder = Path(tmp) / "sw"
        try:
            yield folder
        finally:
            _stop_everything(folder)


def test_a_child_holds_the_embedded_server_and_the_last_one_stops_it(data, tmp_path):
    log = tmp_path / "jobs.log"
    with parent_with_child("embedded", data, log) as (parent, child):
        running_jobs(child, log)
        holders = [h.pid for h in embedded.live_holders(data)]
        assert child in holders and parent.pid in holders
        server = embedded.server_pid(data)
        assert server is not None

        parent.send_signal(signal.SIGKILL)
        assert parent.wait(timeout=30) == -signal.SIGKILL
        # a command run now finds a live holder and leaves the server up for it
        assert [h.pid for h in embedded.live_holders(data)] == [child] or not alive(child)

        assert gone_within(child, EXIT_TIMEOUT_S), "the child outlived its killed parent"
        assert gone_within(server, EXIT_TIMEOUT_S), "the last holder ended; the server did not"
    assert not embedded.is_running(data)


def test_a_child_whose_parent_is_already_gone_stops_at_once(tmp_path):
    """The watchdog's first look: a parent that died before the child started watching."""
    code = (
        "import time; from slidewin.client.processes import watch_parent; "
        "watch_parent(1, poll_s=0.05, grace_s=30); time.sleep(60)"  # the watchdog must end it
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        assert proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)

