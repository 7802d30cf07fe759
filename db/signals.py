"""Signal handlers for the length of a block, the previous ones restored after it.

Here, below ingest, jobs and client, so each long-running command stops the same way: SIGINT
(Ctrl-C) and SIGTERM set a stop flag its main loop checks, and whoever ran it before -- a test,
PySpark's own SIGINT handler, an outer command -- gets its handlers back.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from types import FrameType
from typing import Any

Handler = Callable[[int, FrameType | None], Any]
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def handling(handler: Handler, signals: Iterable[int] = STOP_SIGNALS) -> Iterator[None]:
    """While inside, ``signals`` call ``handler``; after, the previous handlers are back.

    Only the main thread may install handlers; in another thread this changes nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    try:
        for sig in signals:
            previous[sig] = signal.signal(sig, handler)
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class Stop(threading.Event):
    """A stop flag that remembers the signal that first set it: a command stopped by Ctrl-C
    exits 130 (what shells report for SIGINT) after stopping cleanly."""

    signum: int | None = None


def stop_on_signals(
    stop: threading.Event, signals: Iterable[int] = STOP_SIGNALS
) -> contextlib.AbstractContextManager[None]:
    """While inside, SIGINT and SIGTERM set ``stop`` instead of raising (main thread only)."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        if isinstance(stop, Stop) and stop.signum is None:
            stop.signum = signum
        stop.set()

    return handling(handler, signals)
