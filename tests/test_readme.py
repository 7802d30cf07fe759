"""The README's copy-pastable blocks run, in order, as a new user would run them.

Every fenced ``sh`` and ``sql`` block of README.md is run top to bottom against one fresh data
folder and the embedded PostgreSQL (no DSN: the product's default), with only these changes:

* ``--duration N`` becomes a few seconds (the commands are the same, the runs shorter);
* the environment steps of a ``&&`` chain (``python3 -m venv``, ``. .venv/bin/activate``,
  ``pip install``) are this test run's own environment (tests/test_wheel.py installs for real),
  and ``pytest`` is this very run;
* a command ending in ``&`` starts in the background and runs until the end; a command that runs
  until stopped (``slidewin ingest`` without ``--once``, ``jobs run`` without ``--for``,
  ``--follow``) runs for a few seconds, then gets Ctrl-C and must exit 130;
* SQL blocks run statement by statement on one connection to the store (``slidewin db url``).

Every other command must exit 0. A block that cannot run here says why in an HTML comment
just above it, ``<!-- readme-test: skip: REASON -->`` (Docker, a multi-machine cluster); a
block with neither such a comment nor a command this test knows fails the test, so the README
cannot gain an example nobody runs.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SLIDEWIN = str(Path(sys.executable).parent / "slidewin")
# serial: `slidewin db roles` makes the default role set, which belongs to the whole server
pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.serial]

SHORT_DURATION = "8"  # above the client's default --warmup of 5 s
UNTIL_STOPPED_S = 6.0  # how long a command that runs until stopped runs before its Ctrl-C
def environment_step(part: str) -> bool:
    """A step that sets up or tests the checkout (venv, activate, pip, pytest), not the walk."""
    return any(rx.match(part) for rx in ENVIRONMENT_STEPS) or part.split()[:1] == ["pytest"]


ENVIRONMENT_STEPS = (re.compile(r"^python3? -m venv \S+$"), re.compile(r"^\. \S+/bin/activate$"),
                     re.compile(r"^pip install .+$"))
FENCE = re.compile(
    r"(?:<!-- readme-test: (?P<note>.*?) -->\s*\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.S)


@dataclass
class Block:
    lang: str
    body: str
    line: int
    note: str | None


def blocks(text: str) -> list[Block]:
    found = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start("body"))
        found.append(Block(m.group("lang"), m.group("body"), line, m.group("note")))
    return found


def commands(body: str) -> list[str]:
    """The block's commands: continuation lines joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", body)
    out = []
    for raw in joined.splitlines():
        line = _strip_comment(raw).strip()
        if line:
            out.append(line)
    return out


