"""The streaming queries: one file-source stream per reader, each with a foreachBatch shell.

``BatchHandler`` is the thin shell Spark calls per micro-batch: it keeps one psycopg connection
per stream and hands ``sink.write_batch`` a ``compute`` callback that runs the Spark side
(parse -> classify -> in-batch dedup -> Arrow) once the sink has locked the stream state.
Event-time lateness is decided here against the committed stream state, NOT with Spark's
``withWatermark`` (which drops late rows silently; promise 2 says nothing is dropped silently).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime

import psycopg
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from db.connect import connect
from ingest import batch, parse
from ingest.config import IngestConfig
from ingest.sink import BatchResult, BatchRows, InlineRetention, write_batch

OnResult = Callable[[str, BatchResult], None]


class BatchHandler:
    """The ``foreachBatch`` callable of one stream."""

    def __init__(
        self, config: IngestConfig, dsn: str, stream: str, partitions: int, on_result: OnResult
    ) -> None:
        self.config, self.dsn, self.stream = config, dsn, stream
        self.partitions, self.on_result = partitions, on_result
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        with self._lock:
            result = write_batch(
                self._connection(),
                self.config.marker_id(self.stream),
                self.config.query_id,
                batch_id,
                lambda newest: self.compute(df, newest),
                self._inline(),
            )
        self.on_result(self.stream, result)

    def compute(self, df: DataFrame, newest_before: datetime | None) -> BatchRows:
        """Spark: parse and classify against the stream state, one Arrow table; then the
        in-batch dedup on Arrow (``ingest.batch``)."""
        limits = parse.Limits(
            now=datetime.now(UTC),
            newest_before=newest_before,
            grace=self.config.grace,
            history=self.config.history,
            max_future=self.config.max_future,
        )
        parsed = parse.parse_parquet(df) if self.stream == "parquet" else parse.parse_text(df)
        classified = parse.classify(parsed, limits)
        return batch.split(parse.batch_output(classified, self.partitions).toArrow())

    def _inline(self) -> InlineRetention | None:
        if not self.config.inline:
            return None
        return InlineRetention(self.config.history, self.config.max_rows, self.config.chunk or 100)

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = connect(self.dsn, autocommit=True)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def start_stream(
    spark: SparkSession, config: IngestConfig, handler: BatchHandler
) -> StreamingQuery:
    """Start one stream's query with its own checkpoint and trigger."""
    df = parse.read_stream(spark, config, handler.stream)
    writer = (
        df.writeStream.foreachBatch(handler)
        .queryName(
            f"slidewin_{config.query_id}_{handler.stream}".replace("-", "_").replace(".", "_")
        )
        .option("checkpointLocation", str(config.checkpoint_for(handler.stream)))
    )
    if config.once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(
            processingTime=f"{int(config.trigger.total_seconds() * 1000)} milliseconds"
        )
    return writer.start()
