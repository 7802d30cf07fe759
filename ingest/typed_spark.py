"""A declared stream's batch parsed on Spark: its columns typed on the executors, and only the
records Spark cannot vouch for judged on the driver, by the record path (``ingest.typed``).

The rules are ``ingest.typed``'s, and it stays their one statement. Spark applies a strict
subset of them: a record whose every value passes a check that the record path would pass
too, with the same value, is *clean* -- its typed columns leave Spark as Arrow and are COPYed
as they are. Every other record is *suspect*: it leaves Spark with its raw text (a line of a
JSON Lines or CSV file, as bytes) or its original values (a Parquet row), and the record path
decides it on the driver -- a dead letter with its reason and raw text, or a row after all
(``3.0`` for a bigint, a time written ``2026-01-01``, a JSON number with 17 digits for a
numeric). So Spark never decides differently, it only decides faster; the driver handles the
bad records, which it must write as dead letters anyway.

What is clean, per column type (text read from JSON or CSV; Parquet columns are typed already):

* every record: no NUL byte, valid UTF-8, a key and time column present, every required
  column present, its time within the batch's limits (future, expired, late); JSON: one
  object alone on its line, whose members are named once, with no ``\\u`` escape; CSV: as
  many fields as the header, quotes only around whole fields;
* ``text``: any string (JSON: not ``{...}``, ``[...]`` or a number with a fraction, which Spark
  renders in Java's way); a key or indexed column at most ``MAX_KEY_CHARS`` characters;
* ``bigint``/``integer``: digits with an optional sign, within range;
* ``double precision``: a finite decimal number;
* ``numeric(p,s)`` (p <= 38): a decimal number that fits once rounded (JSON: no run of 16
  digits in the line -- a double cannot carry them, and Spark reads JSON numbers as doubles);
  other numerics: a plain decimal, converted by PostgreSQL;
* ``boolean``: ``true``/``false``/``t``/``f``/``yes``/``no``/``1``/``0`` in any case;
* ``timestamptz``: ``YYYY-MM-DD[T ]HH:MM:SS[.ffffff][Z|+HH:MM]`` or an integer epoch;
* ``jsonb``: never (the record path renders it).

Files the record path reads whole, on the driver: a CSV file whose records span lines (found
when a line has an odd number of quotes: the batch rolls back and is computed again with it
read so), a CSV file whose header cannot be read alone, a Parquet file whose columns Spark
cannot take as they are, and every file of a stream that keeps extras in ``attrs``.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from slidewin.ingest import typed
from slidewin.ingest.eventtime import MAX_TS, MIN_TS, NUL, parse_ts_unchecked, ts_lit
from slidewin.ingest.parse import _at_run_time
from slidewin.ingest.pull import indexed_partitions
from slidewin.ingest.spark_internals import GLOB_PATHS_OPTION
from slidewin.ingest.stream import read_alone
from slidewin.ingest.typed import Layout, Limits, Parsed
from slidewin.ingest.typed_arrow import TS, target_type

# Spark partitions computed at once ahead of the writer: parsing text costs Spark several times
# what the database spends on the same rows, so both cores parse it; Parquet costs less than
# the write, and a second job would only take the writer's core
AHEAD = {"json": 2, "csv": 2, "parquet": 1}
HEADER_BYTES = 1 << 20  # a CSV header longer than this is read with its file, on the driver
_INTEGER = r"^[+-]?[0-9]+$"
_DECIMAL = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_PLAIN_DECIMAL = r"^[+-]?[0-9]{1,1000}(\.[0-9]{1,1000})?$"
_JAVA_FLOAT = r"^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$"  # how Spark renders a JSON number
_ISO = (r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?"
        r"(Z|[+-][0-9]{2}:[0-9]{2})?$")
_BOOLEANS = {**{w: True for w in typed.TRUE_WORDS}, **{w: False for w in typed.FALSE_WORDS}}
# Spark's JSON reader as strict as a JSON parser where it can be: no single quotes, no NaN
JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt",
                "allowSingleQuotes": "false", "allowNonNumericNumbers": "false"}
# a CSV line whose quotes, if any, are around whole fields and hold none
_CSV_QUOTES = r'^(?:"[^"]*+"|[^",]*+)(?:,(?:"[^"]*+"|[^",]*+))*+$'
CSV_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt", "escape": '"'}
_CLEAN, _SOURCE, _RAW, _EXTRA, _ODD, _HEADER = (
    "_sw_clean", "_sw_source", "_sw_raw", "_sw_extra", "_sw_odd", "_sw_header")


class SpanningCsv(Exception):
    """A CSV file of the batch has a record spanning lines: the batch is computed again with
    those files read whole by the record path."""

    def __init__(self, names: set[str]) -> None:
        super().__init__(f"CSV records span lines in {sorted(names)}")
        self.names = names


@dataclass
class FileGroups:
    """A batch's files by how Spark reads them: groups of one kind and shape, each read with
    one plan -- ``(kind, key, paths)``, the key a CSV file's header line or a Parquet file's
    schema -- and the files the record path reads ``whole``, on the driver."""

    groups: dict[tuple[str, str], tuple[Any, list[str]]] = field(default_factory=dict)
    whole: list[str] = field(default_factory=list)

    def add(self, kind: str, key: str, shape: Any, path: str) -> None:
        if read_alone(path):  # a name Spark would take for a pattern: a read of its own
            key = f"{key}\0{path}"
        self.groups.setdefault((kind, key), (shape, []))[1].append(path)


def group_files(layout: Layout, paths: Sequence[str], whole: frozenset[str] = frozenset()
                ) -> FileGroups:
    """Sort the batch's readable files (local paths) into groups Spark reads with one plan."""
    groups = FileGroups()
    for path in sorted(paths):
        kind = typed.kind_of(path)
        if layout.stream.keep_extra or path in whole or kind is None:
            groups.whole.append(path)
        elif kind == "json":
            groups.add("json", "", None, path)
        elif kind == "csv":
            header = csv_header(path)
            if header is None:
                groups.whole.append(path)
            else:
                groups.add("csv", header[0], header, path)
        else:
            schema = _parquet_schema(layout, path)
            if schema is None:
                groups.whole.append(path)
            else:
                groups.add("parquet", schema.to_string(), schema, path)
    return groups


