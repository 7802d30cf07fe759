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
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType

# Parquet physical types Spark reads as slidewin's columns without converting anything
_VAL_TYPES = {"INT64"}
_UUID_TYPES = {"BYTE_ARRAY"}


@dataclass(frozen=True)
class FileCheck:
    """What a Parquet file's footer says: ``ok``, ``foreign`` (readable, other schema) or
    ``unreadable``, with the reason in words for the last two."""

    path: str
    kind: str
    reason: str = ""


def check(path: str) -> FileCheck:
    """Read ``path``'s footer and compare its columns with slidewin's (case-insensitive, as
    Spark's reader matches them; other columns are ignored)."""
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
    return FileCheck(path, "ok")


def _mismatch(name: str, column: pq.ColumnSchema | None) -> str:
    if column is None:
        return f"no column {name}"
    if column.max_repetition_level:  # a list: not a flat column
        return f"{name} is a repeated column"
    physical, logical = column.physical_type, column.logical_type
    if name == "uuid" and physical not in _UUID_TYPES:
        return f"uuid is {physical}, not text"
    if name == "val" and (physical not in _VAL_TYPES or _unsigned(logical)):
        return f"val is {_type_name(physical, logical)}, not a signed 64-bit integer"
    if name == "ts" and not _utc_timestamp(physical, logical):
        return f"ts is {_type_name(physical, logical)}, not a UTC timestamp"
    return ""


def _unsigned(logical: object) -> bool:
    return "isSigned=false" in str(logical)


def _utc_timestamp(physical: str, logical: object) -> bool:
    """INT96 (Spark's legacy timestamps) or INT64 TIMESTAMP adjusted to UTC."""
    text = str(logical)
    return physical == "INT96" or (
        physical == "INT64" and text.startswith("Timestamp") and "isAdjustedToUTC=true" in text
    )


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
    object of all its columns (binary ones as text, so a key stays a key, not base64)."""
    df = spark.read.parquet(path)
    columns = [
        F.col(f"`{f.name}`").cast("string").alias(f.name)
        if isinstance(f.dataType, BinaryType)
        else F.col(f"`{f.name}`")
        for f in df.schema.fields
    ]
    source = F.col("_metadata.file_name").alias("source")
    return df.select(F.to_json(F.struct(*columns)).alias("raw"), source)
