"""The test session's one SparkSession (tests.conftest's ``spark``): no test module starts its
own, and each test gets the session back as the one before it found it -- SQL confs put back,
no streaming query left running."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.ingest_fixtures import SPARK_SHUFFLE_PARTITIONS, handed_back, spark_conf

TESTS = Path(__file__).resolve().parent
SHARED = {"conftest.py", "ingest_fixtures.py"}
# modules whose sessions need a fresh JVM, each in a child process, and why
FRESH_JVM = {"test_ingest_classcache.py": "a JVM writes the class archive as it exits"}


def test_no_test_module_starts_a_spark_session_of_its_own() -> None:
    """Only tests.conftest starts the in-process session; a module that needs a fresh JVM runs
    it in a child process (tests/test_ingest_classcache.py) and says why."""
    own = re.compile(r"^def spark\(|^\s*yield from spark_session\(|^\S.*= build_session\(", re.M)
    skip = SHARED | FRESH_JVM.keys()
    found = sorted(p.name for p in TESTS.glob("*.py")
                   if p.name not in skip and own.search(p.read_text(encoding="utf-8")))
    assert found == [], f"start no SparkSession here, use the shared ``spark`` fixture: {found}"


@pytest.mark.spark
def test_a_conf_changed_by_a_test_is_put_back(spark) -> None:
    key = "spark.sql.shuffle.partitions"
    with handed_back(spark):
        spark.conf.set(key, "7")
        spark.conf.set("spark.slidewin.test.only", "x")
    assert spark.conf.get(key) == str(SPARK_SHUFFLE_PARTITIONS)
    assert spark.conf.get("spark.slidewin.test.only", None) is None


@pytest.mark.spark
def test_spark_conf_sets_and_unsets_for_a_block_only(spark) -> None:
    key, extra = "spark.sql.files.openCostInBytes", "spark.slidewin.test.only"
    before = spark.conf.get(key)
    with spark_conf(spark, {key: "123", extra: "y"}):
        assert (spark.conf.get(key), spark.conf.get(extra)) == ("123", "y")
        with spark_conf(spark, {extra: None}):
            assert spark.conf.get(extra, None) is None
        assert spark.conf.get(extra) == "y"
    assert (spark.conf.get(key), spark.conf.get(extra, None)) == (before, None)


@pytest.mark.spark
def test_a_streaming_query_left_running_is_stopped_and_named(spark) -> None:
    with pytest.raises(AssertionError, match="left running.*forgotten"), handed_back(spark):
        stream = spark.readStream.format("rate").option("rowsPerSecond", 1).load()
        stream.writeStream.format("noop").queryName("forgotten").start()
    assert spark.streams.active == []
