"""The one place a SparkSession is built and torn down.

Defaults suit a laptop or a small VM: ``local[*]``, the UI off (it opens a port and costs memory)
unless asked for, Spark's own log kept out of the terminal (``log_profile``; ``verbose``, the
CLI's ``-v``, shows its warnings and errors), few shuffle partitions (the default 200 makes
tiny tasks that dominate a micro-batch), UTC as the session time zone (naive ISO timestamps
mean UTC), Arrow for ``toArrow``/``toPandas``, and a bounded driver heap, and a
class-data-sharing archive for a faster start (``ingest.classcache``).
``stop_session`` also closes the py4j gateway and waits for the JVM to exit, so a stopped
ingest leaves no JVM behind. Spark's private names (the gateway, the checkpoint file manager,
logger class names) are used only through ``ingest.spark_internals``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from slidewin.ingest import spark_internals
from slidewin.ingest.classcache import ClassCache, class_cache

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_DRIVER_MEMORY = "1g"
DUMP_TIMEOUT_S = 180.0
# per live session started here: its class cache state, and the cache its JVM writes as it
# stops (None when it started from one or has none)
_CACHES: dict[int, tuple[str, ClassCache | None]] = {}
# The throughput collector, not the default G1: G1's concurrent marking and refinement threads
# compete with the tasks and with PostgreSQL on a small machine (faster first batch and higher
# end-to-end rate in ``slidewin bench ingest``); short pauses on a 1 GB heap.
DRIVER_GC = "-XX:+UseParallelGC"
EXCLUDED_RULES = "org.apache.spark.sql.catalyst.optimizer.PushFoldableIntoBranches"
PARTITION_BYTES = 4 * 2**20  # input per Spark partition: a 200k-event Parquet file is ~3 MB
HUGE_METHOD_LIMIT = 8000  # HotSpot's HugeMethodLimit: bytecode the JIT compiles at most
FILE_OPEN_BYTES = 128 * 2**10  # what packing counts per file on top of its size
# Spark's default log4j profile logs INFO until setLogLevel runs and announces itself. Ours
# logs only FATAL by default: Spark's warnings and errors are not the user's to read -- a
# failure that matters reaches slidewin, which says it in one line -- and at a stop under load
# the JVM's heartbeat and RPC threads print pages of stack traces (RpcEndpointNotFoundException)
# about endpoints already shut down. With ``verbose`` (``slidewin ingest -v``) the profile is
# WARN from the first line, and quiets the one warning every laptop gets (no native Hadoop)
# and a failed query's "terminated with error" (pages of Java and Python stack: slidewin reports
# the failure itself, in one line), and the warnings (one with a stack trace) of a restart about
# the last batch's files, which ``ingest.tidy`` archived on purpose when the previous run
# stopped: Spark looks them up again to rebuild that batch's plan and to archive them once more.
# (The quieted class names are in ``spark_internals.QUIET_LOGGERS``.)
QUIET_LEVEL, VERBOSE_LEVEL = "FATAL", "WARN"
_LOG4J2_HEAD = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
"""
# the Python side of the gateway logs a closed connection at a stop with a traceback
PY4J_LOGGER = "py4j"
# PySpark's JVM counts as a shell: its log level comes from this logger's (WARN when it has
# none), and a shell level other than the root's prints "Setting default log level" lines


def log_level(verbose: bool = False) -> str:
    return VERBOSE_LEVEL if verbose else QUIET_LEVEL


def log_profile(verbose: bool = False) -> str:
    """slidewin's log4j2 configuration: FATAL only, or (``verbose``) WARN with a few noisy
    classes quieted (``spark_internals.QUIET_LOGGERS``)."""
    head = _LOG4J2_HEAD.format(level=log_level(verbose).lower())
    if not verbose:
        shell = spark_internals.SHELL_LOGGER
        return head + f"logger.shell.name = {shell}\nlogger.shell.level = {QUIET_LEVEL.lower()}\n"
    return head + "".join(
        f"logger.{key}.name = {name}\nlogger.{key}.level = {level}\n"
        for key, name, level in spark_internals.QUIET_LOGGERS
    )


