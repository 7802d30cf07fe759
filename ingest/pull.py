"""A DataFrame's partitions as Arrow tables, pulled one at a time into the driver, in file order.

Why: ``toArrow`` returns the whole result at once, so a batch written while Spark works had to
be planned again for every chunk of files -- and on a fresh JVM planning is the costly part
(20 one-file plans on a cold driver: about 5 s of wall time and 10 s of JVM CPU for 20 rows).
Here the batch is planned once and each partition is one Spark job: while the caller writes
partition k, a helper thread has Spark compute the next one, so at most two partitions are in
memory, whatever the batch's size.

Order: Spark places a scan's file splits largest first, which for files of about one size is
no order at all. PostgreSQL inserts rows in key order into the primary key (part, ts, uuid)
much faster than scattered ones (measured: the database's CPU per batch rose by a third), and
files usually arrive in time order, so the partitions are pulled in the order of their files'
paths (then offsets), as the file-by-file path reads them.

The JVM side is ``Dataset.toArrowBatchRdd`` (Arrow IPC record batches per partition, as
``toArrow`` makes them) and ``PythonRDD.runJob`` (what ``SparkContext.runJob`` uses), both
internal to Spark: ``PullUnavailable`` says when this Spark lacks them, and callers fall back.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.serializers import NoOpSerializer
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.util import _load_from_socket, inheritable_thread_target

from ingest.errors import first_line

# partitions Spark computes ahead of the caller: with two, Spark's tasks took the core the
# database writes on (4M Parquet events: 15.0 s against 13.4 s) and JSON gained little
AHEAD = 1


class PullUnavailable(RuntimeError):
    """This Spark has no partition-by-partition Arrow path (an internal API changed)."""


def arrow_partitions(df: DataFrame) -> Iterator[pa.Table]:
    """Each non-empty partition of ``df`` as one Arrow table, in the order of its files.

    Spark errors surface as they do for ``toArrow`` (``Py4JJavaError``) when the partition
    that raised them is pulled. If the caller stops early, the partition being computed is
    finished (and dropped) before the generator closes.
    """
    schema = arrow_schema(df)
    sc = df.sparkSession.sparkContext
    try:
        rdd = df._jdf.toArrowBatchRdd()
        order = partition_order(rdd)
        jrdd = rdd.toJavaRDD()
    except Py4JJavaError:
        raise  # Spark itself failed: not a missing API
    except Py4JError as exc:
        raise PullUnavailable(first_line(str(exc))) from exc
    if not order:
        return
    # the helper thread runs Spark jobs with this thread's local properties (in a batch: the
    # streaming query's job group and description)
    collect: Callable[[int], pa.Table] = inheritable_thread_target(df.sparkSession)(
        lambda index: _collect(sc, jrdd, index, schema)
    )
    with ThreadPoolExecutor(max_workers=AHEAD, thread_name_prefix="slidewin-pull") as pool:
        running = deque(pool.submit(collect, index) for index in order[:AHEAD])
        for following in [*order[AHEAD:], None]:
            table = running.popleft().result()
            if following is not None:
                running.append(pool.submit(collect, following))
            if table.num_rows:
                yield table


def _collect(sc: object, jrdd: object, index: int, schema: pa.Schema) -> pa.Table:
    """Run one partition's job and read its Arrow record batches."""
    sock_info = sc._jvm.PythonRDD.runJob(sc._jsc.sc(), jrdd, [index])
    with _load_from_socket(sock_info, NoOpSerializer()) as frames:
        batches = [pa.ipc.read_record_batch(pa.py_buffer(frame), schema) for frame in frames]
    return pa.Table.from_batches(batches, schema)


def partition_order(rdd: object) -> list[int]:
    """Partition indices sorted by (first file path, offset); partitions that are not file
    splits come first, in index order."""
    keys = []
    for index, partition in enumerate(rdd.partitions()):
        try:
            files = [(f.filePath().toString(), f.start()) for f in partition.files()]
        except Py4JError:  # not a file scan partition
            files = []
        keys.append((min(files) if files else ("", index), index))
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
