"""The fast tier's guard (tests/durations_guard.py), in a pytest run by pytester on tiny
generated tests, with the limit set to 0.1 s so no test waits 10 s: an unmarked test over the
limit fails naming its duration and the fix; a ``slow`` one, a quick one and a slow session
fixture's setup do not."""

from __future__ import annotations

import pytest

from tests.durations_guard import LIMIT_ENV

GENERATED = """
import time
import pytest

@pytest.fixture(scope="session")
def started():
    time.sleep(0.25)  # a session fixture's start, like the shared SparkSession's

def test_quick():
    pass

def test_over_the_limit():
    time.sleep(0.25)

@pytest.mark.slow
def test_marked_slow():
    time.sleep(0.25)

def test_after_a_slow_session_fixture(started):
    pass

def test_failing_quickly():
    assert False, "its own failure"
"""


@pytest.fixture
def guarded(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.RunResult:
    monkeypatch.setenv(LIMIT_ENV, "0.1")
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    pytester.makepyfile(test_generated=GENERATED)
    return pytester.runpytest("-p", "tests.durations_guard", "-rA")


def test_an_unmarked_test_over_the_limit_fails_naming_its_duration_and_the_fix(guarded):
    guarded.assert_outcomes(passed=3, failed=2)
    out = guarded.stdout.str()
    assert "FAILED test_generated.py::test_over_the_limit" in out
    guarded.stdout.re_match_lines([
        r".*test_generated.py::test_over_the_limit ran \d+\.\d s, over the 0\.1 s allowed a test "
        r"without the slow marker \(SLIDEWIN_TEST_UNMARKED_LIMIT_S\): mark it @pytest.mark.slow"])


def test_slow_marked_tests_and_session_fixture_setup_are_not_counted(guarded):
    guarded.stdout.fnmatch_lines_random([
        f"PASSED test_generated.py::{name}"
        for name in ("test_quick", "test_marked_slow", "test_after_a_slow_session_fixture")])


def test_a_test_that_fails_on_its_own_keeps_its_own_failure(guarded):
    guarded.stdout.fnmatch_lines(
        ["FAILED test_generated.py::test_failing_quickly - *its own failure*"])
    assert "test_failing_quickly ran" not in guarded.stdout.str()


def test_a_limit_that_is_not_a_number_is_a_usage_error(pytester, monkeypatch):
    monkeypatch.setenv(LIMIT_ENV, "ten")
    pytester.makepyfile(test_generated="def test_quick():\n    pass\n")
    result = pytester.runpytest("-p", "tests.durations_guard")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*SLIDEWIN_TEST_UNMARKED_LIMIT_S='ten' is not a number of seconds: set it to e.g. 10"])
