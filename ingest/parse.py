"""Reading the landing directory and turning each micro-batch into good rows and dead letters.

Two file-source streams cover the three formats:

* ``text`` reads JSON Lines (``*.jsonl``, ``*.ndjson``, ``*.json``) and CSV (``*.csv``) as lines
  of text, so every bad line keeps its exact raw text for the dead-letter table. The file's
  extension picks the parser (``from_json`` / ``from_csv``). CSV columns are ``uuid,val,ts`` in
  that order; a header line ``uuid,val,ts`` (quoted or not) is skipped, as are blank lines
  (they hold no event). A UTF-8 byte-order mark that starts a file is no part of its first
  line (Hadoop's line reader skips it).
  A CSV file whose quoted field holds a line break is read again record by record
  (``ingest.csvrecords``), never as lines that could pass for records.
* ``parquet`` reads ``*.parquet`` with the schema ``uuid string, val bigint, ts timestamp``; a bad
  row's raw text is its JSON rendering.

Hidden files (``.name`` / ``_name``) and any other extension (``.tmp``, ``.part``) are ignored,
so producers write a temporary name and rename it into place.

Validation gives each row at most one reason, checked in this order: ``bad_encoding`` (the line,
or a Parquet uuid, is not valid UTF-8; a JSON uuid holds a lone surrogate, ``"\\ud800"``),
``malformed`` (not a JSON object -- but a line the JSON parser refused for the length of a
member gets that field's reason, ``ingest.textchecks`` -- / not CSV / a NUL byte in the line / a
CSV header other than ``uuid,val,ts``, such as one naming a column twice (the records after it
are read by position, as always) / a CSV quote never closed), ``missing_field``, ``bad_uuid``
(in JSON, not a string or an integer; over 200 characters or a NUL), ``bad_type`` (val not an
integer), ``out_of_range`` (val outside 64-bit), ``bad_ts`` (neither ISO-8601 nor an epoch
number in the ``--epoch-unit``, ``ingest.eventtime``; a NUL, or outside years 0001-9999; naive
ISO times are UTC), then against the clock and the stream: ``future`` (more than max_future
ahead of now), ``expired`` (older than the newest event time seen before this batch minus
history; in a stream's first batch, the batch's own newest valid event time), ``late`` (older
than the newest seen before this batch minus grace; never in a first batch).

Each row also says whether it carried fields beyond uuid, val and ts (``extra``: members of a
JSON object; Parquet columns are counted from the footers), which are not stored: the batch
counts such records.

Whatever its bytes, a rejected row's dead letter holds text PostgreSQL can store (``raw``,
invalid UTF-8 as U+FFFD and NUL as ``\\0``) and, where that text is not the input itself, the
exact bytes (``raw_bytes``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType

from slidewin.ingest import csvrecords, spark_internals
from slidewin.ingest.batch import CSV_UNBALANCED
from slidewin.ingest.eventtime import MAX_TS, MIN_TS, NUL, UNIT_WORDS, parse_ts, ts_lit
from slidewin.ingest.rules import Rule, Step, got, reason_steps, select
from slidewin.ingest.textchecks import (
    LONE_SURROGATE_DETAIL,
    NOT_A_KEY,
    count,
    extra_members,
    lone_surrogate,
    not_a_key,
    odd_header,
    overlong_field,
    overlong_rule,
)

if TYPE_CHECKING:
    from slidewin.ingest.config import IngestConfig

FIELDS_DDL = "uuid string, val string, ts string, _corrupt_record string"
PARQUET_DDL = "uuid string, val bigint, ts timestamp"
_PERMISSIVE = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt_record"}
# Jackson's limits stay (a string of over 20,000,000 characters fails the line; see
# ``ingest.textchecks.overlong_field``, which names the field)
JSON_OPTIONS = _PERMISSIVE
# RFC 4180: a quote inside a quoted field is doubled ("a""b" is a"b), not backslash-escaped
CSV_OPTIONS = {**_PERMISSIVE, "escape": '"'}
TEXT_EXTENSIONS = {
    "auto": ("jsonl", "ndjson", "json", "csv"),
    "json": ("jsonl", "ndjson", "json"),
    "csv": ("csv",),
}
MAX_UUID_CHARS = 200
REPLACEMENT = "\ufffd"  # what the JSON and CSV parsers make of bytes that are not UTF-8
_TS = "_slidewin_ts"  # the staged parsed ts column
_MISSING = "_slidewin_missing"  # the staged name of the first field missing, if any
# staged checks of a JSON line (``_staged_checks``): the detail of a uuid that is not a key,
# whether it has extra members, the reason and detail of a member too long to parse
_JSON_CHECKS = ("_slidewin_not_a_key", "extra", "_slidewin_long", "_slidewin_long_why")
# and of any line: whether a JSON uuid held a lone surrogate, why a CSV line is a header other
# than uuid,val,ts (NULL when it is not one)
_LINE_CHECKS = ("_slidewin_lone", "_slidewin_header")
BAD_ENCODING_LINE = "line is not valid UTF-8 (its exact bytes are in raw_bytes)"
BAD_ENCODING_UUID = "uuid is not valid UTF-8 (its exact bytes are in raw_bytes)"
BAD_TS_RANGE = "ts outside years 0001-9999"


@dataclass(frozen=True)
class Limits:
    """What a batch is classified against: the clock and the stream state before the batch.

    ``watermark``: the stream's, which never goes back -- an ingest with a larger grace than
    the one that raised it still rejects what is older (a window final stays final).

    ``newest_in_batch``: in a stream's first batch (no ``newest_before``), the batch's own
    newest valid event time (``newest_valid``), which ``expired`` is judged against as the
    next batch would judge the same events; ``late`` never applies (a batch is not late
    against itself)."""

    now: datetime
    newest_before: datetime | None
    grace: timedelta
    history: timedelta | None
    max_future: timedelta
    watermark: datetime | None = None
    newest_in_batch: datetime | None = None

    @property
    def late_before(self) -> datetime | None:
        """Events older than this are late: newest - grace, or the watermark if later."""
        if self.newest_before is None:
            return self.watermark
        cut = _before(self.newest_before, self.grace)
        return cut if self.watermark is None else max(cut, self.watermark)


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
            .option("pathGlobFilter", any_case_glob("parquet"))
            .parquet(str(config.landing))
        )
        return _columns(df, stream)
    extensions = TEXT_EXTENSIONS[config.format if config.format in TEXT_EXTENSIONS else "auto"]
    glob = any_case_glob(*extensions)
    return _columns(reader.option("pathGlobFilter", glob).text(str(config.landing)), stream)


def any_case_glob(*extensions: str) -> str:
    """A Hadoop glob matching ``*.<ext>`` in any letter case (``.JSONL``, ``.Csv``): the file
    source's filter is case-sensitive, and a file it does not match is silently left alone."""
    cased = ["".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in ext)
             for ext in extensions]
    return f"*.{cased[0]}" if len(cased) == 1 else "*.{" + ",".join(cased) + "}"


