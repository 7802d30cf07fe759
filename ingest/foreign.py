"""Parquet files that are not of slidewin's schema: found before Spark reads them, then read
with their own schema so that every row still becomes an event or a dead letter.

Why: the parquet stream reads ``uuid string, val bigint, ts timestamp``. A file whose columns
are missing or of other types either fails the whole Spark job (``val`` as text) or, worse, is
read as rows of NULLs (no such columns), whose dead letters would say nothing of what the file
held. Reading each file's footer (a few KB, no data) tells which files are which; a file that
does not match is read with its own schema, each row rendered as a JSON object, and the JSON
goes through the text stream's validation -- so ``{"uuid": "k", "val": "7", ...}`` is stored,
and ``{"a": 1}`` is a ``missing_field`` dead letter that shows the row. A file that has no
readable footer is an ``unreadable_file`` dead letter saying why.

What the typed read takes as it is (Spark widens and converts these itself): ``val`` of any
signed or unsigned integer type up to 32 bits, or a signed 64-bit one; ``ts`` as INT96 or as a
timestamp in milliseconds or microseconds, adjusted to UTC or not (a naive time is UTC, as in
text). What goes the JSON way: a 64-bit unsigned ``val`` (Spark reads it as a decimal, and the
text rules then say ``out_of_range`` past 64-bit), and a timestamp in nanoseconds -- what pandas
writes by default, which Spark refuses to read at all: read as a count of nanoseconds instead
(``spark.sql.legacy.parquet.nanosAsLong``) and cut to the microsecond toward the past, naive
or not (naive = UTC). Rendered as JSON, every timestamp keeps its microseconds.

Columns beyond uuid, val and ts are not stored; ``extra_rows`` counts the rows that had them
(the JSON way counts them in its plan, as for a JSON line with extra members).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from functools import lru_cache

import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType

from slidewin.ingest import eventtime, spark_internals

# Parquet physical types Spark reads as slidewin's columns (integers widened to 64 bits)
_VAL_TYPES = {"INT32", "INT64"}
_UUID_TYPES = {"BYTE_ARRAY"}
_TS_UNITS = {"milliseconds", "microseconds"}  # Spark reads these as timestamps; not nanoseconds
NANOS_AS_LONG = "spark.sql.legacy.parquet.nanosAsLong"
# to_json's defaults keep milliseconds only; naive times stay naive (UTC, as in a JSON line)
_JSON_TIMES = {
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
}


@dataclass(frozen=True)
class FileCheck:
    """What a Parquet file's footer says: ``ok``, ``foreign`` (readable, other schema) or
    ``unreadable``, with the reason in words for the last two."""

    path: str
    kind: str
    reason: str = ""
    extra_rows: int = 0  # an ``ok`` file's rows, when it has columns beyond uuid, val, ts


def check(path: str) -> FileCheck:
    """Read ``path``'s footer and compare its columns with slidewin's (case-insensitive, as
    Spark's reader matches them; other columns are not read). The answer is kept for as long
    as the file keeps its size and modification time: the stream asks twice per batch."""
    try:
        found = os.stat(path)
    except OSError:
        return _check(path, 0, -1)
    if not stat.S_ISREG(found.st_mode):  # a named pipe would block whoever opens it
        return FileCheck(path, "unreadable", "not a regular file (a named pipe, socket or device)")
    return _check(path, found.st_mtime_ns, found.st_size)


@lru_cache(maxsize=4096)
def _check(path: str, mtime_ns: int, size: int) -> FileCheck:
    try:
        meta = pq.ParquetFile(path).metadata
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for a bad footer
        return FileCheck(path, "unreadable", f"not a readable Parquet file: {_words(exc)}")
    if meta.num_rows == 0:  # no rows to lose; such columns are often typed null
        return FileCheck(path, "ok")
    schema = meta.schema
    columns = {schema.column(i).name.lower(): schema.column(i) for i in range(len(schema))}
    wrong = [_mismatch(name, columns.get(name)) for name in ("uuid", "val", "ts")]
    found = [why for why in wrong if why]
    if found:
        return FileCheck(path, "foreign", "; ".join(found))
    extra = set(columns) - {"uuid", "val", "ts"}
    return FileCheck(path, "ok", extra_rows=meta.num_rows if extra else 0)


def extra_rows(paths: list[str]) -> int:
    """Rows of the typed-read files among ``paths`` that had columns beyond uuid, val, ts."""
    return sum(check(path).extra_rows for path in paths)


def _mismatch(name: str, column: pq.ColumnSchema | None) -> str:
    if column is None:
        return f"no column {name}"
    if column.max_repetition_level:  # a list: not a flat column
        return f"{name} is a repeated column"
    physical, logical = column.physical_type, column.logical_type
    if name == "uuid" and physical not in _UUID_TYPES:
        return f"uuid is {physical}, not text"
    if name == "val" and not _integer(physical, _logical(column)):
        return f"val is {_type_name(physical, logical)}, not an integer of up to 64 bits"
    if name == "ts" and not _timestamp(physical, _logical(column)):
        return f"ts is {_type_name(physical, logical)}, not a timestamp in ms or us"
    return ""


def _logical(column: pq.ColumnSchema) -> dict:
    """The column's logical type as pyarrow describes it (``{"Type": "Int", ...}``)."""
    return json.loads(column.logical_type.to_json())


def _integer(physical: str, logical: dict) -> bool:
    """What Spark reads into a 64-bit ``val``: INT32 plain or of any integer logical type
    (signed or not: 32 unsigned bits fit in 64), INT64 plain or signed."""
    kind = logical.get("Type")
    if physical not in _VAL_TYPES or kind not in ("None", "Int"):
        return False
    return physical == "INT32" or kind == "None" or bool(logical.get("isSigned"))


def _timestamp(physical: str, logical: dict) -> bool:
    """INT96 (Spark's legacy timestamps) or an INT64 timestamp in ms or us, UTC or naive."""
    if physical == "INT96":
        return True
    return logical.get("Type") == "Timestamp" and logical.get("timeUnit") in _TS_UNITS


def nanos_columns(path: str) -> set[str]:
    """Names of the columns of a Parquet file that hold timestamps in nanoseconds."""
    schema = pq.ParquetFile(path).metadata.schema
    return {
        schema.column(i).name
        for i in range(len(schema))
        if _logical(schema.column(i)).get("timeUnit") == "nanoseconds"
    }


def _type_name(physical: str, logical: object) -> str:
    """``INT64 (Timestamp(isAdjustedToUTC=false))``: the physical type and the logical type's
    first attribute (the one that decided)."""
    text = str(logical)
    if text in ("None", ""):
        return physical
    head = text.split(",")[0]
    return f"{physical} ({head}{')' if '(' in head and not head.endswith(')') else ''})"


def _words(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text[:300] or type(exc).__name__


def read_foreign(spark: SparkSession, path: str) -> DataFrame:
    """A foreign file's rows as the text stream's columns ``raw, source``: each row as a JSON
    object of all its columns (binary ones as text, so a key stays a key, not base64;
    timestamps, nanoseconds included, to the microsecond)."""
    spark.conf.set(NANOS_AS_LONG, "true")  # else Spark refuses such a file; no other effect
    nanos = nanos_columns(path)
    # a path, not a pattern: a name may hold [ ] { } ? * \ (see ingest.spark_internals)
    df = spark.read.option(spark_internals.GLOB_PATHS_OPTION, "false").parquet(path)
    columns = [_as_json_value(df, f.name, f.name in nanos) for f in df.schema.fields]
    source = F.col("_metadata.file_name").alias("source")
    return df.select(F.to_json(F.struct(*columns), _JSON_TIMES).alias("raw"), source)


def _as_json_value(df: DataFrame, name: str, nanos: bool) -> Column:
    column = F.col("`" + name.replace("`", "``") + "`")
    if nanos:
        return F.timestamp_micros(eventtime.from_nanos(column)).alias(name)
    if isinstance(df.schema[name].dataType, BinaryType):
        return column.cast("string").alias(name)
    return column.alias(name)
