"""Where the client's lines go: a rich live view on a terminal, plain lines otherwise.

Plain mode prints every report and max-tracker line as it comes (what a log, a pipe or a test
sees, in VoltDB's layout). The live view keeps the latest report on screen, under a short log of
the latest max changes and messages, redrawn in place; when it closes the last screen stays.
Both write to the stream they are given: stdout, or stderr when stdout carries a command's JSON
(``slidewin client --json``); ``NullDisplay`` shows nothing (``--json -q``).
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from typing import Any, Protocol, TextIO


class Display(Protocol):
    def line(self, text: str) -> None: ...
    def report(self, lines: list[str]) -> None: ...
    def close(self) -> None: ...


class PlainDisplay:
    """Every line printed as it comes; a lock keeps a report's lines together."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.lock = threading.Lock()

    def line(self, text: str) -> None:
        with self.lock:
            self.out.write(text + "\n")
            self.out.flush()

    def report(self, lines: list[str]) -> None:
        with self.lock:
            self.out.write("\n".join(lines) + "\n\n")
            self.out.flush()

    def close(self) -> None:
        with self.lock:
            self.out.flush()


class NullDisplay:
    """Shows nothing: the reports of a quiet run whose stdout holds only its JSON."""

    def line(self, text: str) -> None:
        pass

    def report(self, lines: list[str]) -> None:
        pass

    def close(self) -> None:
        pass


class LiveDisplay:
    """The latest report in a panel under the latest few max/messages lines, redrawn in place."""

    def __init__(
        self, title: str = "slidewin client", keep: int = 8, console: Any = None
    ) -> None:
        from rich.console import Console
        from rich.live import Live

        self.title = title
        self.log: deque[str] = deque(maxlen=keep)
        self.latest: list[str] = ["waiting for the first report..."]
        self.lock = threading.Lock()
        self.live = Live(
            self._render(), console=console or Console(), auto_refresh=False, transient=False
        )
        self.live.start()

    def _render(self):
        from rich.console import Group
        from rich.panel import Panel
        from rich.text import Text

        log = Text("\n".join(self.log) or "(no maximum yet)", style="cyan")
        return Group(log, Panel(Text("\n".join(self.latest)), title=self.title))

    def line(self, text: str) -> None:
        with self.lock:
            self.log.append(text)
            self.live.update(self._render(), refresh=True)

    def report(self, lines: list[str]) -> None:
        with self.lock:
            self.latest = lines
            self.live.update(self._render(), refresh=True)

    def close(self) -> None:
        with self.lock:
            self.live.stop()


def make_display(live: bool | None = None, out: TextIO | None = None) -> Display:
    """Live when ``out`` (default stdout) is a terminal or ``live`` is True, plain otherwise."""
    stream = out or sys.stdout
    use_live = stream.isatty() if live is None else live
    if not use_live:
        return PlainDisplay(stream)
    from rich.console import Console

    return LiveDisplay(console=Console(file=stream))