def csv_header(path: str) -> tuple[str, list[str]] | None:
    """(the header line as Spark's text reader gives it, its column names) of a CSV file, or
    None when the record path must read the file whole: no header, a header that spans lines,
    is not UTF-8 or names a column twice."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER_BYTES)
    except OSError:
        return None
    if head.startswith(typed.BOM):
        head = head[len(typed.BOM):]
    for line in head.splitlines(keepends=True):
        if not line.strip():
            continue
        if not line.endswith((b"\n", b"\r")) or line.count(b'"') % 2:
            return None
        try:
            text = line.decode("utf-8").rstrip("\r\n")
            names = next(csv.reader([text], strict=True))
        except (UnicodeDecodeError, csv.Error, StopIteration):
            return None
        names = [n.strip() for n in names]
        return (text, names) if len(set(names)) == len(names) else None
    return None


def _parquet_schema(layout: Layout, path: str) -> pa.Schema | None:
    """The file's schema when Spark can read every declared column as it is (else None)."""
    try:
        schema = pq.read_schema(path)
    except Exception:
        return None
    for col in layout.columns:
        index = schema.get_field_index(col.name)
        if index < 0:
            continue
        if not _spark_takes(schema.field(index).type, col.type):
            return None
    return schema


def _spark_takes(source: pa.DataType, type_: str) -> bool:
    """Whether Spark reads a Parquet column of ``source`` type into a column of ``type_`` with
    the value the record path would store (or leaves the decision to it, as a NULL)."""
    if pa.types.is_dictionary(source):
        source = source.value_type
    if target_type(type_) is None:  # jsonb: the record path renders it
        return False
    if pa.types.is_timestamp(source):
        return type_ == "timestamptz" and source.unit in ("ms", "us")
    ints = (pa.types.is_signed_integer(source)
            or source in (pa.uint8(), pa.uint16(), pa.uint32()))
    if type_ == "text":
        return pa.types.is_string(source) or pa.types.is_large_string(source)
    if type_ in ("bigint", "integer"):
        return ints
    if type_ == "double precision":
        return pa.types.is_floating(source) and source != pa.float16() or ints
    if type_.startswith("numeric"):
        return pa.types.is_decimal128(source) or ints
    if type_ == "boolean":
        return pa.types.is_boolean(source)
    return False


