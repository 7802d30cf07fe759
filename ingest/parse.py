"""Reading the landing directory and turning each micro-batch into good rows and dead letters.

Two file-source streams cover the three formats:

* ``text`` reads JSON Lines (``*.jsonl``, ``*.ndjson``, ``*.json``) and CSV (``*.csv``) as lines
  of text, so every bad line keeps its exact raw text for the dead-letter table. The file's
  extension picks the parser (``from_json`` / ``from_csv``). CSV columns are ``uuid,val,ts`` in
  that order; a header line ``uuid,val,ts`` is skipped, as are blank lines (they hold no event).
* ``parquet`` reads ``*.parquet`` with the schema ``uuid string, val bigint, ts timestamp``; a bad
  row's raw text is its JSON rendering.

Hidden files (``.name`` / ``_name``) and any other extension (``.tmp``, ``.part``) are ignored,
so producers write a temporary name and rename it into place.

Validation gives each row at most one reason, checked in this order: ``malformed`` (not a JSON
object / not CSV), ``missing_field``, ``bad_uuid`` (over 200 characters or a NUL),
``bad_type`` (val not an integer), ``out_of_range`` (val outside 64-bit), ``bad_ts`` (neither
ISO-8601 nor integer epoch milliseconds; naive ISO times are UTC), then against the clock and
the stream: ``future`` (more than max_future ahead of now), ``expired`` (older than the newest
event time seen before this batch minus history), ``late`` (older than that minus grace).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from ingest.config import IngestConfig

FIELDS_DDL = "uuid string, val string, ts string, _corrupt_record string"
PARQUET_DDL = "uuid string, val bigint, ts timestamp"
PARSER_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt_record"}
TEXT_GLOBS = {"auto": "*.{jsonl,ndjson,json,csv}", "json": "*.{jsonl,ndjson,json}", "csv": "*.csv"}
MAX_UUID_CHARS = 200
# A validation rule: (condition, reason code, detail text); the first rule that holds wins.
Rule = tuple[Column, "str | Column", Column]
_REASON = "_slidewin_reason"  # the staged reason column (input columns may be named reason)
# One step of a plan: a select or a filter whose Columns are built once. Building Columns
# costs a py4j round trip each (a few hundred per plan, 0.2-0.35 s); a plan of prebuilt steps
# is applied to each chunk of a batch in about 0.05 s.
Step = Callable[[DataFrame], DataFrame]


@dataclass(frozen=True)
class Limits:
    """What a batch is classified against: the clock and the stream state before the batch."""

    now: datetime
    newest_before: datetime | None
    grace: timedelta
    history: timedelta | None
    max_future: timedelta


def read_stream(spark: SparkSession, config: IngestConfig, stream: str) -> DataFrame:
    """The streaming DataFrame of one stream: columns ``source`` plus the format's own."""
    reader = spark.readStream.option("maxFilesPerTrigger", config.max_files_per_trigger)
    if config.processed != "keep":
        reader = reader.option("cleanSource", config.processed)
    if config.processed == "archive":
        reader = reader.option("sourceArchiveDir", str(config.archive_dir))
    if stream == "parquet":
        df = (
            reader.schema(PARQUET_DDL)
            .option("pathGlobFilter", "*.parquet")
            .parquet(str(config.landing))
        )
        return _columns(df, stream)
    glob = TEXT_GLOBS[config.format if config.format in TEXT_GLOBS else "auto"]
    return _columns(reader.option("pathGlobFilter", glob).text(str(config.landing)), stream)


def read_files(spark: SparkSession, stream: str, paths: list[str]) -> DataFrame:
    """The same columns as ``read_stream``, from a batch read of exactly ``paths`` -- the files
    the file source assigned to a micro-batch (so a chunk of them, or one file, is read
    without scanning the others)."""
    if stream == "parquet":
        return _columns(spark.read.schema(PARQUET_DDL).parquet(*paths), stream)
    return _columns(spark.read.text(paths), stream)


