"""The processes a command starts, watched from outside: every descendant seen while it ran,
with its start time (so a reused pid does not pass for the old process) and its command line
(what ``ps`` shows every user). Used by the tests that check nothing outlives a command."""

from __future__ import annotations

import threading
from pathlib import Path


class ProcessWatch:
    """Polls the descendants of ``pid`` every half second until ``stop``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seen: dict[int, float] = {}
        self.command_lines: dict[int, str] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            children = children_of(self.pid)
            self.seen.update(children)
            self.command_lines.update(command_lines(list(children)))
            if self._done.wait(0.5):  # a sample every half second; ``stop`` ends it at once
                return

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=5)

    def still_running(self) -> list[int]:
        return still_running(self.seen)


def children_of(pid: int) -> dict[int, float]:
    """Every descendant of ``pid``: {pid: start time}. psutil when present, else /proc."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - Linux fallback
        return _proc_children(pid)
    try:
        return {p.pid: p.create_time() for p in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return {}


def _proc_children(pid: int) -> dict[int, float]:
    parents: dict[int, list[int]] = {}
    starts: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry.name))
        starts[int(entry.name)] = float(fields[19])
    found, todo = {}, [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found[child] = starts[child]
            todo.append(child)
    return found


def still_running(seen: dict[int, float]) -> list[int]:
    alive = []
    for pid, started in seen.items():
        now = _start_time(pid)
        if now is not None and abs(now - started) < 1e-3:  # same pid, same process
            alive.append(pid)
    return alive


def _start_time(pid: int) -> float | None:
    """The start time of ``pid`` if it still exists (and is not a zombie), else None."""
    try:
        import psutil
    except ImportError:  # pragma: no cover
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return None if fields[0] == "Z" else float(fields[19])
    try:
        proc = psutil.Process(pid)
        return None if proc.status() == psutil.STATUS_ZOMBIE else proc.create_time()
    except psutil.Error:
        return None


def command_lines(pids: list[int]) -> dict[int, str]:
    """The command lines of ``pids`` as ``ps`` shows them to every user."""
    import psutil

    found = {}
    for pid in pids:
        try:
            found[pid] = " ".join(psutil.Process(pid).cmdline())
        except psutil.Error:
            continue
    return found