def read_files(spark: SparkSession, stream: str, paths: list[str]) -> DataFrame:
    """The same columns as ``read_stream``, from a batch read of exactly ``paths`` -- the files
    the file source assigned to a micro-batch (so a chunk of them, or one file, is read
    without scanning the others). A CSV file with a quoted field holding a line break is read
    record by record (``ingest.csvrecords``), the rest line by line."""
    # paths, not patterns (a name may hold [ ] { } ? * \\); see ingest.spark_internals
    reader = spark.read.option(spark_internals.GLOB_PATHS_OPTION, "false")
    if stream == "parquet":
        return _columns(reader.schema(PARQUET_DDL).parquet(*paths), stream)
    spanning = [path for path in paths if csvrecords.spans_lines(path)]
    lines = [path for path in paths if path not in spanning]
    frames = [_columns(reader.text(lines), stream)] if lines else []
    frames += [csvrecords.read_records(spark, path) for path in spanning]
    df = frames[0]
    for more in frames[1:]:
        df = df.unionByName(more)
    return df


def _columns(df: DataFrame, stream: str) -> DataFrame:
    source = F.col("_metadata.file_name").alias("source")
    if stream == "parquet":
        return df.select("uuid", "val", "ts", source)
    return df.select(F.col("value").alias("raw"), source)


def apply(df: DataFrame, steps: list[Step]) -> DataFrame:
    for step in steps:
        df = step(df)
    return df


def parse_steps(stream: str, epoch_unit: str = "auto") -> list[Step]:
    """Parsing a batch of this stream (Parquet or text) as steps; ``epoch_unit`` reads a
    ``ts`` that is a number (``ingest.eventtime``)."""
    return _parquet_steps() if stream == "parquet" else _text_steps(epoch_unit)


