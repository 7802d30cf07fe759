"""Child processes and signals: clean shutdown that leaves nothing behind.

Each child (ingest, scheduler) starts in a new session, so it leads its own process group: a
Ctrl-C on the terminal reaches only the parent, which then stops the children in order, and the
JVM that PySpark launches under the ingest process belongs to the ingest's group. Stopping a
child is: SIGTERM to the group, wait for the child to exit, wait for the rest of its group (the
JVM) to exit, and only then SIGKILL the group as a last resort.

A parent that is killed outright (SIGKILL, the OOM killer) stops nobody, and a child in its own
session gets no hang-up either. So every slidewin child ends with its parent: it starts through
``child_main``, which watches the parent's pid (``SLIDEWIN_PARENT_PID``) from a daemon thread and
sends the child SIGTERM -- its usual clean stop -- once the parent is gone (its parent pid
changes when it is re-parented), and SIGKILL if that stop has not ended it ``ORPHAN_GRACE_S``
later. A watchdog rather than Linux's ``PR_SET_PDEATHSIG``: that signal follows the *thread*
that started the child, and fires when that thread ends while the parent lives on.

A child handed the DSN of the parent's embedded server also holds that server while it runs
(``SLIDEWIN_HOLDS_EMBEDDED``: ``db.embedded.hold``), as any command using it does: the server
stops when the last of them ends, never under a child whose parent was killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

PARENT_ENV = "SLIDEWIN_PARENT_PID"
HOLD_ENV = "SLIDEWIN_HOLDS_EMBEDDED"
ORPHAN_POLL_S = 0.5
ORPHAN_GRACE_S = 90.0  # a clean stop (an ingest's last batch, Spark, the JVM) fits in this


def slidewin_argv(*args: str) -> list[str]:
    """The command line running ``slidewin`` with this interpreter (no PATH lookup), as a
    child of this process (``child_main``)."""
    # not ``-m slidewin.client.cli``: that would import the command modules twice (as __main__)
    return [sys.executable, "-c", CHILD_MAIN, *args]


CHILD_MAIN = "from slidewin.client.processes import child_main; child_main()"


def child_main() -> None:
    """A slidewin child's entry point: end with the parent, hold its embedded server, run."""
    parent = os.environ.pop(PARENT_ENV, None)  # not handed on to the child's own children
    if parent and parent.isdigit():
        watch_parent(int(parent))
    held = os.environ.pop(HOLD_ENV, None)
    if held:
        from slidewin.db import embedded

        embedded.hold(Path(held))
    from slidewin.client.cli import main

    main()


def watch_parent(
    parent_pid: int, poll_s: float = ORPHAN_POLL_S, grace_s: float = ORPHAN_GRACE_S
) -> threading.Thread:
    """Stop this process (SIGTERM, then SIGKILL after ``grace_s``) once ``parent_pid`` is no
    longer its parent -- at once if it already is not."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        _quiet_dead_pipes()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace_s)
        os.kill(os.getpid(), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="slidewin-parent-watch", daemon=True)
    thread.start()
    return thread


@dataclass(frozen=True)
class Launch:
    """How to start a slidewin child: its command line and its environment."""

    argv: list[str]
    env: dict[str, str]


def _quiet_dead_pipes() -> None:
    """Point stdout and stderr at /dev/null where they are pipes: the parent read them, and
    with it gone a write fails (EPIPE), which would fail the clean stop half-way."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in (1, 2):
            with contextlib.suppress(OSError):
                if stat.S_ISFIFO(os.fstat(fd).st_mode):
                    os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def slidewin_child(dsn: str, *args: str, base_env: Mapping[str, str] | None = None) -> Launch:
    """``slidewin ARGS`` against ``dsn``, the DSN handed over in SLIDEWIN_DSN: a command line is
    shown to every user of the machine (``ps``), a process's environment only to its owner and
    root, and a DSN may hold a password. Every child slidewin starts goes through here; the
    child ends with this process, and holds the embedded server ``dsn`` names, if any (see the
    module docstring)."""
    if any(arg == "--dsn" or arg.startswith("--dsn=") for arg in args):
        raise ValueError("pass the DSN as slidewin_child's first argument, not as --dsn")
    from slidewin.db import embedded

    env = dict(os.environ if base_env is None else base_env)
    env["SLIDEWIN_DSN"] = dsn
    env[PARENT_ENV] = str(os.getpid())  # the child ends with this process (``child_main``)
    served = embedded.data_dir_serving(dsn)
    if served is not None:
        env[HOLD_ENV] = str(served)
    return Launch(slidewin_argv(*args), env)


@dataclass
class Child:
    """A child process in its own process group, its output kept (tail) and copied to a log."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=40))
    reader: threading.Thread | None = None

    @property
    def pgid(self) -> int:
        return self.proc.pid  # start_new_session makes the child its group's leader

    def alive(self) -> bool:
        return self.proc.poll() is None

    def group_alive(self) -> bool:
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pgid, sig)

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM the child alone (it stops its own JVM cleanly; a SIGTERM to the whole group
        would kill the JVM under the child's feet), wait; then SIGTERM and at last SIGKILL
        whatever is left of its group. Returns the child's exit code."""
        deadline = time.monotonic() + timeout_s
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        self._wait_group(time.monotonic() + 5.0)  # the JVM exits on its own once orphaned
        for sig, grace_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
            if self.alive() or self.group_alive():
                self.signal_group(sig)
                self._wait_group(time.monotonic() + grace_s)
        self.proc.wait()
        if self.reader is not None:
            self.reader.join(timeout=5)
        return self.proc.returncode

    def _wait_group(self, until: float) -> None:
        while (self.alive() or self.group_alive()) and time.monotonic() < until:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=0.1)


def start_child(
    name: str,
    argv: list[str],
    log_path: Path,
    env: dict[str, str] | None = None,
    on_line: Callable[[str], None] | None = None,
) -> Child:
    """Start ``argv`` in a new session; stdout+stderr go to ``log_path`` and a short tail."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )
    child = Child(name, proc, log_path)
    child.reader = threading.Thread(
        target=_pump, args=(proc.stdout, child, on_line), name=f"pump-{name}", daemon=True
    )
    child.reader.start()
    return child


def _pump(stream: IO[bytes] | None, child: Child, on_line: Callable[[str], None] | None) -> None:
    if stream is None:
        return
    with open(child.log_path, "ab") as log:
        for raw in stream:
            log.write(raw)
            log.flush()
            text = raw.decode("utf-8", "replace").rstrip()
            child.tail.append(text)
            if on_line is not None:
                on_line(text)
