"""The driver JVM's class cache (``ingest.classcache``): where it lives, when it is used or
written, and -- with a real JVM -- that a stopped session leaves an archive the next one uses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from slidewin.ingest.classcache import CACHE_ENV, ClassCache, class_cache
from slidewin.ingest.java import java_executable

HAS_JAVA = java_executable() is not None


def env_with(**kw: str) -> dict[str, str]:
    return {**os.environ, **kw}


@pytest.mark.skipif(not HAS_JAVA, reason="needs java")
def test_the_cache_is_named_by_java_and_pyspark(tmp_path, monkeypatch):
    import pyspark

    first = class_cache(env_with(**{CACHE_ENV: str(tmp_path)}))
    assert first is not None and first.archive.parent == tmp_path
    assert first.archive.name.startswith("spark-classes-") and first.archive.suffix == ".jsa"
    monkeypatch.setattr(pyspark, "__version__", pyspark.__version__ + ".other")
    assert class_cache(env_with(**{CACHE_ENV: str(tmp_path)})) != first


def test_off_no_java_or_a_space_in_the_path_means_no_cache(tmp_path):
    assert class_cache(env_with(**{CACHE_ENV: "off"})) is None
    assert class_cache({"PATH": str(tmp_path), CACHE_ENV: str(tmp_path)}) is None  # no java
    if HAS_JAVA:
        assert class_cache(env_with(**{CACHE_ENV: str(tmp_path / "with space")})) is None


def test_options_dump_until_an_archive_exists_then_use_it(tmp_path):
    cache = ClassCache(tmp_path / "jvm" / "spark-classes-k.jsa")
    dump = cache.java_options()
    assert f"-XX:ArchiveClassesAtExit={cache.dump_path()}" in dump
    assert cache.dump_path().parent.is_dir() and str(os.getpid()) in cache.dump_path().name
    cache.archive.write_bytes(b"archive")
    assert cache.java_options().startswith(f"-XX:SharedArchiveFile={cache.archive} ")


def test_dumps_of_killed_jvms_are_removed(tmp_path):
    cache = ClassCache(tmp_path / "spark-classes-k.jsa")
    gone = psutil.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = tmp_path / f".spark-classes-old.{gone.pid}.tmp"
    alive = tmp_path / f".spark-classes-old.{os.getppid()}.tmp"
    for path in (stale, alive):
        path.write_bytes(b"dump")
    cache.java_options()
    assert not stale.exists() and alive.exists()


def test_only_a_complete_dump_of_a_clean_exit_is_kept(tmp_path):
    cache = ClassCache(tmp_path / "spark-classes-k.jsa")
    for code, content in ((137, b"partial"), (0, b"")):
        cache.dump_path().write_bytes(content)
        assert not cache.keep_dump(code)
        assert not cache.dump_path().exists() and not cache.archive.exists()
    cache.dump_path().write_bytes(b"whole")
    assert cache.keep_dump(0)
    assert cache.archive.read_bytes() == b"whole" and not cache.dump_path().exists()


# each session in a child process of its own, never the shared ``spark`` fixture: the archive is
# written by a JVM as it exits and read by the next one as it starts -- two fresh JVMs
SESSION = """
import sys
from slidewin.ingest.spark import build_session, class_cache_state, stop_session
spark = build_session("local[1]", driver_memory="512m")
state = class_cache_state(spark)
opts = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
assert spark.range(5).count() == 5
stop_session(spark)
print(state, "SharedArchiveFile" in opts, "ArchiveClassesAtExit" in opts)
"""


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.skipif(not HAS_JAVA, reason="needs java")
def test_a_stopped_session_leaves_an_archive_the_next_session_uses(tmp_path):
    env = env_with(**{CACHE_ENV: str(tmp_path)})
    root = Path(__file__).resolve().parents[1]

    def session() -> str:
        done = subprocess.run(
            [sys.executable, "-c", SESSION], cwd=root, env=env, capture_output=True, text=True,
            timeout=300, check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip().splitlines()[-1]

    assert session() == "created False True"
    archives = list(tmp_path.glob("spark-classes-*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 1_000_000
    assert not list(tmp_path.glob(".*.tmp"))
    assert session() == "used True False"
