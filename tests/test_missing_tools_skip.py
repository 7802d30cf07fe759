"""A machine without Java or Chromium skips the tests that need them, each with its reason, and
never errors: a small selection of the real tests runs in a child pytest whose environment hides
the tool (JAVA_HOME at a folder with no JDK and no java on PATH; no chromium on PATH).

The selection covers each way a test reaches Spark: the test session's shared ``spark``
fixture (tests.conftest), the ``spark`` marker on a test that runs the CLI's ingest
in a child process, and the JVM class-cache test."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_pytest(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )


def bare_env(tmp_path: Path) -> dict[str, str]:
    """The environment with PATH holding only a folder of our own (no java, no chromium)."""
    bare = tmp_path / "bin"
    bare.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in {"JAVA_HOME", "SLIDEWIN_CHROMIUM", "PYTEST_ADDOPTS"}}
    env["PATH"] = str(bare)
    return env


def outcome(done: subprocess.CompletedProcess[str]) -> dict[str, int]:
    """``{'skipped': 3, 'passed': 1}`` from pytest's summary line."""
    last = done.stdout.strip().splitlines()[-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", last)}


@pytest.mark.slow
def test_spark_tests_skip_with_the_reason_when_java_is_missing(tmp_path: Path) -> None:
    env = bare_env(tmp_path)
    env["JAVA_HOME"] = str(tmp_path / "no-jdk")
    done = run_pytest(
        env, "tests/test_spark_internals.py", "tests/test_cli_errors.py",
        "tests/test_ingest_classcache.py", "-m", "spark",
    )
    counts = outcome(done)
    assert set(counts) == {"skipped", "deselected"} and counts["skipped"] >= 5, done.stdout[-3000:]
    assert done.returncode == 0, done.stdout[-3000:]
    reasons = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert reasons and all("java" in line.lower() for line in reasons), reasons


def test_browser_tests_skip_with_the_reason_when_chromium_is_missing(tmp_path: Path) -> None:
    done = run_pytest(bare_env(tmp_path), "tests/test_serve_browser.py")
    counts = outcome(done)
    assert set(counts) == {"skipped"}, done.stdout[-3000:]
    assert done.returncode == 0
    assert "no Chromium on this machine" in done.stdout
