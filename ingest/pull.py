"""A DataFrame's partitions as Arrow tables, pulled one at a time into the driver, in file order.

Why: ``toArrow`` returns the whole result at once, so a batch written while Spark works had to
be planned again for every chunk of files -- and on a fresh JVM planning is the costly part.
Here the batch is planned once and each partition is one Spark job: while the caller writes
partition k, a helper thread has Spark compute the next one, so at most two partitions are in
memory, whatever the batch's size (the jobs run outside the batch's SQL execution, which
would keep every job's results until the batch ends: ``spark_internals.SQL_EXECUTION_ID``).

Order: Spark places a scan's file splits largest first, which for files of about one size is
no order at all. PostgreSQL inserts rows in key order into the primary key (part, ts, uuid)
much faster than scattered ones, and files usually arrive in time order, so the partitions
are pulled in the order of their files' paths (then offsets), as the file-by-file path reads
them.

The JVM side is ``Dataset.toArrowBatchRdd`` (Arrow IPC record batches per partition, as
``toArrow`` makes them) and ``PythonRDD.runJob`` (what ``SparkContext.runJob`` uses), both
internal to Spark and used only through ``ingest.spark_internals``: ``PullUnavailable`` says
when this Spark lacks them, and callers fall back.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.util import inheritable_thread_target

from slidewin.ingest.spark_internals import (
    SQL_EXECUTION_ID,
    ArrowBatchRdd,
    PullUnavailable,
    arrow_batch_rdd,
    partition_frames,
)

__all__ = [
    "AHEAD",
    "PullUnavailable",
    "arrow_partitions",
    "arrow_schema",
    "indexed_partitions",
    "partition_order",
]

# partitions Spark computes ahead of the caller: with two, Spark's tasks took the core the
# database writes on, and JSON gained little
AHEAD = 1


def arrow_partitions(df: DataFrame) -> Iterator[pa.Table]:
    """Each non-empty partition of ``df`` as one Arrow table, in the order of its files."""
    for _index, table in indexed_partitions(df):
        yield table


def indexed_partitions(df: DataFrame, ahead: int = AHEAD) -> Iterator[tuple[int, pa.Table]]:
    """``(partition index, table)`` for each non-empty partition of ``df``, in the order of its
    files. The index is Spark's partition id (``spark_partition_id()`` in a plan over the same
    scan), which ties a table to what another job computed of the same partition.

    ``ahead``: partitions computed at once ahead of the caller (each a Spark job of its own).

    Spark errors surface as they do for ``toArrow`` (``Py4JJavaError``) when the partition
    that raised them is pulled. If the caller stops early, the partition being computed is
    finished (and dropped) before the generator closes.
    """
    schema = arrow_schema(df)
    rdd = arrow_batch_rdd(df)  # PullUnavailable when this Spark lacks the path
    order = partition_order(rdd.files)
    if not order:
        return
    # the helper thread runs Spark jobs with this thread's local properties (in a batch: the
    # streaming query's job group and description), but outside the batch's SQL execution:
    # Spark keeps each job of an execution, results included, until the execution ends
    sc = df.sparkSession.sparkContext

    def outside_execution(index: int) -> pa.Table:
        sc.setLocalProperty(SQL_EXECUTION_ID, None)  # type: ignore[arg-type]
        return _collect(rdd, index, schema)

    collect: Callable[[int], pa.Table] = inheritable_thread_target(df.sparkSession)(
        outside_execution
    )
    with ThreadPoolExecutor(max_workers=ahead, thread_name_prefix="slidewin-pull") as pool:
        running = deque((index, pool.submit(collect, index)) for index in order[:ahead])
        following = iter(order[ahead:])
        while running:
            index, pulling = running.popleft()
            table = pulling.result()
            if (more := next(following, None)) is not None:
                running.append((more, pool.submit(collect, more)))
            if table.num_rows:
                yield index, table


def _collect(rdd: ArrowBatchRdd, index: int, schema: pa.Schema) -> pa.Table:
    """Run one partition's job and read its Arrow record batches."""
    with partition_frames(rdd, index) as frames:
        batches = [pa.ipc.read_record_batch(pa.py_buffer(frame), schema) for frame in frames]
    return pa.Table.from_batches(batches, schema)


def partition_order(files: Sequence[list[tuple[str, int]]]) -> list[int]:
    """Partition indices sorted by (first file path, offset), given each partition's file
    splits; partitions that are not file splits (no files) come first, in index order."""
    keys = [(min(split) if split else ("", index), index) for index, split in enumerate(files)]
    return [index for _, index in sorted(keys)]


def arrow_schema(df: DataFrame) -> pa.Schema:
    """The Arrow schema Spark writes ``df``'s batches in (as ``toArrow`` computes it)."""
    conf = df.sparkSession.conf
    return to_arrow_schema(
        df.schema,
        error_on_duplicated_field_names_in_struct=True,
        timezone=conf.get("spark.sql.session.timeZone"),
        prefers_large_types=conf.get("spark.sql.execution.arrow.useLargeVarTypes") == "true",
    )
