"""Waiting in tests: on a condition with a deadline, never a fixed sleep.

A fixed ``sleep`` is either too short on a busy machine (a flaky test) or too long everywhere
(a slow one). ``wait_until`` polls a predicate until it returns something truthy and fails with
what it waited for and the last value seen. A predicate may raise to give up early (a process
that exited while the test waited for its output).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T], timeout_s: float, interval_s: float = 0.05, what: str = ""
) -> T:
    """Call ``predicate`` every ``interval_s`` until it returns a truthy value, and return that
    value; after ``timeout_s`` raise an AssertionError naming ``what`` and the last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout_s:g} s waiting for {what or 'the condition'} "
                f"(last value: {value!r})"
            )
        time.sleep(interval_s)