def _columns(df: DataFrame, stream: str) -> DataFrame:
    source = F.col("_metadata.file_name").alias("source")
    if stream == "parquet":
        return df.select("uuid", "val", "ts", source)
    return df.select(F.col("value").alias("raw"), source)


def apply(df: DataFrame, steps: list[Step]) -> DataFrame:
    for step in steps:
        df = step(df)
    return df


def parse_steps(stream: str) -> list[Step]:
    """``parse_parquet`` or ``parse_text`` as steps."""
    return _parquet_steps() if stream == "parquet" else _text_steps()


def classify_steps(stream: str, limits: Limits) -> list[Step]:
    """``classify`` as steps, after ``parse_steps(stream)``; the only steps that depend on the
    batch (its limits), so callers build the others once."""
    return _classify_steps(limits, has_raw=stream != "parquet")


def output_steps(stream: str, partitions: int) -> list[Step]:
    """``batch_output`` as steps, after ``classify_steps(stream, ...)``."""
    return _output_steps(partitions, has_raw=stream != "parquet")


def _select(*columns: Column | str) -> Step:
    return lambda df: df.select(*columns)


def parse_text(df: DataFrame) -> DataFrame:
    """Lines -> ``source, raw, uuid, val, ts, reason, detail`` (reason NULL when valid)."""
    return apply(df, _text_steps())


def _text_steps() -> list[Step]:
    is_csv = F.lower(F.col("source")).endswith(F.lit(".csv"))
    trimmed = F.trim(F.col("raw"))
    header = is_csv & (F.lower(F.regexp_replace(trimmed, r"\s", "")) == F.lit("uuid,val,ts"))
    keep = (trimmed != F.lit("")) & ~header
    parsed = F.when(is_csv, F.from_csv("raw", FIELDS_DDL, PARSER_OPTIONS)).otherwise(
        F.from_json("raw", FIELDS_DDL, PARSER_OPTIONS)
    )
    return [
        lambda df: df.where(keep),
        _select("source", "raw", is_csv.alias("is_csv"), parsed.alias("f")),
        _select("source", "raw", "is_csv", "f.*"),
        *_validate_text(),
    ]


def _validate_text() -> list[Step]:
    uuid, val_s, ts_s = F.col("uuid"), F.trim(F.col("val")), F.trim(F.col("ts"))
    missing = _first_missing(uuid, val_s, ts_s)
    corrupt = F.col("_corrupt_record").isNotNull()
    rules: list[Rule] = [
        (corrupt & ~F.col("is_csv"), "malformed", F.lit("not a JSON object")),
        (corrupt & missing.isNull(), "malformed", F.lit("expected 3 CSV fields: uuid,val,ts")),
        (missing.isNotNull(), "missing_field", F.concat(missing, F.lit(" is missing"))),
        *_value_rules(uuid, val_s, ts_s),
    ]
    return _reason_steps(rules, [
        F.col("source"),
        _clean(F.col("raw")).alias("raw"),
        uuid.alias("uuid"),
        val_s.try_cast("bigint").alias("val"),
        _parse_ts(ts_s).alias("ts"),
    ])


def _first_missing(uuid: Column, val_s: Column, ts_s: Column) -> Column:
    return (
        F.when(uuid.isNull() | (uuid == F.lit("")), F.lit("uuid"))
        .when(val_s.isNull() | (val_s == F.lit("")), F.lit("val"))
        .when(ts_s.isNull() | (ts_s == F.lit("")), F.lit("ts"))
    )


def _value_rules(uuid: Column, val_s: Column, ts_s: Column) -> list[Rule]:
    """Why a present uuid/val/ts is unusable, in the order the reasons are checked."""
    return [
        (_bad_uuid(uuid), "bad_uuid", F.lit("uuid longer than 200 characters or with NUL")),
        (~val_s.rlike(r"^[+-]?\d+$"), "bad_type", _got("val must be an integer", val_s)),
        (val_s.try_cast("bigint").isNull(), "out_of_range", _got("val outside 64-bit", val_s)),
        (_parse_ts(ts_s).isNull(), "bad_ts", _got("ts is not ISO-8601 or epoch ms", ts_s)),
    ]