# -- the Spark plans ------------------------------------------------------------------------


def _limits_ok(ts: Column, limits: Limits) -> Column:
    """The time is within years 1-9999 and the batch's limits (as bound values, not literals:
    ``ingest.parse._at_run_time``)."""
    low, high = MIN_TS, MAX_TS
    for cut in (limits.expired_before, limits.late_before):
        if cut is not None:
            low = max(low, cut)
    if limits.future_after is not None:
        high = min(high, limits.future_after)
    micros = F.unix_micros(ts)
    return (micros >= _at_run_time(low)) & (micros <= _at_run_time(high))


@dataclass(frozen=True)
class Typed:
    """A declared column typed on Spark: its ``value``; whether its text is there at all
    (``present``); what must hold of the text (``text_ok``, computed beside the value); and what
    must hold of the value (``value_ok``, given the value once it is a column of its own).

    Why the split: a check written on the value's expression (``value.isNotNull()``) made Spark
    compute the value twice per record, once for the column and once inside the record's
    ``clean`` (a short-circuit AND, which Spark's common-subexpression pass leaves alone): a
    time parsed twice, a pattern matched twice (about 1.5 µs of a CSV line's 8)."""

    value: Column
    present: Column
    text_ok: Column | None = None
    value_ok: Callable[[Column], Column] = Column.isNotNull


def _text_value(v: Column, type_: str, *, json: bool, limited: bool,
                raw: Column, name: str = "") -> Typed:
    """Column ``v`` (read as text) typed as ``type_``."""
    present = v.isNotNull()
    if type_ == "text":
        def text_ok(x: Column) -> Column:
            ok = ~x.contains(NUL)
            if json:  # an object, an array or a number with a fraction came as Spark renders it
                first = F.substring(x, 1, 1)
                odd = F.when(first.isin("{", "["), F.lit(True)).when(
                    first.isin("-", *"0123456789"), x.rlike(_JAVA_FLOAT) & x.rlike("[.eE]"))
                ok = ok & ~F.coalesce(odd, F.lit(False))
            if limited:
                ok = ok & (F.length(x) <= F.lit(typed.MAX_KEY_CHARS))
            return ok
        return Typed(v, present, value_ok=text_ok)
    if type_ in typed.INT_RANGES:
        spark_type = "bigint" if type_ == "bigint" else "int"
        return Typed(F.when(v.rlike(_INTEGER), v.try_cast(spark_type)), present)
    if type_ == "double precision":
        return Typed(F.when(v.rlike(_DECIMAL), v.try_cast("double")), present,
                     value_ok=lambda x: x.isNotNull() & ~F.isnan(x)
                     & (F.abs(x) != F.lit(float("inf"))))
    if type_.startswith("numeric"):
        # JSON: a number with a fraction came through a double: exact only as written
        exact = (F.when(v.rlike("[.eE]"), _written_exactly(v, name, raw)).otherwise(True)
                 if json else None)
        target = target_type(type_)
        if target is None:  # unconstrained or wider than Spark's: PostgreSQL converts it
            return Typed(v, present, exact, value_ok=lambda x: x.rlike(_PLAIN_DECIMAL))
        value = F.when(v.rlike(_DECIMAL), v.try_cast(f"decimal({target.precision},"
                                                      f"{target.scale})"))
        return Typed(value, present, exact)
    if type_ == "boolean":
        lower = F.lower(v)
        # JSON: the numbers 1 and 0 are no booleans (the strings "1" and "0" are, but Spark
        # gives both as the same text)
        words = [w for w in (*typed.TRUE_WORDS, *typed.FALSE_WORDS) if not (json and w.isdigit())]
        return Typed(F.when(lower.isin(*[w for w in words if w in typed.TRUE_WORDS]),
                            F.lit(True)).when(
            lower.isin(*[w for w in words if w in typed.FALSE_WORDS]), F.lit(False)), present)
    if type_ == "timestamptz":
        # a NUL matches neither pattern; the years are checked on the value
        return Typed(F.when(v.rlike(_ISO) | v.rlike(_INTEGER), parse_ts_unchecked(v, "auto")),
                     present, value_ok=lambda x: x.between(ts_lit(MIN_TS), ts_lit(MAX_TS)))
    # jsonb: the record path renders it
    return Typed(F.lit(None), present, value_ok=lambda _x: F.lit(False))


