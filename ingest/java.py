"""Finding Java 17+ before Spark starts, so a missing JVM is one clear line, not a py4j trace.

Spark 4 needs Java 17 or newer. We look where PySpark will look: ``$JAVA_HOME/bin/java`` when
JAVA_HOME is set, else ``java`` on PATH, and parse ``java -version`` (``"17.0.15"``, ``"21"``,
or the old ``"1.8.0_392"`` form).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from slidewin.ingest.errors import JavaUnavailable

MIN_JAVA = 17
INSTALL_HINT = (
    "install Java 17 or newer, e.g. `sudo apt-get install openjdk-17-jre-headless` "
    "(Debian/Ubuntu), `brew install openjdk@17` (macOS) or https://adoptium.net, "
    "then put it on PATH or set JAVA_HOME to its folder"
)
_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?[^"]*"')


def java_executable(env: dict[str, str] | None = None) -> str | None:
    """The java binary PySpark would run, or None when there is none."""
    env = dict(os.environ) if env is None else env
    home = env.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        return str(candidate) if candidate.is_file() else None
    return shutil.which("java", path=env.get("PATH"))


def parse_java_major(version_output: str) -> int | None:
    """``'openjdk version "17.0.15"'`` -> 17; ``'java version "1.8.0_392"'`` -> 8."""
    match = _VERSION.search(version_output)
    if not match:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2):
        return int(match.group(2))
    return major


def check_java(env: dict[str, str] | None = None) -> int:
    """Return the Java major version, or raise JavaUnavailable with how to install it."""
    java = java_executable(env)
    if java is None:
        where = "JAVA_HOME/bin/java" if (env or os.environ).get("JAVA_HOME") else "java on PATH"
        raise JavaUnavailable(f"Spark needs Java {MIN_JAVA}+ but found no {where}; {INSTALL_HINT}")
    try:
        done = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaUnavailable(f"could not run {java} -version ({exc}); {INSTALL_HINT}") from None
    major = parse_java_major(done.stderr + done.stdout)
    if major is None or major < MIN_JAVA:
        found = "an unknown version" if major is None else f"Java {major}"
        raise JavaUnavailable(f"Spark needs Java {MIN_JAVA}+ but {java} is {found}; {INSTALL_HINT}")
    return major