def _parse_ts(ts_s: Column) -> Column:
    """ISO-8601 (naive = UTC: the session time zone) or integer epoch milliseconds."""
    millis = F.when(ts_s.rlike(r"^-?\d{1,15}$"), F.timestamp_millis(ts_s.try_cast("bigint")))
    return F.when(ts_s.rlike(r"^-?\d+$"), millis).otherwise(F.try_to_timestamp(ts_s))


def parse_parquet(df: DataFrame) -> DataFrame:
    """Typed Parquet rows -> the columns of ``parse_text`` but ``raw``, which ``batch_output``
    renders as JSON for rejected rows only (``_raw``). The reason is staged in a projection
    of its own: repeated in the detail, Spark evaluated every rule twice per row."""
    return apply(df, _parquet_steps())


def _parquet_steps() -> list[Step]:
    uuid = F.col("uuid")
    missing = (
        F.when(uuid.isNull() | (uuid == F.lit("")), F.lit("uuid"))
        .when(F.col("val").isNull(), F.lit("val"))
        .when(F.col("ts").isNull(), F.lit("ts"))
    )
    rules: list[Rule] = [
        (missing.isNotNull(), "missing_field", F.concat(missing, F.lit(" is missing"))),
        (_bad_uuid(uuid), "bad_uuid", F.lit("uuid longer than 200 characters or with NUL")),
    ]
    columns = [F.col("source"), *map(F.col, ("uuid", "val", "ts"))]
    return _reason_steps(rules, columns)


def _raw(has_raw: bool) -> Column:
    """The raw text of a row: the line for text files; for Parquet (no ``raw`` column) the row
    as JSON, built only where it is used -- for rejected rows -- since Spark evaluates every
    column a projection outputs for every row (carried along, it cost about half the plan)."""
    if has_raw:
        return F.col("raw")
    iso = F.date_format("ts", "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX")
    return _clean(F.to_json(F.struct("uuid", "val", iso.alias("ts"))))


def classify(df: DataFrame, limits: Limits) -> DataFrame:
    """Add the clock/stream reasons (future, expired, late) to rows that are otherwise valid."""
    return apply(df, _classify_steps(limits, "raw" in df.columns))


def _classify_steps(limits: Limits, has_raw: bool) -> list[Step]:
    ts = F.col("ts")
    newest = limits.newest_before
    rules: list[Rule] = [
        (F.col("reason").isNotNull(), F.col("reason"), F.col("detail")),
        (ts > F.lit(limits.now + limits.max_future), "future", _got("ts ahead of the clock", ts)),
    ]
    if newest is not None and limits.history is not None:
        horizon = newest - limits.history
        rules.append((ts < F.lit(horizon), "expired", _got("ts before the retention horizon", ts)))
    if newest is not None:
        rules.append((ts < F.lit(newest - limits.grace), "late", _got("ts later than grace", ts)))
    names = ("source", "raw", "uuid", "val", "ts") if has_raw else ("source", "uuid", "val", "ts")
    return _reason_steps(rules, [F.col(c) for c in names], cheap=True)


def batch_output(df: DataFrame, partitions: int) -> DataFrame:
    """One row per input row, ready for one ``toArrow``: valid rows carry ``part`` (and no raw
    text), rejected rows carry ``source, reason, detail, raw``. One Spark job per batch: no
    second scan of the input and no shuffle (the in-batch dedup runs on the Arrow table)."""
    return apply(df, _output_steps(partitions, "raw" in df.columns))