def _written_exactly(v: Column, name: str, raw: Column) -> Column:
    """Whether ``v``, Spark's text of member ``name``, is the value as written: it was a JSON
    string, or a number of at most 15 significant digits (which a double carries exactly).
    Spark reads a JSON number with a fraction as a double, so ``0.1000000000000000001`` would
    reach it as ``0.1``: such a record is left to the record path, which reads the digits."""
    number = F.regexp_extract(raw, '"' + re.escape(name) + r'"\s*:\s*(-?[0-9][0-9.eE+-]*)', 1)
    # and as Spark renders it: Java 17's rendering of a double may carry digits the input did
    # not have; two decimals of at most 15 digits each that are one double are one number
    return (number == F.lit("")) | ((_digits(number) <= F.lit(15)) & (_digits(v) <= F.lit(15)))


def _digits(number: Column) -> Column:
    """The digits of a decimal number's mantissa (leading zeros included: an upper bound)."""
    return F.length(F.regexp_replace(F.regexp_replace(number, "[eE].*$", ""), "[^0-9]", ""))


def _typed_columns(layout: Layout, values: dict[str, Column], *, json: bool, raw: Column
                   ) -> list[Typed]:
    """Each declared column typed from its text (``values``: name -> string Column, missing
    names NULL)."""
    return [_text_value(values.get(col.name, F.lit(None).cast("string")), col.type, json=json,
                        limited=col.name in layout.limited, raw=raw, name=col.name)
            for col in layout.columns]


def _text_lines(spark: SparkSession, paths: list[str]) -> DataFrame:
    df = spark.read.option(GLOB_PATHS_OPTION, "false").text(paths)
    return df.select(F.col("value").alias("raw"),
                     F.col("_metadata.file_name").alias(_SOURCE)).where(F.trim("raw") != "")


def _line_checks(raw: Column) -> Column:
    """A line the record path would read as Spark does: valid UTF-8 (checked only where a
    byte is not ASCII) and no NUL."""
    ascii_only = F.octet_length(raw) == F.length(raw)
    return (ascii_only | F.is_valid_utf8(raw)) & ~raw.contains(NUL)


def json_plan(spark: SparkSession, layout: Layout, paths: list[str], limits: Limits
              ) -> DataFrame:
    """The batch's JSON Lines files: typed columns, clean, and for suspects their raw line."""
    schema = StructType([StructField(c.name, StringType()) for c in layout.columns]
                        + [StructField("_corrupt", StringType())])
    raw = F.col("raw")
    lines = _text_lines(spark, paths).select(
        "raw", _SOURCE, F.from_json(raw, schema, JSON_OPTIONS).alias("f"),
        F.regexp_count(raw, F.lit(r'"\s*:')).alias("marks"))
    f = F.col("f")
    values = {c.name: f.getField(c.name) for c in layout.columns}
    typed_cols = _typed_columns(layout, values, json=True, raw=raw)
    present = sum((v.isNotNull().cast("int") for v in values.values()), F.lit(0))
    # every member's name is a string followed by a colon, so ``marks`` bounds the members
    # from above: as many as there are values, and each member is a declared column with a
    # value. Only other lines are parsed a second time for their names (extra ones, or one
    # named twice, which Spark would read as its last).
    plain = F.col("marks") == present
    keys = F.when(~plain, F.json_object_keys(raw))
    more = ~plain & (F.size(keys) > present)  # members beyond the values (extra, or null)
    declared = F.array(*[F.lit(c.name) for c in layout.columns])
    extra = more & F.exists(keys, lambda k: ~F.array_contains(declared, k))
    twice = more & (F.size(F.array_distinct(keys)) < F.size(keys))
    # Spark reads the first object of a line and ignores what follows it; a JSON parser
    # refuses the line. One closing brace, at the end: the line is that object alone.
    alone = (F.size(F.split(raw, "}")) == 2) & F.rtrim(raw).endswith("}")
    clean = (f.getField("_corrupt").isNull() & (plain | keys.isNotNull()) & ~twice
             & alone & ~raw.contains("\\u") & _line_checks(raw))
    return _finish(lines, layout, limits, typed_cols, clean, F.coalesce(extra, F.lit(False)),
                   raw.cast("binary"))


