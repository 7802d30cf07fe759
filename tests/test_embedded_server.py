"""The embedded server never leaks: real processes, real SIGKILLs, each in its own data dir.

A *holder* is a slidewin process attached to the embedded server of a data dir. Holders that die
without running their exit handlers (SIGKILL) must not keep the server up forever, and a
postmaster that died must not keep the next command from starting a fresh one::

    holder A  |--attach------X (SIGKILL)
    command B              |--attach (prunes A)--exit|
    postmaster|==start=======================================stop|   <- B was the last live one

These tests never use SLIDEWIN_TEST_DSN: they always run the embedded server in a temp dir, and
their teardown stops whatever server and holder they started. Waiting for a process to exit is a
bounded poll; nothing here waits for time to pass.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from slidewin.db import embedded
from tests.waiting import wait_until

# slow: each test starts and kills embedded PostgreSQL servers
pytestmark = [pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and Unix sockets"),
              pytest.mark.slow]

SLIDEWIN = str(Path(sys.executable).with_name("slidewin"))

# Attach to the embedded server of argv[1], prove it answers, say so, and hold on until stdin
# closes (then exit normally, running exit handlers).
HOLDER = """
import sys, psycopg
from slidewin.db.connect import resolve_dsn
with psycopg.connect(resolve_dsn(None, sys.argv[1])) as conn:
    conn.execute("SELECT 1").fetchone()
print("ready", flush=True)
sys.stdin.read()
"""

EXIT_TIMEOUT_S = 60.0


def _env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SLIDEWIN_DSN", "DATABASE_URL", "SLIDEWIN_TEST_DSN")}
    env["SLIDEWIN_DATA_DIR"] = str(data)
    return env


def postmaster_pid(data: Path) -> int | None:
    """The pid in ``postmaster.pid`` (read directly, not through the code under test)."""
    try:
        return int((data / "pgdata" / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, IndexError, ValueError):
        return None


def alive(pid: int) -> bool:
    """``pid`` runs (a zombie nobody reaped yet counts as gone: it holds nothing)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def gone_within(pid: int, timeout_s: float = EXIT_TIMEOUT_S) -> bool:
    """Poll until ``pid`` has exited, at most ``timeout_s`` (process exit, not expiry)."""
    try:
        wait_until(lambda: not alive(pid), timeout_s, what=f"process {pid} to exit")
    except AssertionError:
        return False
    return True


def slidewin(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A short slidewin command in its own process; it must end by itself."""
    return subprocess.run(
        [SLIDEWIN, "--data-dir", str(data), *args], env=_env(data), capture_output=True,
        text=True, timeout=120, check=False,
    )


class Holders:
    """Holder processes started by a test; teardown ends them and stops the server."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.procs: list[subprocess.Popen[str]] = []

    def start(self) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(self.data)], env=_env(self.data),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.procs.append(proc)
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().strip() == "ready", f"holder failed: {proc.stderr.read()}"
        return proc

    @staticmethod
    def end(proc: subprocess.Popen[str]) -> None:
        """Let a holder exit normally (its exit handlers run)."""
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""

    @staticmethod
    def sigkill(proc: subprocess.Popen[str]) -> None:
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL

    def teardown(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(timeout=30)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        _stop_everything(self.data)


def _stop_everything(data: Path) -> None:
    """Stop the server in ``data`` whatever state the test left it in (never the user's)."""
    with contextlib.suppress(Exception):
        embedded.stop_embedded(data)
    pgdata = (data / "pgdata").resolve()
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] != "postgres":
            continue
        with contextlib.suppress(psutil.Error):
            if Path(proc.cwd()) == pgdata:
                proc.kill()


@pytest.fixture
def data() -> Iterator[Path]:
    """A fresh data dir under /tmp, not pytest's tmp_path: as root, postgres runs as the
    ``pgserver`` user, and every new pytest session on the machine makes the pytest-of-root
    folder private again (mode 0700), which would lock that user out mid-test."""
    with tempfile.TemporaryDirectory(prefix="slidewin-embedded-") as tmp:
        yield Path(tmp) / "sw"


@pytest.fixture
def holders(data: Path) -> Iterator[Holders]:
    made = Holders(data)
    try:
        yield made
    finally:
        made.teardown()


def test_a_sigkilled_holder_is_pruned_and_the_next_command_stops_the_server(data, holders):
    killed = holders.start()
    server = postmaster_pid(data)
    assert server is not None and alive(server)
    holders.sigkill(killed)
    assert alive(server)  # nobody ran the killed holder's exit handler

    url = slidewin(data, "db", "url")  # attaches, notices the dead holder, ends

    assert url.returncode == 0, url.stderr
    assert gone_within(server), "the last live holder ended but the server is still up"
    assert not embedded.is_running(data)


