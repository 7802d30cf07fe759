"""How the ingest names a failure: a Spark job cancelled by a stop is no unreadable file (the
batch rolls back instead of dead-lettering its files), and a declared stream's failure says
"stream s failed", once. No Spark: the Spark side is a stand-in that raises what Spark raises."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.errors import PySparkException

from slidewin.ingest.config import IngestConfig
from slidewin.ingest.errors import BatchCancelled, is_cancellation
from slidewin.ingest.runner import _stream_failed
from slidewin.ingest.stream import BatchHandler
from slidewin.ingest.typed_stream import StreamHandler

DSN = "postgresql://nobody@127.0.0.1:1/none"  # never connected to
CANCELLED = (
    "[SPARK_JOB_CANCELLED] Job 12 cancelled part of cancelled job group "
    "9f0c2a4e-1b7d-4c55-8a0e-0d3c1f2e5b6a SQLSTATE: XXKDA"
)
SHUT_DOWN = "Job 3 cancelled because SparkContext was shut down"
CORRUPT = "[FAILED_READ_FILE.NO_HINT] Error while reading file file:/l/x.parquet. SQLSTATE: KD001"


def config(tmp_path: Path) -> IngestConfig:
    land = tmp_path / "landing"
    land.mkdir(exist_ok=True)
    return IngestConfig(landing=land, checkpoint_dir=tmp_path / "cp", archive_dir=tmp_path / "a")


class RaisingSpark:
    """Stands in for a SparkSession whose every read fails with ``message``."""

    def __init__(self, message: str) -> None:
        self.message = message

    @property
    def read(self) -> object:
        raise PySparkException(message=self.message)


@pytest.mark.parametrize("text", [CANCELLED, SHUT_DOWN, "java.lang.InterruptedException"])
def test_a_cancelled_spark_job_is_recognised(text):
    assert is_cancellation(PySparkException(message=text))


def test_a_cancellation_is_recognised_down_the_cause_chain():
    wrapper = RuntimeError("batch failed")
    wrapper.__cause__ = PySparkException(message=CANCELLED)
    assert is_cancellation(wrapper)


@pytest.mark.parametrize("text", [CORRUPT, "Job aborted due to stage failure: file too short"])
def test_a_file_spark_cannot_read_is_no_cancellation(text):
    assert not is_cancellation(PySparkException(message=text))


def test_a_parquet_read_cancelled_by_a_stop_rolls_the_batch_back_instead_of_dead_lettering(
    tmp_path,
):
    handler = BatchHandler(config(tmp_path), DSN, "parquet", 4, lambda *_: None)
    stopped = r"\[parquet\] batch cancelled: Spark stopped its job \(\[SPARK_JOB_CANCELLED\] Job 12"
    with pytest.raises(BatchCancelled, match=stopped):
        handler._collect_files(RaisingSpark(CANCELLED), ["/l/x.parquet"], [])


def test_any_spark_failure_once_the_stop_began_rolls_the_batch_back(tmp_path):
    handler = BatchHandler(config(tmp_path), DSN, "parquet", 4, lambda *_: None)
    handler.cancel()  # what the runner calls when it stops the queries
    with pytest.raises(BatchCancelled):
        handler._collect_files(RaisingSpark(CORRUPT), ["/l/x.parquet"], [])


def test_a_file_spark_cannot_read_is_still_one_unreadable_file_dead_letter(tmp_path):
    handler = BatchHandler(config(tmp_path), DSN, "parquet", 4, lambda *_: None)
    table = handler._collect_files(RaisingSpark(CORRUPT), ["/l/x.parquet"], [])
    assert table.column("reason").to_pylist() == ["unreadable_file"]


def test_a_declared_stream_failure_names_the_stream_once(tmp_path):
    handler = StreamHandler(config(tmp_path), DSN, "s", lambda *_: None)
    handler.failure = (3, ValueError("bad"))
    message = str(_stream_failed(handler, RuntimeError("FOREACH_BATCH_USER_FUNCTION_ERROR")))
    assert message.startswith("stream s failed in batch 3: ValueError: bad;"), message
    assert "stream stream" not in message
    handler.failure = None
    message = str(_stream_failed(handler, RuntimeError("boom")))
    assert message.startswith("stream s failed in Spark: boom;"), message


def test_a_built_in_reader_failure_still_names_its_reader(tmp_path):
    handler = BatchHandler(config(tmp_path), DSN, "text", 4, lambda *_: None)
    handler.failure = (0, ValueError("bad"))
    assert str(_stream_failed(handler, RuntimeError("x"))).startswith(
        "stream text failed in batch 0: ValueError: bad;")