def csv_plan(spark: SparkSession, layout: Layout, header_line: str, names: list[str],
             paths: list[str], limits: Limits) -> DataFrame:
    """CSV files sharing one header line: typed columns, clean, suspects' raw line."""
    ddl = ", ".join(f"c{i} STRING" for i in range(len(names))) + ", _corrupt STRING"
    raw = F.col("raw")
    lines = _text_lines(spark, paths).select(
        "raw", _SOURCE, F.from_csv(raw, ddl, CSV_OPTIONS).alias("f"))
    f = F.col("f")
    position = {name: i for i, name in enumerate(names)}
    values = {c.name: F.nullif(f.getField(f"c{position[c.name]}"), F.lit(""))
              for c in layout.columns if c.name in position}
    typed_cols = _typed_columns(layout, values, json=False, raw=raw)
    quoted = raw.contains('"')
    odd = quoted & ((F.octet_length(raw) - F.octet_length(F.replace(raw, F.lit('"'), F.lit(""))))
                    % 2 == 1)
    fields_ok = F.when(quoted, raw.rlike(_CSV_QUOTES)).otherwise(F.lit(True))
    header = raw == F.lit(header_line)
    clean = f.getField("_corrupt").isNull() & ~odd & fields_ok & ~header & _line_checks(raw)
    extra = F.lit(bool(set(names) - layout.declared))
    return _finish(lines, layout, limits, typed_cols, clean, extra, raw.cast("binary"),
                   odd=odd, header=header)


def parquet_plan(spark: SparkSession, layout: Layout, schema: pa.Schema, paths: list[str],
                 limits: Limits) -> DataFrame:
    """Parquet files of one schema: typed columns, clean, suspects' original values."""
    df = spark.read.option(GLOB_PATHS_OPTION, "false").parquet(*paths)
    names = set(schema.names)
    out = [_parquet_value(F.col(f"`{col.name}`"), col.type, limited=col.name in layout.limited)
           if col.name in names  # (a missing one is a jsonb column: _parquet_schema)
           else Typed(F.lit(None).cast(_spark_type(col.type)), F.lit(False))
           for col in layout.columns]
    original = F.struct(*[F.col(f"`{n}`") for n in schema.names])
    rows = df.select("*", F.col("_metadata.file_name").alias(_SOURCE))
    extra = F.lit(bool(names - layout.declared))
    return _finish(rows, layout, limits, out, F.lit(True), extra, original)


def _spark_type(type_: str) -> str:
    target = target_type(type_)
    if target is not None and pa.types.is_decimal(target):
        return f"decimal({target.precision},{target.scale})"
    return {"bigint": "bigint", "integer": "int", "double precision": "double",
            "boolean": "boolean", "timestamptz": "timestamp"}.get(type_, "string")


def _parquet_value(v: Column, type_: str, *, limited: bool) -> Typed:
    if type_ == "text":
        def text_ok(x: Column) -> Column:
            ok = ~x.contains(NUL) & ((F.octet_length(x) == F.length(x)) | F.is_valid_utf8(x))
            if limited:
                ok = ok & (F.length(x) <= F.lit(typed.MAX_KEY_CHARS))
            return ok
        return Typed(v, v.isNotNull(), value_ok=text_ok)
    value = v.try_cast(_spark_type(type_))
    if type_ == "timestamptz":
        return Typed(value, v.isNotNull(),
                     value_ok=lambda x: x.between(ts_lit(MIN_TS), ts_lit(MAX_TS)))
    return Typed(value, v.isNotNull())