def _output_steps(partitions: int, has_raw: bool) -> list[Step]:
    ok = F.col("reason").isNull()
    return [_select(
        F.when(ok, partition_expr(F.col("uuid"), partitions)).alias("part"),
        "uuid",
        "val",
        "ts",
        "reason",
        F.when(~ok, F.col("source")).alias("source"),
        F.when(~ok, F.col("detail")).alias("detail"),
        F.when(~ok, _raw(has_raw)).alias("raw"),
    )]


def good_rows(df: DataFrame, partitions: int) -> DataFrame:
    """Valid rows, one per (uuid, ts): ``part, uuid, val, ts, copies`` -- the same result as
    ``batch.split`` computes on Arrow, as a Spark plan (kept for cross-checks in tests).

    Duplicates within the batch collapse to one row; the kept ``val`` is the smallest, so the
    choice is the same however Spark orders the batch (a replay picks the same row).
    """
    ok = df.where(F.col("reason").isNull())
    keyed = ok.select(partition_expr(F.col("uuid"), partitions).alias("part"), "uuid", "val", "ts")
    return (
        keyed.groupBy("part", "uuid", "ts")
        .agg(F.min("val").alias("val"), F.count(F.lit(1)).alias("copies"))
        .select("part", "uuid", "val", "ts", "copies")
    )


def bad_rows(df: DataFrame) -> DataFrame:
    """Rejected rows for the dead-letter table: ``source, reason, detail, raw``."""
    return df.where(F.col("reason").isNotNull()).select(
        "source", "reason", "detail", _raw("raw" in df.columns).alias("raw")
    )


def partition_expr(uuid: Column, partitions: int) -> Column:
    """slidewin.partition_of in Spark: first 32 bits of md5(uuid), unsigned, mod partitions."""
    return F.pmod(
        F.conv(F.substring(F.md5(uuid), 1, 8), 16, 10).cast("long"), F.lit(partitions)
    ).cast("short")


def _bad_uuid(uuid: Column) -> Column:
    """Too long or holding NUL; characters are counted only when the bytes could be too many
    (a UTF-8 character is at least one byte), which spares the count for almost every row."""
    too_long = (F.octet_length(uuid) > F.lit(MAX_UUID_CHARS)) & (
        F.length(uuid) > F.lit(MAX_UUID_CHARS)
    )
    return too_long | uuid.contains("\u0000")


def _clean(raw: Column) -> Column:
    """PostgreSQL text cannot hold NUL: show it as the two characters ``\\0``."""
    return F.replace(raw, F.lit("\u0000"), F.lit("\\0"))


def _got(text: str, value: Column) -> Column:
    return F.concat(F.lit(text + ", got "), F.coalesce(value.cast("string"), F.lit("null")))


def _reason_steps(
    rules: list[Rule], columns: list[Column], *, cheap: bool = False
) -> list[Step]:
    """``columns`` plus ``reason, detail`` of the first rule that holds (both NULL if none).

    Two flat CASE expressions rather than one struct per row, which Spark built and unpacked
    for every row (measured: about 6 % of Spark's time on a batch, Parquet and CSV). The
    detail is computed only for a row that has a reason. ``cheap`` conditions (NULL tests,
    comparisons) are evaluated in one projection; expensive ones (regular expressions,
    timestamp parsing) get the reason computed once in a projection of its own, which Spark
    keeps separate because the next one reads it twice."""
    reason: Column | None = None
    detail: Column | None = None
    for cond, code, text in rules:
        value = code if isinstance(code, Column) else F.lit(code)
        reason = F.when(cond, value) if reason is None else reason.when(cond, value)
        detail = F.when(cond, text) if detail is None else detail.when(cond, text)
    assert reason is not None and detail is not None, "at least one rule"
    if cheap:
        return [_select(*columns, reason.cast("string").alias("reason"),
                        F.when(reason.isNotNull(), detail.cast("string")).alias("detail"))]
    why = F.col(_REASON)
    detail = F.when(why.isNotNull(), detail.cast("string"))
    return [
        _select("*", reason.cast("string").alias(_REASON)),
        _select(*columns, why.alias("reason"), detail.alias("detail")),
    ]