def classify_steps(stream: str, limits: Limits) -> list[Step]:
    """``classify`` as steps, after ``parse_steps(stream)``; the only steps that depend on the
    batch (its limits), so callers build the others once."""
    return _classify_steps(limits, has_raw=stream != "parquet")


def output_steps(stream: str, partitions: int) -> list[Step]:
    """``batch_output`` as steps, after ``classify_steps(stream, ...)``."""
    return _output_steps(partitions, has_raw=stream != "parquet")


def parse_text(df: DataFrame, epoch_unit: str = "auto") -> DataFrame:
    """Lines -> ``source, raw, uuid, val, ts, extra, reason, detail`` (reason NULL when
    valid; ``extra``: a JSON object with members beyond uuid, val and ts)."""
    return apply(df, _text_steps(epoch_unit))


def _text_steps(epoch_unit: str) -> list[Step]:
    is_csv = F.lower(F.col("source")).endswith(F.lit(".csv"))
    trimmed = F.trim(F.col("raw"))
    # a byte-order mark, and quotes: pyarrow and pandas write the header "uuid","val","ts"
    bare = F.regexp_replace(trimmed, "[\\s\ufeff\"]", "")
    # the regular expression only for lines that can be the header (it holds a "v"): for a line
    # of hex uuid, digits and ISO time it cost a fifth of the plan's CPU
    maybe_header = trimmed.contains("v") | trimmed.contains("V")
    header = is_csv & maybe_header & (F.lower(bare) == F.lit("uuid,val,ts"))
    keep = (trimmed != F.lit("")) & ~header
    parsed = F.when(is_csv, F.from_csv("raw", FIELDS_DDL, CSV_OPTIONS)).otherwise(
        F.from_json("raw", FIELDS_DDL, JSON_OPTIONS)
    )
    return [
        lambda df: df.where(keep),
        # ts parsed once, and the checks that need more than one field, in the parse's
        # projection: the rules and the output read them, and this projection is compiled on
        # its own (from_json is not generated code), not into the stage's one method, which
        # they would push past what HotSpot compiles (see ``ingest.rules.reason_steps``)
        select("source", "raw", is_csv.alias("is_csv"), parsed.alias("f"),
               parse_ts(F.trim(parsed.getField("ts")), epoch_unit).alias(_TS),
               *_staged_checks(is_csv, parsed)),
        select("source", "raw", "is_csv", "f.*", _TS, _MISSING, *_JSON_CHECKS, *_LINE_CHECKS),
        *_validate_text(epoch_unit),
    ]


def _staged_checks(is_csv: Column, parsed: Column) -> list[Column]:
    """The first field missing (``_MISSING``), ``_JSON_CHECKS`` of a JSON line: the detail
    of a uuid that is not a key, whether it has members beyond uuid, val and ts, and the
    reason and detail of a member too long for the parser, and ``_LINE_CHECKS``: a uuid that
    held a lone surrogate, a CSV header other than uuid,val,ts (``ingest.textchecks``). ``parsed``
    is computed once for all of them (Spark shares an expression within a projection)."""
    raw, uuid = F.col("raw"), parsed.getField("uuid")
    fields = (uuid, parsed.getField("val"), parsed.getField("ts"))
    corrupt = parsed.getField("_corrupt_record").isNotNull()
    json = ~is_csv
    _, long_reason, long_detail = overlong_rule(F.when(json & corrupt, overlong_field(raw)))
    trimmed = (fields[0], F.trim(fields[1]), F.trim(fields[2]))
    header, header_why = odd_header(raw)
    return [
        _first_missing(*trimmed).alias(_MISSING),
        F.when(json & not_a_key(uuid, raw), got(NOT_A_KEY, uuid)).alias(_JSON_CHECKS[0]),
        (json & ~corrupt & extra_members(raw, *fields)).alias(_JSON_CHECKS[1]),
        long_reason.alias(_JSON_CHECKS[2]),
        long_detail.alias(_JSON_CHECKS[3]),
        (json & lone_surrogate(uuid, raw)).alias(_LINE_CHECKS[0]),
        F.when(is_csv & header, header_why).alias(_LINE_CHECKS[1]),
    ]


