"""The fast tier's guard: a test without the ``slow`` marker whose run (the call phase, as
pytest's own report times it) takes longer than SLIDEWIN_TEST_UNMARKED_LIMIT_S (10 s unless
set) fails, naming its duration and the fix. Setup is not counted, so a session fixture's start
(the shared SparkSession, the shared PostgreSQL) is never charged to the first test that uses it.
Loaded by tests/conftest.py; ``-p tests.durations_guard`` loads it into any pytest run."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

LIMIT_ENV = "SLIDEWIN_TEST_UNMARKED_LIMIT_S"
DEFAULT_LIMIT_S = 10.0
LIMIT_KEY = pytest.StashKey[float]()


def unmarked_limit_s() -> float:
    """The longest a test without the ``slow`` marker may run, in seconds: under pytest-xdist,
    ``-n N`` workers share the cores, so the default grows N-fold."""
    raw = os.environ.get(LIMIT_ENV, "")
    if not raw:
        return DEFAULT_LIMIT_S * max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    try:
        limit = float(raw)
    except ValueError:
        raise pytest.UsageError(
            f"{LIMIT_ENV}={raw!r} is not a number of seconds: set it to e.g. 10") from None
    if limit <= 0:
        raise pytest.UsageError(f"{LIMIT_ENV}={raw!r} must be above 0: set it to e.g. 10")
    return limit


def pytest_configure(config: pytest.Config) -> None:
    config.stash[LIMIT_KEY] = unmarked_limit_s()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if report.when != "call" or not report.passed or item.get_closest_marker("slow"):
        return
    limit = item.config.stash[LIMIT_KEY]
    if report.duration > limit:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} ran {report.duration:.1f} s, over the {limit:g} s allowed a test "
            f"without the slow marker ({LIMIT_ENV}): mark it @pytest.mark.slow")
