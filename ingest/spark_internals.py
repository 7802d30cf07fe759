"""Every private name of Spark and PySpark that slidewin uses, and nothing else.

What it touches (as of PySpark 4.3), what breaks if Spark changes it, and the fallback:

- The partition-by-partition pull (``ingest.pull``): the JVM's ``Dataset.toArrowBatchRdd``
  (through ``DataFrame._jdf``), ``FilePartition.files()`` and ``PartitionedFile.filePath()``
  / ``.start()`` for the partitions' file order, ``PythonRDD.runJob`` (through
  ``SparkContext._jvm`` and ``._jsc``) and ``pyspark.util._load_from_socket``. If one is gone
  or changed, ``PullUnavailable`` is raised before or instead of the partition's rows; the
  stream handler then rolls the batch back and reads it (and every later batch) file by file
  with the public ``toArrow``: slower, same rows. (Partitions whose files cannot be listed,
  not being file scans, are pulled first, in index order.)
- The py4j gateway (``ingest.spark``): ``SparkContext._gateway`` (None until this process
  launched a JVM: decides whether the class cache applies), its ``proc`` (the JVM's Popen,
  set by PySpark's ``launch_gateway``), and resetting ``SparkContext._gateway`` / ``._jvm``
  after a stop so that the next session launches a new JVM. Without ``proc`` (a JVM PySpark
  did not launch) ``jvm_pid`` is None and a stop does not wait for the JVM. If ``_gateway``
  is renamed every session counts as a new JVM (the class cache state may be wrong) and a
  second session in the same process would try the closed gateway (slidewin starts one per
  process; the tests share one).
- The checkpoint file manager: the internal setting
  ``spark.sql.streaming.checkpointFileManagerClass`` and the class
  ``FileSystemBasedCheckpointFileManager`` (its package moved between versions). Without either
  name, Spark's default (FileContext) manager stays: correct, but it forks a ``readlink`` per
  checkpoint log file on the local file system.
- Class names in the log4j2 profile (``QUIET_LOGGERS``, ``SHELL_LOGGER``): if a class moves,
  its warnings come back in the log, or (``SHELL_LOGGER``) Spark says "Setting default log
  level" as it starts (noise only).
- The read option ``__globPaths__`` (``GLOB_PATHS_OPTION``, DataSource's ``GLOB_PATHS_KEY``):
  ``false`` makes a batch read take its paths as paths, not Hadoop glob patterns, so a file
  named ``a[1].jsonl`` is that file (the file source sets it for its own batches). With it set,
  a read of several paths repeats every path once per path holding a glob character, so such
  files are read alone (``ingest.stream``). If the option is renamed, such a name is a pattern
  again: the file is read as whatever it matches, or is an ``unreadable_file`` dead letter.
- The local property ``spark.sql.execution.id`` (``SQL_EXECUTION_ID``, SparkContext's
  ``SQL_EXECUTION_ID_KEY``): the pull's jobs run without it. Spark 4 files every job that
  carries an SQL execution's id under that execution (``DAGScheduler.activeQueryToJobs``), and
  a job's entry holds its results until the execution ends; a micro-batch is one execution, so
  every partition pulled stayed in the driver's heap until the batch committed (a 2.4 GB file
  filled a 1 GB heap). If the key is renamed, that memory grows with the batch again.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slidewin.ingest.errors import first_line

# PySpark and py4j are imported where used: ``ingest.spark`` (which needs QUIET_LOGGERS) is
# imported before Spark is wanted and stays free of them
if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# the JVM Dataset's method (private[sql]) that makes Arrow IPC batches per partition
ARROW_BATCH_RDD = "toArrowBatchRdd"
CHECKPOINT_MANAGER_SETTING = "spark.sql.streaming.checkpointFileManagerClass"
GLOB_PATHS_OPTION = "__globPaths__"
SQL_EXECUTION_ID = "spark.sql.execution.id"
CHECKPOINT_MANAGERS = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager",
)
_STREAMING = "org.apache.spark.sql.execution.streaming"
# the class whose logger sets the level of a shell's log (PySpark's JVM is one): see log_profile
SHELL_LOGGER = "org.apache.spark.api.python.PythonGatewayServer"
# (key in the log4j2 profile, logger = Spark class, level) -- see ingest.spark.log_profile for why
QUIET_LOGGERS = (
    ("hadoop", "org.apache.hadoop.util.NativeCodeLoader", "error"),
    ("dag", "org.apache.spark.scheduler.DAGScheduler", "error"),
    ("stream", f"{_STREAMING}.runtime.MicroBatchExecution", "fatal"),
    ("fsutils", "org.apache.spark.util.HadoopFSUtils", "error"),
    ("archiver", f"{_STREAMING}.runtime.FileStreamSource$SourceFileArchiver", "error"),
    ("sink", f"{_STREAMING}.sinks.FileStreamSink", "error"),
    # "Current batch is falling behind" after every batch longer than the trigger: with a
    # short trigger under load that is every batch, and it is the design (the next one starts
    # at once), not a fault
    ("trigger", f"{_STREAMING}.runtime.ProcessingTimeExecutor", "error"),
)


# --- the partition-by-partition pull ------------------------------------------------------------


class PullUnavailable(RuntimeError):
    """This Spark has no partition-by-partition Arrow path (an internal API changed)."""


@dataclass(frozen=True)
class ArrowBatchRdd:
    """A DataFrame planned once as Arrow IPC batches per partition, with what a job on one
    partition needs. ``files[i]``: partition i's file splits as (path, offset), [] when it
    is not a file scan partition."""

    files: list[list[tuple[str, int]]]
    jrdd: Any  # the JavaRDD of the partitions' serialized batches
    jsc: Any  # the JVM SparkContext
    run_job: Any  # PythonRDD.runJob
    load: Any  # pyspark.util._load_from_socket


def arrow_batch_rdd(df: DataFrame) -> ArrowBatchRdd:
    """Plan ``df`` as Arrow batches per partition (no Spark job runs yet).

    Spark errors (``Py4JJavaError``) pass through; a missing or changed internal API raises
    ``PullUnavailable``."""
    from py4j.protocol import Py4JError, Py4JJavaError

    try:
        from pyspark.util import _load_from_socket
    except ImportError as exc:
        raise PullUnavailable(first_line(str(exc))) from exc
    sc = df.sparkSession.sparkContext
    try:
        rdd = getattr(df._jdf, ARROW_BATCH_RDD)()
        files = [_split_files(partition) for partition in rdd.partitions()]
        jvm: Any = sc._jvm
        jrdd, jsc, run_job = rdd.toJavaRDD(), sc._jsc.sc(), jvm.PythonRDD.runJob
    except Py4JJavaError:
        raise  # Spark itself failed: not a missing API
    except (Py4JError, AttributeError) as exc:
        raise PullUnavailable(first_line(str(exc))) from exc
    return ArrowBatchRdd(files, jrdd, jsc, run_job, _load_from_socket)


def _split_files(partition: Any) -> list[tuple[str, int]]:
    from py4j.protocol import Py4JError

    try:
        return [(f.filePath().toString(), f.start()) for f in partition.files()]
    except Py4JError:  # not a file scan partition
        return []


@contextlib.contextmanager
def partition_frames(rdd: ArrowBatchRdd, index: int) -> Iterator[Iterator[bytes]]:
    """Run the job of partition ``index``; yield its serialized Arrow record batches.

    A changed ``runJob`` raises ``PullUnavailable``; Spark errors and a lost JVM pass
    through."""
    from py4j.protocol import Py4JError, Py4JJavaError, Py4JNetworkError
    from pyspark.serializers import NoOpSerializer

    try:
        sock_info = rdd.run_job(rdd.jsc, rdd.jrdd, [index])
    except (Py4JJavaError, Py4JNetworkError):
        raise
    except Py4JError as exc:
        raise PullUnavailable(first_line(str(exc))) from exc
    with rdd.load(sock_info, NoOpSerializer()) as frames:
        yield frames


# --- the gateway -------------------------------------------------------------------------------


def jvm_running() -> bool:
    """Whether this process already has a JVM gateway (a new session joins its JVM)."""
    from pyspark import SparkContext

    return getattr(SparkContext, "_gateway", None) is not None


def gateway_of(spark: SparkSession) -> Any:
    """The py4j gateway of ``spark``'s JVM (None if PySpark no longer keeps one there)."""
    return getattr(spark.sparkContext, "_gateway", None)