def _validate_text(epoch_unit: str) -> list[Step]:
    uuid, val_s, ts_s = F.col("uuid"), F.trim(F.col("val")), F.trim(F.col("ts"))
    missing = F.col(_MISSING)
    corrupt = F.col("_corrupt_record").isNotNull()
    raw, is_csv = F.col("raw"), F.col("is_csv")
    # an odd number of quotes: a quoted field not closed on its line (counted only in lines
    # that hold a quote at all; in bytes, not characters: a quote is one byte)
    quotes = count(raw, '"')
    header_why = F.col(_LINE_CHECKS[1])
    rules: list[Rule] = [
        (_mangled(corrupt, uuid, val_s, ts_s), "bad_encoding", F.lit(BAD_ENCODING_LINE)),
        (F.col(_LINE_CHECKS[0]), "bad_encoding", F.lit(LONE_SURROGATE_DETAIL)),
        (raw.contains(NUL), "malformed", F.lit("line holds a NUL byte")),
        (header_why.isNotNull(), "malformed", header_why),
        (F.col(_JSON_CHECKS[2]).isNotNull(), F.col(_JSON_CHECKS[2]), F.col(_JSON_CHECKS[3])),
        (corrupt & ~is_csv, "malformed", F.lit("not a JSON object")),
        (is_csv & raw.contains('"') & (quotes % 2 == 1), "malformed", F.lit(CSV_UNBALANCED)),
        (corrupt & missing.isNull(), "malformed", F.lit("expected 3 CSV fields: uuid,val,ts")),
        (missing.isNotNull(), "missing_field", F.concat(missing, F.lit(" is missing"))),
        (F.col(_JSON_CHECKS[0]).isNotNull(), "bad_uuid", F.col(_JSON_CHECKS[0])),
        *_value_rules(uuid, val_s, ts_s, F.col(_TS), epoch_unit),
    ]
    return reason_steps(rules, [
        F.col("source"),
        raw.alias("raw"),
        uuid.alias("uuid"),
        val_s.try_cast("bigint").alias("val"),
        F.col(_TS).alias("ts"),
        F.col("extra"),
    ])


def _mangled(corrupt: Column, *fields: Column) -> Column:
    """A line that is not valid UTF-8, found cheaply: the JSON and CSV parsers decode invalid
    bytes as U+FFFD, so only a line that did not parse or whose fields hold U+FFFD is checked
    byte by byte (checking every line cost more than the parse). Invalid bytes outside uuid,
    val and ts (an extra JSON field) change nothing stored and are let through."""
    suspect = corrupt
    for field in fields:
        suspect = suspect | field.contains(REPLACEMENT)
    return suspect & ~F.is_valid_utf8(F.col("raw"))


def _first_missing(uuid: Column, val_s: Column, ts_s: Column) -> Column:
    return (
        F.when(uuid.isNull() | (uuid == F.lit("")), F.lit("uuid"))
        .when(val_s.isNull() | (val_s == F.lit("")), F.lit("val"))
        .when(ts_s.isNull() | (ts_s == F.lit("")), F.lit("ts"))
    )


def _value_rules(
    uuid: Column, val_s: Column, ts_s: Column, ts: Column, epoch_unit: str
) -> list[Rule]:
    """Why a present uuid/val/ts is unusable, in the order the reasons are checked (``ts``:
    ``ts_s`` parsed)."""
    bad_ts = f"ts is not ISO-8601 or {UNIT_WORDS[epoch_unit]} in years 0001-9999"
    return [
        (_bad_uuid(uuid), "bad_uuid", F.lit("uuid longer than 200 characters or with NUL")),
        (~val_s.rlike(r"^[+-]?\d+$"), "bad_type", got("val must be an integer", val_s)),
        (val_s.try_cast("bigint").isNull(), "out_of_range", got("val outside 64-bit", val_s)),
        (ts.isNull(), "bad_ts", got(bad_ts, ts_s)),
    ]