def _strip_comment(line: str) -> str:
    """The line without a trailing `# comment` (outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def statements(body: str) -> list[str]:
    text = "\n".join(line.split("--", 1)[0] if not line.lstrip().startswith("--") else ""
                     for line in body.splitlines())
    return [s.strip() for s in text.split(";") if s.strip()]


def runs_until_stopped(argv: list[str]) -> bool:
    if "--follow" in argv:
        return True
    if argv[1:2] == ["ingest"]:
        return "--once" not in argv
    return argv[1:3] == ["jobs", "run"] and "--for" not in argv


@dataclass
class Session:
    """The new user's shell: one data folder, the embedded server, background processes."""

    data_dir: Path
    env: dict[str, str]
    background: list[tuple[str, subprocess.Popen]] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    started: list[subprocess.Popen] = field(default_factory=list)

    def start(self, argv: list[str], **kwargs: Any) -> subprocess.Popen:
        """``argv`` in a process group of its own, remembered: the fixture kills the whole
        group at the end, so a Spark JVM (a child of ``slidewin ingest``) never outlives the
        test, even when the command was killed or never answered its Ctrl-C."""
        proc = subprocess.Popen(argv, env=self.env, text=True, start_new_session=True, **kwargs)
        self.started.append(proc)
        return proc

    def argv(self, command: str) -> list[str]:
        argv = shlex.split(command)
        assert argv[0] == "slidewin", f"not a slidewin command: {command}"
        if "--duration" in argv:
            argv[argv.index("--duration") + 1] = SHORT_DURATION
        return [SLIDEWIN, *argv[1:]]

    def run(self, command: str) -> None:
        background = command.endswith("&")
        argv = self.argv(command.rstrip("&").strip())
        self.ran.append(command)
        if background:
            proc = self.start(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            self.background.append((command, proc))
            time.sleep(1.0)  # the behaviour: a background command is still up a second on
            assert proc.poll() is None, (command, proc.communicate()[1][-2000:])
            return
        if runs_until_stopped(argv):
            self._run_then_stop(command, argv)
            return
        proc = self.start(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{command}\n{out[-2000:]}\n{err[-2000:]}"

    def _run_then_stop(self, command: str, argv: list[str]) -> None:
        proc = self.start(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(UNTIL_STOPPED_S)  # the behaviour: it runs until stopped, then Ctrl-C
        assert proc.poll() is None, (command, proc.communicate()[1][-2000:])
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, f"{command}: exit {proc.returncode}\n{err[-2000:]}"

    def sql(self, statement: str) -> list[tuple]:
        url = subprocess.run([SLIDEWIN, "db", "url"], env=self.env, capture_output=True,
                             text=True, check=True).stdout.strip()
        with psycopg.connect(url, autocommit=True) as conn:
            try:
                cur = conn.execute(statement)
            except psycopg.Error as exc:
                raise AssertionError(f"{statement}\n{exc}") from None
            rows = cur.fetchall() if cur.description else []
        self.ran.append(statement)
        return rows

    def stop(self) -> None:
        for _command, proc in self.background:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for command, proc in self.background:
            try:
                _, err = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise AssertionError(f"{command} did not stop after Ctrl-C") from None
            assert proc.returncode == 130, f"{command}: exit {proc.returncode}\n{err[-2000:]}"
        subprocess.run([SLIDEWIN, "db", "stop"], env=self.env, capture_output=True, timeout=120)


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Session]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SLIDEWIN_DSN", "DATABASE_URL", "SLIDEWIN_TEST_DSN")}
    env.update(SLIDEWIN_DATA_DIR=str(tmp_path / "data"), PYTHONUNBUFFERED="1")
    session = Session(tmp_path / "data", env)
    try:
        yield session
    finally:
        for proc in session.started:  # each command's whole group: its Spark JVM too
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        subprocess.run([SLIDEWIN, "db", "stop"], env=env, capture_output=True, timeout=120)


def test_every_block_is_run_or_says_why_not() -> None:
    for block in blocks(README.read_text(encoding="utf-8")):
        if block.lang not in ("sh", "sql") or (block.note or "").startswith("skip:"):
            continue
        if block.lang == "sh":
            for command in commands(block.body):
                parts = [p.strip() for p in command.split("&&")]
                for part in parts:
                    if environment_step(part):
                        continue
                    assert part.startswith("slidewin"), (
                        f"README line {block.line}: `{part}` is neither a slidewin command nor "
                        "marked <!-- readme-test: skip: REASON -->")


def test_the_readme_runs_top_to_bottom(shell: Session) -> None:
    for block in blocks(README.read_text(encoding="utf-8")):
        if block.lang not in ("sh", "sql") or (block.note or "").startswith("skip:"):
            continue
        if block.lang == "sql":
            for statement in statements(block.body):
                shell.sql(statement)
            continue
        for command in commands(block.body):
            for part in (p.strip() for p in command.split("&&")):
                if environment_step(part):
                    continue
                shell.run(part)
    # the examples ran against real data: the client's events went through the ingest
    [(events, rollups)] = shell.sql(
        "SELECT (SELECT count(*) FROM slidewin.events), (SELECT sum(n) FROM slidewin.rollups)")
    assert events > 1000 and rollups == events
    shell.stop()
    assert len(shell.ran) > 40, shell.ran