def log4j_file(verbose: bool = False) -> Path:
    """Write slidewin's log4j2 configuration to the temp directory (idempotent). The name
    carries a digest of the content: two slidewin versions on one machine never read each
    other's."""
    profile = log_profile(verbose)
    digest = hashlib.sha256(profile.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"slidewin-log4j2-{digest}.properties"
    if not path.is_file() or path.read_text(encoding="utf-8") != profile:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(profile, encoding="utf-8")
        os.replace(tmp, path)
    return path


def quiet_py4j(verbose: bool = False) -> None:
    """py4j's own log (a gateway connection closed while the JVM stops, with a Python
    traceback) only with ``verbose``: Python prints a library's warnings to stderr even
    when nothing configured logging."""
    logging.getLogger(PY4J_LOGGER).setLevel(logging.WARNING if verbose else logging.CRITICAL)


def session_conf(
    master: str = "local[*]",
    *,
    ui: bool = False,
    shuffle_partitions: int | None = None,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    java_options: str = "",
    verbose: bool = False,
) -> dict[str, str]:
    """The Spark settings slidewin runs with (pure: testable without a JVM); ``verbose``:
    Spark's warnings and errors on stderr (``log_profile``)."""
    partitions = shuffle_partitions or max(2, os.cpu_count() or 2)
    return {
        "spark.master": master,
        "spark.app.name": "slidewin-ingest",
        "spark.ui.enabled": "true" if ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.log.level": log_level(verbose),
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.default.parallelism": str(partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # a batch's Spark partitions are the chunks the sink writes while Spark computes the
        # next one (ingest.pull): whole files up to PARTITION_BYTES each, small files packed
        # together, larger text files split -- never the few batch-wide partitions Spark's
        # defaults make of many small files (one per core)
        "spark.sql.files.maxPartitionBytes": str(PARTITION_BYTES),
        "spark.sql.files.openCostInBytes": str(FILE_OPEN_BYTES),
        "spark.sql.files.minPartitionNum": "1",
        # streaming plans cannot use adaptive execution; saying so up front avoids a WARN per query
        "spark.sql.adaptive.enabled": "false",
        # keeps the batch's limits out of the generated code (``ingest.parse._at_run_time``):
        # this rule would fold them back into literals, and each batch would compile its plan
        # anew (about 70-100 ms per job here); it only moves constant work into CASE branches
        "spark.sql.optimizer.excludedRules": EXCLUDED_RULES,
        # a stage whose generated method passes HotSpot's 8000-byte limit ran interpreted (the
        # JIT leaves such methods alone): a declared stream's JSON plan took 34 µs a line instead
        # of 20. Past the limit Spark now runs the stage without whole-stage codegen (its
        # expressions still compiled, in methods of their own), as Spark's docs advise on HotSpot
        "spark.sql.codegen.hugeMethodLimit": str(HUGE_METHOD_LIMIT),
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        # local files without Hadoop's checksum layer: it looks for a ``.<name>.crc`` beside
        # every file it opens and cannot name one for a file whose name holds a colon, so
        # ``a:b.jsonl`` failed every read (producers write no .crc files to check anyway)
        "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
        "spark.driver.memory": driver_memory,
        "spark.driver.extraJavaOptions": (
            f"{DRIVER_GC} -Dlog4j2.configurationFile=file:{log4j_file(verbose)} {java_options}"
        ).strip(),
    }


def build_session(
    master: str = "local[*]",
    *,
    ui: bool = False,
    shuffle_partitions: int | None = None,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    verbose: bool = False,
) -> SparkSession:
    """Start (or join) the process's SparkSession with slidewin's settings; ``verbose``:
    Spark's own warnings and errors on stderr, else only what is fatal."""
    warnings.filterwarnings("ignore", message=".*pandas.*", category=FutureWarning)
    from pyspark.sql import SparkSession

    if master.startswith("local") or loopback_master(master):
        # no loopback-address warning, and a driver a cluster on 127.0.0.1 can reach
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    new_jvm = not spark_internals.jvm_running()
    cache = class_cache() if new_jvm else None
    builder = SparkSession.builder
    conf = session_conf(
        master,
        ui=ui,
        shuffle_partitions=shuffle_partitions,
        driver_memory=driver_memory,
        java_options=cache.java_options() if cache else "",
        verbose=verbose,
    )
    quiet_py4j(verbose)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level(verbose))
    # the default FileContext forks a ``readlink`` shell per checkpoint log file (several per
    # micro-batch): a large part of a batch's fixed time on a busy machine
    spark_internals.use_plain_checkpoint_files(spark)
    if new_jvm:
        _CACHES[id(spark)] = _cache_entry(cache)
    return spark


def loopback_master(master: str) -> bool:
    """A standalone master on this machine's loopback address (``spark://127.0.0.1:7077``)."""
    hosts = master.removeprefix("spark://").split(",")
    return master.startswith("spark://") and all(
        h.rsplit(":", 1)[0] in ("127.0.0.1", "localhost") for h in hosts
    )


def _cache_entry(cache: ClassCache | None) -> tuple[str, ClassCache | None]:
    if cache is None:
        return "off", None
    return ("used", None) if cache.ready else ("created", cache)


def class_cache_state(spark: SparkSession) -> str:
    """``created`` when this session's JVM writes the class cache as it stops, ``used`` when
    it started from one, ``off`` when it has none (see ``ingest.classcache``)."""
    return _CACHES.get(id(spark), ("off", None))[0]


def jvm_pid(spark: SparkSession) -> int | None:
    """The process id of the driver JVM (for memory measurement and clean shutdown checks)."""
    proc = spark_internals.jvm_process(spark_internals.gateway_of(spark))
    return proc.pid if proc is not None else None


def stop_session(spark: SparkSession, timeout_s: float = 30.0) -> None:
    """Stop Spark, close the gateway and wait for the JVM to exit (kill it if it will not)."""
    gateway = spark_internals.gateway_of(spark)
    proc = spark_internals.jvm_process(gateway)
    dump = _CACHES.pop(id(spark), ("off", None))[1]
    if dump is not None:
        timeout_s = max(timeout_s, DUMP_TIMEOUT_S)  # the JVM writes its class cache as it exits
    try:
        spark.stop()
    except Exception:
        if proc is None or proc.poll() is None:
            raise
        # the JVM is already dead (killed, out of memory): the error that found that out is
        # the one to report, not this one; the rest below still tidies up
    spark_internals.close_gateway(gateway)
    if proc is None:
        return
    if proc.stdin is not None:
        proc.stdin.close()  # the gateway JVM exits when its stdin closes
    try:
        proc.wait(timeout=timeout_s)
    except Exception:
        proc.kill()
        proc.wait(timeout=timeout_s)
    if dump is not None:
        dump.keep_dump(proc.returncode)