def _parquet_steps() -> list[Step]:
    """Typed Parquet rows -> the columns of ``parse_text`` but ``raw``, which ``batch_output``
    renders as JSON for rejected rows only (``_raw``). The reason is staged in a projection
    of its own: repeated in the detail, Spark evaluated every rule twice per row."""
    uuid = F.col("uuid")
    missing = (
        F.when(uuid.isNull() | (uuid == F.lit("")), F.lit("uuid"))
        .when(F.col("val").isNull(), F.lit("val"))
        .when(F.col("ts").isNull(), F.lit("ts"))
    )
    ts = F.col("ts")
    rules: list[Rule] = [
        (missing.isNotNull(), "missing_field", F.concat(missing, F.lit(" is missing"))),
        (~F.is_valid_utf8(uuid), "bad_encoding", F.lit(BAD_ENCODING_UUID)),
        (_bad_uuid(uuid), "bad_uuid", F.lit("uuid longer than 200 characters or with NUL")),
        (~ts.between(ts_lit(MIN_TS), ts_lit(MAX_TS)), "bad_ts", got(BAD_TS_RANGE, ts)),
    ]
    # columns beyond these three are counted from the files' footers (``ingest.foreign``)
    columns = [F.col("source"), *map(F.col, ("uuid", "val", "ts")), F.lit(False).alias("extra")]
    return reason_steps(rules, columns)


def _raw(has_raw: bool) -> Column:
    """The raw text of a row as PostgreSQL text can hold it: the line for text files; for
    Parquet (no ``raw`` column) the row as JSON, built only where it is used -- for rejected
    rows -- since Spark evaluates every column a projection outputs for every row (carried
    along, it cost about half the plan)."""
    if has_raw:
        return _clean(F.col("raw"))
    iso = F.date_format("ts", "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX")
    return _clean(F.to_json(F.struct("uuid", "val", iso.alias("ts"))))


def _raw_bytes(has_raw: bool) -> Column:
    """The exact input bytes where ``raw`` cannot show them (invalid UTF-8, NUL), as bytea's
    hex input form (``\\x6b...``), else NULL: the line for text files, the uuid for Parquet
    (the only text column there). So ``coalesce(raw_bytes, convert_to(raw, 'UTF8'))`` is the
    input, byte for byte."""
    field = F.col("raw") if has_raw else F.col("uuid")
    inexact = ~F.is_valid_utf8(field) | field.contains(NUL)
    return F.when(inexact, F.concat(F.lit("\\x"), F.lower(F.hex(field.cast("binary")))))


def classify(df: DataFrame, limits: Limits) -> DataFrame:
    """Add the clock/stream reasons (future, expired, late) to rows that are otherwise valid."""
    return apply(df, _classify_steps(limits, "raw" in df.columns))


def _classify_steps(limits: Limits, has_raw: bool) -> list[Step]:
    ts = F.col("ts")
    micros = F.unix_micros(ts)
    newest = limits.newest_before
    ahead = _at_run_time(_after(limits.now, limits.max_future))
    rules: list[Rule] = [
        (F.col("reason").isNotNull(), F.col("reason"), F.col("detail")),
        (micros > ahead, "future", got("ts ahead of the clock", ts)),
    ]
    horizon_of = newest if newest is not None else limits.newest_in_batch
    if horizon_of is not None and limits.history is not None:
        horizon = _at_run_time(_before(horizon_of, limits.history))
        rules.append((micros < horizon, "expired", got("ts before the retention horizon", ts)))
    if limits.late_before is not None:
        late = _at_run_time(limits.late_before)
        rules.append((micros < late, "late", got("ts later than grace", ts)))
    names = ("source", "raw") if has_raw else ("source",)
    columns = [F.col(c) for c in (*names, "uuid", "val", "ts", "extra")]
    return reason_steps(rules, columns, cheap=True)


def newest_valid(classified: DataFrame) -> datetime | None:
    """The newest event time of the rows a ``classify`` plan (of a stream's first batch: no
    stream time yet) accepts -- what that batch's ``expired`` rule is judged against (see
    ``Limits``). One small Spark job: a max over the batch."""
    valid = classified.where(F.col("reason").isNull())
    micros = valid.agg(F.max(F.unix_micros("ts")).alias("m")).first()
    if micros is None or micros["m"] is None:
        return None
    return _EPOCH + timedelta(microseconds=micros["m"])


def _at_run_time(value: datetime) -> Column:
    """``value`` in Unix microseconds, as a Column whose generated code does not hold it.

    Spark writes a long or timestamp literal into the Java code it generates, and compiles
    each new text anew (Janino, about 70-100 ms per job here): with the batch's limits as
    literals, every micro-batch paid that twice (rows and partials) -- the larger part of a
    small batch's time. A decimal literal is passed to the code as an object instead; the
    condition on ``spark_partition_id()`` (never false) keeps the optimizer from folding the
    cast back into a long literal (with ``PushFoldableIntoBranches`` excluded, see
    ``ingest.spark``). Per row it costs a comparison and a compact decimal's ``toLong``."""
    micros = (value - _EPOCH) // timedelta(microseconds=1)
    held = F.lit(Decimal(micros)).cast(DecimalType(18, 0))
    return F.when(F.spark_partition_id() >= F.lit(0), held).cast("long")


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _after(now: datetime, span: timedelta) -> datetime:
    """``now + span``, or the latest time when that would pass year 9999."""
    try:
        return min(now + span, MAX_TS)
    except OverflowError:
        return MAX_TS