def test_the_server_stays_up_for_a_live_holder_and_stops_when_it_ends(data, holders):
    killed, live = holders.start(), holders.start()
    server = postmaster_pid(data)
    assert server is not None
    holders.sigkill(killed)

    init = slidewin(data, "db", "init", "--partitions", "2")
    assert init.returncode == 0, init.stderr
    assert alive(server), "the server stopped while a live holder still uses it"
    status = slidewin(data, "db", "status", "--json")
    assert status.returncode == 0, status.stderr
    shown = json.loads(status.stdout.splitlines()[-1])["embedded"]
    assert shown["server_pid"] == server
    assert live.pid in shown["holders"] and killed.pid not in shown["holders"]
    assert alive(server)

    holders.end(live)
    assert gone_within(server), "the live holder ended last but left the server up"


def test_a_sigkilled_postmaster_is_replaced_by_the_next_command(data, holders):
    """A hung backend outlives its killed postmaster and keeps the shared memory attached, which
    makes PostgreSQL refuse to start; the next command must end it and start afresh."""
    live = holders.start()
    first = postmaster_pid(data)
    assert first is not None
    hung = psutil.Process(first).children()[0]
    hung.suspend()  # SIGSTOP: it cannot notice the postmaster's death
    os.kill(first, signal.SIGKILL)
    assert gone_within(first)
    assert alive(hung.pid)

    init = slidewin(data, "db", "init", "--partitions", "2")
    status = slidewin(data, "db", "status", "--json")

    assert init.returncode == 0, init.stderr
    assert status.returncode == 0, status.stderr
    second = postmaster_pid(data)
    assert second is not None and second != first and alive(second)
    assert not alive(hung.pid)
    holders.end(live)  # the holder from before the crash is still a holder, and the last one
    assert gone_within(second)


# Resolve, kill the postmaster, resolve again in the same process: a long-running command (the
# ingest, the scheduler) that reconnects must get a fresh server, not the dead one's cached DSN.
RESOLVE_TWICE = """
import os, signal, sys, time, psutil, psycopg
from slidewin.db.connect import resolve_dsn
first_dsn = resolve_dsn(None, sys.argv[1])
with psycopg.connect(first_dsn) as conn:
    first = conn.execute("SELECT pg_postmaster_start_time()").fetchone()[0]
pid = int(open(os.path.join(sys.argv[1], "pgdata", "postmaster.pid")).readline())
os.kill(pid, signal.SIGKILL)
try:  # wait for it to exit, 60 s at most; a zombie holds nothing (not a child: no wait())
    deadline = time.monotonic() + 60
    while psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the killed postmaster did not exit"
        time.sleep(0.05)  # polls the condition above, in a child without tests.waiting
except psutil.NoSuchProcess:
    pass
with psycopg.connect(resolve_dsn(None, sys.argv[1])) as conn:
    second = conn.execute("SELECT pg_postmaster_start_time()").fetchone()[0]
print("restarted" if second > first else "same server")
"""


def test_a_process_that_resolves_again_after_the_postmaster_died_gets_a_fresh_server(data, holders):
    run = subprocess.run([sys.executable, "-c", RESOLVE_TWICE, str(data)], env=_env(data),
                         capture_output=True, text=True, timeout=120, check=False)

    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "restarted"
    assert not embedded.is_running(data)


def test_a_postmaster_pid_reused_by_another_process_is_not_taken_for_the_server(data, holders):
    """After a crash the pid in postmaster.pid may belong to an unrelated live process."""
    holders.sigkill(holders.start())
    first = postmaster_pid(data)
    assert first is not None
    os.kill(first, signal.SIGKILL)
    assert gone_within(first)
    stranger = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                stdin=subprocess.PIPE)
    try:
        pidfile = data / "pgdata" / "postmaster.pid"
        lines = pidfile.read_text().splitlines()
        pidfile.write_text("\n".join([str(stranger.pid), *lines[1:]]) + "\n")

        live = holders.start()  # attaches and queries: a fresh server must have started

        server = postmaster_pid(data)
        assert server not in (None, first, stranger.pid)
        assert alive(server)
        assert stranger.poll() is None, "the unrelated process was harmed"
        holders.end(live)
        assert gone_within(server)
    finally:
        stranger.kill()
        stranger.wait(timeout=30)


def test_db_start_keeps_the_server_up_through_a_sigkilled_command_until_db_stop(data, holders):
    started = slidewin(data, "db", "start")
    assert started.returncode == 0, started.stderr
    server = postmaster_pid(data)
    assert server is not None
    holders.sigkill(holders.start())

    url = slidewin(data, "db", "url")
    assert url.returncode == 0, url.stderr
    assert alive(server), "db start asked to keep the server, but a command stopped it"

    stopped = slidewin(data, "db", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert gone_within(server)


def test_concurrent_first_commands_share_one_server_and_leave_nothing(data, holders):
    procs = [
        subprocess.Popen([SLIDEWIN, "--data-dir", str(data), "db", "url"], env=_env(data),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outputs = [proc.communicate(timeout=180) for proc in procs]

    assert [proc.returncode for proc in procs] == [0, 0, 0], [err for _out, err in outputs]
    server = postmaster_pid(data)
    assert server is None or gone_within(server)
    assert not embedded.is_running(data)