def _finish(df: DataFrame, layout: Layout, limits: Limits, typed_cols: list[Typed],
            clean: Column, extra: Column, raw: Column, *, odd: Column | None = None,
            header: Column | None = None) -> DataFrame:
    """Three projections: the typed values (under names of slidewin's own: a declared column
    may be called ``raw``), with what is known of their text and whether the record is
    otherwise ``clean``; then whether the record is clean, from the values as columns (each
    computed once: see ``Typed``); then the limits on its time, and what the record path needs
    of a suspect."""
    values = [f"_sw_v{i}" for i in range(len(typed_cols))]
    staged = df.select(
        *[t.value.alias(name) for t, name in zip(typed_cols, values, strict=True)],
        *[t.present.alias(f"_sw_p{i}") for i, t in enumerate(typed_cols)],
        *[t.text_ok.alias(f"_sw_k{i}") for i, t in enumerate(typed_cols)
          if t.text_ok is not None],
        clean.alias(_CLEAN), F.col(_SOURCE), raw.alias(_RAW), extra.alias(_EXTRA),
        (odd if odd is not None else F.lit(False)).alias(_ODD),
        (header if header is not None else F.lit(False)).alias(_HEADER),
    )
    clean = F.col(_CLEAN)
    for i, (t, col) in enumerate(zip(typed_cols, layout.columns, strict=True)):
        ok = t.value_ok(F.col(values[i]))
        if t.text_ok is not None:
            ok = F.col(f"_sw_k{i}") & ok
        present = F.col(f"_sw_p{i}")
        clean = clean & F.coalesce(present & ok if col.name in layout.required
                                   else ~present | ok, F.lit(False))
    staged = staged.select(*[F.col(name) for name in values], clean.alias(_CLEAN),
                           _SOURCE, _RAW, _EXTRA, _ODD, _HEADER)
    ts = F.col(values[layout.time_index])
    ok = F.col(_CLEAN) & F.coalesce(_limits_ok(ts, limits), F.lit(False))
    return staged.select(
        *[F.col(name).alias(c.name) for name, c in zip(values, layout.columns, strict=True)],
        ok.alias(_CLEAN),
        F.when(~ok, F.col(_SOURCE)).alias(_SOURCE),
        F.when(~ok, F.col(_RAW)).alias(_RAW),
        F.col(_EXTRA), F.col(_ODD), F.col(_HEADER),
    )


# -- the driver's side ----------------------------------------------------------------------


def pieces(spark: SparkSession, layout: Layout, groups: FileGroups, limits: Limits,
           whole_files: Iterator[tuple[str, bytes | str]]) -> Iterator[Parsed]:
    """The batch as pieces the sink writes one by one: one per Spark partition pulled (clean
    rows as an Arrow table, suspects decided by the record path), then the files read whole.
    Raises ``SpanningCsv`` when a CSV line shows its file has records spanning lines."""
    seen_headers: set[str] = set()
    plans: list[tuple[str, DataFrame, list[str]]] = []
    for (kind, _key), (shape, paths) in groups.groups.items():
        if kind == "json":
            plans.append((kind, json_plan(spark, layout, paths, limits), []))
        elif kind == "csv":
            line, names = shape
            plans.append((kind, csv_plan(spark, layout, line, names, paths, limits), names))
        else:
            plans.append((kind, parquet_plan(spark, layout, shape, paths, limits), []))
    target = pa.schema([(c.name, target_type(c.type) or pa.string()) for c in layout.columns])
    for kind, plan, names in plans:
        for _pid, table in indexed_partitions(plan, ahead=AHEAD[kind]):
            yield _piece(layout, kind, names, table, target, limits, seen_headers)
    if groups.whole:
        yield typed.parse_files(layout, whole_files, limits)