def _before(newest: datetime, span: timedelta) -> datetime:
    """``newest - span``, or the earliest time when that would fall before year 1 (a stream
    whose newest event is that old must not fail every later batch with an OverflowError)."""
    try:
        return max(newest - span, MIN_TS)
    except OverflowError:
        return MIN_TS


def batch_output(df: DataFrame, partitions: int) -> DataFrame:
    """One row per input row, ready for one ``toArrow``: valid rows carry ``part`` (and no raw
    text), rejected rows carry ``source, reason, detail, raw``. One Spark job per batch: no
    second scan of the input and no shuffle (the in-batch dedup runs on the Arrow table)."""
    return apply(df, _output_steps(partitions, "raw" in df.columns))


def _output_steps(partitions: int, has_raw: bool) -> list[Step]:
    ok = F.col("reason").isNull()
    return [select(
        F.when(ok, partition_expr(F.col("uuid"), partitions)).alias("part"),
        "uuid",
        "val",
        "ts",
        "reason",
        "extra",
        F.when(~ok, F.col("source")).alias("source"),
        F.when(~ok, F.col("detail")).alias("detail"),
        F.when(~ok, _raw(has_raw)).alias("raw"),
        F.when(~ok, _raw_bytes(has_raw)).alias("raw_bytes"),
    )]


def good_rows(df: DataFrame, partitions: int) -> DataFrame:
    """Valid rows, one per (uuid, ts): ``part, uuid, val, ts, copies`` -- the same result as
    ``batch.split`` computes on Arrow, as a Spark plan (kept for cross-checks in tests).

    Duplicates within the batch collapse to one row; the first in the scan's order is kept
    (``monotonically_increasing_id``: the partition, then the row in it), as ``batch.dedup``
    keeps the first of each pulled partition.
    """
    ok = df.where(F.col("reason").isNull())
    keyed = ok.select(partition_expr(F.col("uuid"), partitions).alias("part"), "uuid", "val", "ts",
                      F.monotonically_increasing_id().alias("_order"))
    return (
        keyed.groupBy("part", "uuid", "ts")
        .agg(F.min_by("val", "_order").alias("val"), F.count(F.lit(1)).alias("copies"))
        .select("part", "uuid", "val", "ts", "copies")
    )


PARTIALS_COLUMNS = ("pid", "part", "sec", "n", "total", "vmin", "vmax")


def partials(output: DataFrame) -> DataFrame:
    """The rollups' partials of a ``batch_output`` plan: per (Spark partition of the scan,
    part, second), count, sum, min and max of its valid rows -- what PostgreSQL's statement
    triggers would compute from the same rows, computed by Spark instead.

    ``pid`` (``spark_partition_id()``, evaluated before the shuffle, so the scan's partition)
    ties each partial to the Arrow table ``ingest.pull`` pulls of the same partition; only the
    partials (a few rows per second and partition) cross the shuffle, never the rows. Duplicates
    within a partition are counted as often as they occur: the sink uses a partition's partials
    only when its rows hold none (``ingest.sink``). ``total`` is decimal(38,0): a second's sum
    of 64-bit values can overflow 64 bits, and PostgreSQL keeps it as numeric.
    """
    valid = output.where(F.col("reason").isNull())
    return valid.groupBy(
        F.spark_partition_id().alias("pid"),
        F.col("part"),
        F.date_trunc("second", F.col("ts")).alias("sec"),
    ).agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.col("val").cast("decimal(38,0)")).alias("total"),
        F.min("val").alias("vmin"),
        F.max("val").alias("vmax"),
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
    """Text PostgreSQL can hold: invalid UTF-8 shown as U+FFFD, NUL as the two characters
    ``\\0`` (the exact bytes go to ``raw_bytes``)."""
    return F.replace(F.make_valid_utf8(raw), F.lit(NUL), F.lit("\\0"))
