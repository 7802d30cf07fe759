"""The fast path of a declared stream's Parquet files: whole columns, not records.

``ingest.typed`` reads every record through Python, which makes each value's rules plain but
costs microseconds per value. A Parquet file whose columns already have types the stream's
columns can take without loss (strings for text, integers for bigint and integer, floats or
integers for double precision, decimals or integers for numeric, booleans, timestamps) is
instead cast column by column with Arrow's safe casts; the rows that break a rule -- a required
value missing, text holding NUL, a key (or an indexed text column) longer than
``MAX_KEY_CHARS``, a time out of range, future, expired or late -- go through the
record path (``rest``) and so get exactly its dead letters. Anything else (a cast that would
lose a digit or overflow, a jsonb column, extras kept in ``attrs``, invalid UTF-8) sends the whole
file to the record path: the fast path never decides differently, it only decides faster.

The good rows leave as an Arrow table in ``Layout.names`` order and are written with COPY in CSV
made by Arrow (every value quoted, NULL unquoted: an empty string stays an empty string).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from slidewin.ingest.eventtime import MAX_TS, MIN_TS
from slidewin.ingest.typed import MAX_KEY_CHARS, Layout, Limits, pylist

_NUMERIC = re.compile(r"^numeric\((\d+),(\d+)\)$")
TS = pa.timestamp("us", tz="UTC")


@dataclass
class Columns:
    """A Parquet file split by the fast path: ``good`` rows, typed, in ``Layout.names`` order;
    ``rest`` the records (as dicts) the record path must judge; ``extra`` whether the file has
    columns the stream does not declare (every record then carries them)."""

    good: pa.Table
    rest: list[dict[str, Any]]
    extra: bool


def target_type(type_: str) -> pa.DataType | None:
    """The Arrow type a column of this type is written from, or None (no fast path)."""
    simple = {"text": pa.string(), "bigint": pa.int64(), "integer": pa.int32(),
              "double precision": pa.float64(), "boolean": pa.bool_(), "timestamptz": TS}
    if type_ in simple:
        return simple[type_]
    m = _NUMERIC.match(type_)
    if m and int(m.group(1)) <= 38:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    return None


def _castable(source: pa.DataType, type_: str) -> bool:
    if type_ == "text":
        return pa.types.is_string(source) or pa.types.is_large_string(source)
    if type_ in ("bigint", "integer"):
        return pa.types.is_integer(source)
    if type_ == "double precision":
        return pa.types.is_floating(source) or pa.types.is_integer(source)
    if type_.startswith("numeric"):
        return pa.types.is_decimal(source) or pa.types.is_integer(source)
    if type_ == "boolean":
        return pa.types.is_boolean(source)
    if type_ == "timestamptz":
        return pa.types.is_timestamp(source)
    return False


def split(layout: Layout, table: pa.Table, limits: Limits) -> Columns | None:
    """The file's good rows and the rest, or None when the whole file takes the record path."""
    stream = layout.stream
    if stream.keep_extra:
        return None
    names = set(table.column_names)
    out: list[pa.Array] = []
    for col in layout.columns:
        target = target_type(col.type)
        if target is None:
            return None
        if col.name not in names:
            if col.name in layout.required:
                return None  # every record lacks it: the record path says so, one by one
            out.append(pa.nulls(table.num_rows, target))
            continue
        column = table.column(col.name).combine_chunks()
        if not _castable(column.type, col.type):
            return None
        if col.type == "timestamptz" and column.type.tz is None:
            column = pc.assume_timezone(column, "UTC") if column.type.unit else column
        try:
            if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
                column.validate(full=True)  # invalid UTF-8: the record path cleans it
            out.append(column.cast(target, safe=True))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
    good = pa.table(out, names=[c.name for c in layout.columns])
    bad = _broken(layout, good, limits)
    extra = bool(names - layout.declared)
    if bad is None:
        return Columns(good, [], extra)
    rest = [row for batch in table.filter(bad).to_batches() for row in pylist(batch)]
    return Columns(good.filter(pc.invert(bad)), rest, extra)


def _broken(layout: Layout, good: pa.Table, limits: Limits) -> pa.Array | None:
    """A mask of the rows the record path must judge (None: no such row)."""
    masks = [pc.is_null(good.column(name)) for name in layout.required]
    for col in layout.columns:
        if col.type == "text":
            masks.append(pc.fill_null(pc.match_substring(good.column(col.name), "\x00"), False))
        if col.name in layout.limited:  # an indexed text column: its length has a limit
            long = pc.greater(pc.utf8_length(good.column(col.name)), MAX_KEY_CHARS)
            masks.append(pc.fill_null(long, False))
    ts = good.column(layout.stream.time)
    low, high = MIN_TS, MAX_TS
    if limits.expired_before is not None:
        low = max(low, limits.expired_before)
    if limits.late_before is not None:
        low = max(low, limits.late_before)
    if limits.future_after is not None:
        high = min(high, limits.future_after)
    masks.append(pc.fill_null(pc.less(ts, pa.scalar(low, TS)), False))
    masks.append(pc.fill_null(pc.greater(ts, pa.scalar(high, TS)), False))
    mask = masks[0]
    for m in masks[1:]:
        mask = pc.or_(mask, m)
    mask = pc.fill_null(mask, True)
    return mask if pc.any(mask).as_py() else None


def csv_bytes(table: pa.Table) -> bytes:
    """The rows as CSV for COPY ... (FORMAT csv): every value quoted, NULL as an unquoted empty
    field, doubles in their shortest round-trip form, times in UTC."""
    buf = io.BytesIO()
    pacsv.write_csv(table, buf, pacsv.WriteOptions(include_header=False,
                                                   quoting_style="all_valid"))
    return buf.getvalue()