def jvm_process(gateway: Any) -> subprocess.Popen[bytes] | None:
    """The JVM's ``subprocess.Popen`` (None when PySpark did not launch it). Not a plain
    ``getattr``: a py4j gateway answers any attribute it lacks with a JVM member."""
    proc = getattr(gateway, "proc", None)
    return proc if isinstance(proc, subprocess.Popen) else None


def close_gateway(gateway: Any) -> None:
    """Close the gateway and make PySpark forget it, so a next session launches a new JVM."""
    from pyspark import SparkContext

    try:
        gateway.shutdown()
    except Exception:  # noqa: S110 - the JVM may already be gone; nothing left to close
        pass
    SparkContext._gateway = None
    SparkContext._jvm = None


# --- the checkpoint file manager ---------------------------------------------------------------


def use_plain_checkpoint_files(spark: SparkSession) -> str | None:
    """Have checkpoint logs written through FileSystem.rename, not FileContext (which forks a
    ``readlink`` shell per log file on the local file system). Returns the manager class set,
    None when this Spark has none of ``CHECKPOINT_MANAGERS`` (Spark's default stays)."""
    for name in CHECKPOINT_MANAGERS:
        try:
            jvm: Any = spark._jvm
            jvm.java.lang.Class.forName(name)
        except Exception:  # noqa: S112 - not in this Spark version; try the next name
            continue
        spark.conf.set(CHECKPOINT_MANAGER_SETTING, name)
        return name
    return None