def _piece(layout: Layout, kind: str, header: list[str], table: pa.Table, target: pa.Schema,
           limits: Limits, seen_headers: set[str]) -> Parsed:
    clean = table[_CLEAN]
    good = table.filter(clean).select([c.name for c in layout.columns])
    good = pa.table([good[c.name].cast(target.field(c.name).type) for c in layout.columns],
                    schema=target)
    piece = Parsed()
    suspects = table.filter(pc.invert(clean))
    if suspects.num_rows and pc.any(suspects[_ODD]).as_py():
        odd = suspects.filter(suspects[_ODD])
        raise SpanningCsv(set(odd[_SOURCE].to_pylist()))
    if good.num_rows:
        # a (key, time) twice among them fails the COPY, and the piece goes through staging,
        # where the first is kept and the rest count as duplicates (``typed_sink.write_piece``)
        piece.extra += int(pc.sum(table.filter(clean)[_EXTRA].cast(pa.int64())).as_py() or 0)
        piece.tables.append(good)
        piece.newest(pc.max(good[layout.stream.time]).as_py())
    if suspects.num_rows:
        flags = clean.to_numpy(zero_copy_only=False)
        accepted_at = _decide(layout, kind, header, suspects, limits, seen_headers, piece,
                              np.flatnonzero(~flags).tolist())
        if piece.rows and good.num_rows:
            _first_of_each(layout, piece, np.flatnonzero(flags), accepted_at)
    return piece


def _first_of_each(layout: Layout, piece: Parsed, clean_at: np.ndarray,
                   accepted_at: list[int]) -> None:
    """A (key, time) both among the piece's clean rows and the rows the record path accepted:
    the record earlier in the partition (its files' order) stays, the other is a copy -- the
    rule of every stream, whichever path typed the records. ``clean_at`` / ``accepted_at``:
    where in the partition each clean row / accepted row was."""
    table = piece.tables[0]
    key, time = layout.stream.key, layout.stream.time
    wanted = {(row[layout.key_index], row[layout.time_index]): (i, at)
              for i, (row, at) in enumerate(zip(piece.rows, accepted_at, strict=True))}
    keys = pa.array(list({k for k, _ in wanted}), table.schema.field(key).type)
    candidates = np.flatnonzero(pc.is_in(table[key], value_set=keys).to_numpy(
        zero_copy_only=False))
    late_rows: set[int] = set()
    late_clean: list[int] = []
    for j in candidates.tolist():
        hit = wanted.get((table[key][j].as_py(), table[time][j].as_py()))
        if hit is not None:
            if clean_at[j] < hit[1]:
                late_rows.add(hit[0])
            else:
                late_clean.append(j)
    if late_clean:
        keep = np.ones(table.num_rows, dtype=bool)
        keep[late_clean] = False
        piece.tables[0] = table.filter(pa.array(keep))
    piece.rows = [row for i, row in enumerate(piece.rows) if i not in late_rows]
    piece.copies += len(late_clean) + len(late_rows)


def _decide(layout: Layout, kind: str, header: list[str], suspects: pa.Table, limits: Limits,
            seen_headers: set[str], piece: Parsed, positions: list[int]) -> list[int]:
    """The record path's verdict on each suspect record (at ``positions`` in the partition);
    rows it accepts join the piece. Where in the partition each accepted row was."""
    accepted_at: list[int] = []
    seen: set[tuple[Any, datetime]] = set()
    ki, ti = layout.key_index, layout.time_index
    sources = suspects[_SOURCE].to_pylist()
    if kind == "parquet":
        raws: list[Any] = typed.pylist(
            pa.RecordBatch.from_struct_array(suspects[_RAW].combine_chunks()))
    else:
        raws = suspects[_RAW].to_pylist()
    headers = suspects[_HEADER].to_pylist()
    for at, source, raw, is_header in zip(positions, sources, raws, headers, strict=True):
        if kind == "csv" and is_header and source not in seen_headers:
            seen_headers.add(source)  # the file's header line: no record
            continue
        if kind == "json":
            result = typed.json_line(layout, source, raw, limits)
        elif kind == "csv":
            result = typed.csv_line(layout, source, header, raw, limits)
        else:
            result = typed.parquet_row(layout, source, raw, limits)
        if result is not None:
            before = len(piece.rows)
            piece.take(result, seen, ki, ti)
            if len(piece.rows) > before:
                accepted_at.append(at)
    return accepted_at


__all__ = ["TS", "FileGroups", "SpanningCsv", "csv_header", "group_files", "pieces"]
