"""How a command stopped by a signal ends: exit code 128 + the signal's number.

``slidewin client`` and ``slidewin demo`` run to an end of their own (``--duration``). Stopped
early by Ctrl-C (SIGINT) or SIGTERM, they still finish cleanly -- the client stops writing, the
demo's children are stopped in order, the summary is printed -- and then fail with
``Interrupted``: one ``error:`` line, exit code 130 (SIGINT) or 143 (SIGTERM), the codes a shell
reports for a process those signals end, so a script can tell a cut-short run from a complete
one (with --json, stdout still ends with one JSON object: the summary so far, the error and the
code). ``db.signals.Stop`` remembers which signal came.

Commands that run until they are stopped -- ``slidewin ingest``, ``jobs run``, ``--follow`` --
end otherwise (``stopped_by``): 130 after Ctrl-C, as shells report it, and 0 after SIGTERM, a
supervisor's normal way to stop a service.
"""

from __future__ import annotations

import signal

from slidewin.db.errors import SlidewinError
from slidewin.db.signals import Stop

INTERRUPTED_EXIT = 128 + signal.SIGINT  # 130, what shells report for Ctrl-C


def signal_exit(signum: int) -> int:
    """The exit code for a run ended by ``signum``: 130 for SIGINT, 143 for SIGTERM."""
    return 128 + signum


def signal_name(signum: int) -> str:
    name = signal.Signals(signum).name
    return f"{name} (Ctrl-C)" if signum == signal.SIGINT else name


class Interrupted(SlidewinError):
    """A run stopped early by a signal; its exit code is 128 + the signal's number."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum
        self.exit_code = signal_exit(signum)


def stopped_by(stop: Stop) -> None:
    """End a command that runs until stopped: exit 130 if Ctrl-C stopped it (SIGTERM: 0)."""
    if stop.signum == signal.SIGINT:
        import click

        click.get_current_context().exit(INTERRUPTED_EXIT)


def interrupted(stop: Stop, what: str) -> Interrupted | None:
    """The error a run ends with when a signal stopped it (``what`` says how far it got)."""
    if stop.signum is None:
        return None
    return Interrupted(f"stopped by {signal_name(stop.signum)} {what}", stop.signum)
