"""Spark's own log stays out of the terminal unless -v: log4j logs only FATAL (no WARN or ERROR
lines, no Java stack traces), py4j's shutdown tracebacks are not printed, and a failure still
reaches the user as slidewin's own line (here: a Parquet file Spark cannot read becomes one
``unreadable_file`` dead letter and a batch line saying so)."""

from __future__ import annotations

import logging
import re
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from slidewin.ingest.spark import PY4J_LOGGER, log4j_file, log_profile, quiet_py4j, session_conf
from slidewin.ingest.spark_internals import SHELL_LOGGER
from tests.conftest import T0
from tests.ingest_fixtures import event, write_jsonl
from tests.test_ingest_crash import SLIDEWIN, env_with

# what Spark's noise looks like: a log4j line, a Java stack frame or cause, a py4j traceback
NOISE = re.compile(
    r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR) "
    r"|^\s+at [\w.$<>]+\(|^\s*\.\.\. \d+ more|^Caused by: |Traceback \(most recent call last\)"
    r"|Exception"
)
JVM_BANNER = "WARNING: Using incubator modules"  # the JVM's own, before any log is set up


def test_spark_logs_only_fatal_unless_verbose():
    quiet = log_profile()
    assert "rootLogger.level = fatal\n" in quiet
    assert f"logger.shell.name = {SHELL_LOGGER}\nlogger.shell.level = fatal\n" in quiet
    assert "rootLogger.level = warn\n" in log_profile(verbose=True)
    assert session_conf()["spark.log.level"] == "FATAL"
    assert session_conf(verbose=True)["spark.log.level"] == "WARN"
    options = session_conf()["spark.driver.extraJavaOptions"]
    assert f"-Dlog4j2.configurationFile=file:{log4j_file()}" in options
    assert log4j_file().read_text(encoding="utf-8") == quiet
    assert log4j_file(verbose=True) != log4j_file()


def test_py4j_tracebacks_are_quiet_unless_verbose():
    logger = logging.getLogger(PY4J_LOGGER)
    before = logger.level
    try:
        quiet_py4j()
        assert not logger.isEnabledFor(logging.ERROR)
        quiet_py4j(verbose=True)
        assert logger.isEnabledFor(logging.WARNING)
    finally:
        logger.setLevel(before)


def unreadable_parquet(path: Path) -> Path:
    """A Parquet file whose footer is fine (so Spark reads it) and whose first data page header
    is not: Spark's read fails with pages of ERROR and WARN lines and Java stack traces."""
    n = 500
    table = pa.table({"uuid": [f"k{i}" for i in range(n)], "val": pa.array(range(n), pa.int64()),
                      "ts": pa.array([T0] * n, pa.timestamp("us", tz="UTC"))})
    pq.write_table(table, path, compression="snappy")
    offset = pq.ParquetFile(path).metadata.row_group(0).column(1).data_page_offset
    data = bytearray(path.read_bytes())
    data[offset:offset + 40] = b"\xff" * 40
    path.write_bytes(bytes(data))
    return path


@pytest.mark.spark
@pytest.mark.slow
def test_an_ingest_once_run_prints_slidewins_lines_and_no_java_stack_traces(make_store, tmp_path):
    dsn = make_store(2)
    land = tmp_path / "landing"
    land.mkdir()
    unreadable_parquet(land / "bad.parquet")
    write_jsonl(land, "good.jsonl", [event(f"k{i}", i, i) for i in range(5)])
    argv = [SLIDEWIN, "--dsn", dsn, "--data-dir", str(tmp_path / "data"), "ingest",
            "--landing", str(land), "--once", "--master", "local[1]", "--grace", "1000d"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                          env=env_with("quiet", None))
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if not line.startswith(JVM_BANNER)]
    assert not [line for line in lines if NOISE.search(line)], done.stderr[-3000:]
    assert any(line.startswith("[parquet] batch 0: in 1, accepted 0, dup 0, rejected 1 "
                               "(unreadable_file 1)") for line in lines), done.stderr
    assert lines[-1].startswith("ingest stopped: "), done.stderr
