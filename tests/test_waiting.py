"""tests.waiting: a wait returns as soon as its condition holds, and a wait that times out says
what it waited for and what it last saw."""

from __future__ import annotations

import time

import pytest

from tests.waiting import wait_until


def test_a_wait_returns_the_first_truthy_value_without_sleeping_out_the_timeout() -> None:
    seen = iter([0, [], "ready", "later"])
    started = time.monotonic()
    assert wait_until(lambda: next(seen), timeout_s=30, interval_s=0.01) == "ready"
    assert time.monotonic() - started < 5


def test_a_wait_that_times_out_names_what_it_waited_for_and_the_last_value() -> None:
    calls = []

    def count() -> int:
        calls.append(1)
        return 0

    with pytest.raises(AssertionError, match=r"after 0.2 s waiting for the rows \(last value: 0\)"):
        wait_until(count, timeout_s=0.2, interval_s=0.01, what="the rows")
    assert len(calls) >= 2  # polled, not looked at once


def test_a_predicate_that_raises_ends_the_wait_at_once() -> None:
    def exited() -> bool:
        raise AssertionError("the process exited")

    started = time.monotonic()
    with pytest.raises(AssertionError, match="the process exited"):
        wait_until(exited, timeout_s=30)
    assert time.monotonic() - started < 5
