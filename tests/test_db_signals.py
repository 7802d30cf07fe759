"""db.signals: handlers for the length of a block, the previous ones restored after."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from slidewin.db.signals import STOP_SIGNALS, handling, stop_on_signals


def _current() -> dict[int, object]:
    return {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}


def test_sigterm_and_sigint_set_stop_and_the_old_handlers_come_back():
    before = _current()
    for sig in STOP_SIGNALS:
        stop = threading.Event()
        with stop_on_signals(stop):
            assert _current() != before
            os.kill(os.getpid(), sig)
            assert stop.wait(5)
        assert _current() == before


def test_handlers_are_restored_when_the_block_raises():
    before = _current()

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), handling(interrupt, (signal.SIGTERM,)):
        assert signal.getsignal(signal.SIGINT) is before[signal.SIGINT]  # only SIGTERM
        os.kill(os.getpid(), signal.SIGTERM)
        threading.Event().wait(5)  # the handler raises here
    assert _current() == before


def test_outside_the_main_thread_nothing_changes():
    before, seen = _current(), []

    def body() -> None:
        with stop_on_signals(threading.Event()):
            seen.append(_current())

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert seen == [before] and _current() == before
