"""Every fallback of ``ingest.spark_internals``, on real Spark and real PostgreSQL: each test
makes one of Spark's private names unavailable (as a Spark that renamed it would) and checks
what slidewin does instead -- above all that the ingest still stores every event exactly once
when the partition-by-partition pull is unavailable."""

from __future__ import annotations

import dataclasses

import pytest

from slidewin.ingest import pull, spark_internals
from slidewin.ingest.spark_internals import PullUnavailable
from tests.ingest_fixtures import (
    clean_ingest_state,
    event,
    spark_conf,
    stored_rows,
    truth_from_jsonl,
)
from tests.test_ingest_stream import (
    files_in_order,
    ingest_once,
    markers,
    three_batches_and_a_replay,
    write_files,
)

pytestmark = pytest.mark.spark


@pytest.fixture
def iconn(conn):
    return clean_ingest_state(conn)


@pytest.fixture
def pulls(monkeypatch) -> list[str]:
    """What each pull attempt came to ("pulled" or "unavailable"), recorded as it happens."""
    seen: list[str] = []
    real = pull.arrow_batch_rdd

    def counted(df):
        try:
            rdd = real(df)
        except PullUnavailable:
            seen.append("unavailable")
            raise
        seen.append("pulled")
        return rdd

    monkeypatch.setattr(pull, "arrow_batch_rdd", counted)
    return seen


@pytest.fixture
def no_pull(monkeypatch):
    """A Spark whose Dataset has no ``toArrowBatchRdd``: the JVM answers with a real Py4JError."""
    monkeypatch.setattr(spark_internals, "ARROW_BATCH_RDD", "toArrowBatchRddRenamed")


@pytest.mark.slow
def test_without_the_pull_the_ingest_stores_everything_exactly_once(
    spark, store_dsn, iconn, tmp_path, pulls, no_pull
):
    """The first batch tries the pull, rolls back and is read file by file; later batches go
    file by file at once. Rows, rollups and batch markers are those of a run with the pull
    (test_ingest_stream.test_duplicates_within_across_files_and_replays)."""

    def tried_once():
        assert pulls == ["unavailable"]

    three_batches_and_a_replay(spark, store_dsn, iconn, tmp_path, after_first=tried_once)


@pytest.mark.slow
def test_without_the_pull_parquet_files_are_read_file_by_file(
    spark, store_dsn, iconn, tmp_path, pulls, no_pull
):
    land = tmp_path / "landing"
    land.mkdir()
    write_files(land)
    ingest_once(spark, store_dsn, tmp_path, format="parquet", max_files_per_trigger=10)
    assert pulls == ["unavailable"]
    assert len(stored_rows(iconn)) == 110
    assert markers(iconn) == [(0, 110, 110, 0, 0)]


def test_a_pyspark_without_load_from_socket_cannot_pull(spark, tmp_path, monkeypatch):
    import pyspark.util

    from slidewin.ingest.parse import read_files

    monkeypatch.delattr(pyspark.util, "_load_from_socket")
    df = read_files(spark, "parquet", write_files(tmp_path, {"a": 3}))
    with pytest.raises(PullUnavailable, match="_load_from_socket"):
        list(pull.arrow_partitions(df))


def test_a_changed_run_job_is_pull_unavailable(spark, tmp_path, monkeypatch):
    """The job of a partition runs in the helper thread: the error still reaches the caller
    as PullUnavailable (which the stream handler falls back on), not as a batch failure."""
    from slidewin.ingest.parse import read_files

    df = read_files(spark, "parquet", write_files(tmp_path, {"a": 3, "b": 4}))
    java_context = spark.sparkContext._jsc  # not the SparkContext runJob takes: no such method

    def planned(frame):
        return dataclasses.replace(spark_internals.arrow_batch_rdd(frame), jsc=java_context)

    monkeypatch.setattr(pull, "arrow_batch_rdd", planned)
    with pytest.raises(PullUnavailable, match="runJob"):
        list(pull.arrow_partitions(df))


@pytest.mark.slow
def test_without_the_plain_checkpoint_manager_spark_keeps_its_default(
    spark, store_dsn, iconn, tmp_path, monkeypatch
):
    setting = spark_internals.CHECKPOINT_MANAGER_SETTING
    before = spark.conf.get(setting, None)
    assert before in spark_internals.CHECKPOINT_MANAGERS  # this Spark has one of them
    monkeypatch.setattr(spark_internals, "CHECKPOINT_MANAGERS", ("org.example.NoSuchManager",))
    with spark_conf(spark, {setting: None}):
        assert spark_internals.use_plain_checkpoint_files(spark) is None
        assert spark.conf.get(setting, None) is None
        land = tmp_path / "landing"
        land.mkdir()
        files = files_in_order(land, [[event("a", 1, 0)], [event("b", 2, 1), event("a", 1, 0)]])
        ingest_once(spark, store_dsn, tmp_path)
        assert stored_rows(iconn) == truth_from_jsonl(files)
        assert (tmp_path / "cp" / "text" / "commits" / "1").is_file()


def test_a_gateway_without_its_process_gives_no_jvm_pid(spark, monkeypatch):
    from slidewin.ingest.spark import jvm_pid

    gateway = spark_internals.gateway_of(spark)
    assert spark_internals.jvm_running()
    assert jvm_pid(spark) == gateway.proc.pid
    monkeypatch.delattr(gateway, "proc")
    assert jvm_pid(spark) is None
