"""Splitting one micro-batch's Arrow table into good rows and dead letters, and the in-batch
dedup of the good rows.

Spark hands over one table per batch (``parse.batch_output``). The dedup of (uuid, ts) within
the batch runs here with Arrow's C++ hash aggregation instead of a Spark shuffle: on this
2-core machine the shuffle cost more than the whole COPY of the batch (see the benchmark notes).
The result is the same as ``parse.good_rows``: one row per (part, uuid, ts), the first in the
table's order kept (the files' order, each file's records in order: what a replay reads again),
``copies`` = how many times it occurred. The same rule as every stream's, in a batch and across
batches: the first record of an identity is stored, the later ones are duplicates -- it needs no
measure (a declared stream may have several, or none).
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from slidewin.ingest.sink import BatchRows

# the detail of a CSV line with an odd number of quotes: read line by line, a piece of a record
# whose quoted field holds a line break (the stream then reads its file record by record,
# ``ingest.csvrecords``); read record by record, a quote never closed
CSV_UNBALANCED = "unbalanced quotes: a quoted CSV field is never closed"

DEAD_LETTER_COLUMNS = ("source", "reason", "detail", "raw", "raw_bytes", "ts")
GOOD_SCHEMA = pa.schema(
    [
        ("part", pa.int16()),
        ("uuid", pa.string()),
        ("val", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("copies", pa.int64()),
    ]
)


def split(table: pa.Table) -> BatchRows:
    """``batch_output`` rows -> BatchRows(good deduplicated, bad for the dead-letter table,
    the count of records with fields beyond uuid, val, ts)."""
    valid = pc.is_null(table["reason"])
    bad = storable_details(table.filter(pc.invert(valid)).select(list(DEAD_LETTER_COLUMNS)))
    good = table.filter(valid).select(["part", "uuid", "val", "ts"])
    return BatchRows(good=dedup(good), bad=bad, extra=extra_records(table))


def extra_records(table: pa.Table) -> int:
    """Rows of a ``batch_output`` table flagged ``extra`` (a table without the column: none)."""
    if "extra" not in table.column_names or table.num_rows == 0:
        return 0
    return int(pc.sum(table["extra"].cast(pa.int64())).as_py() or 0)


def unclosed_quotes(rows: BatchRows) -> bool:
    """Whether a chunk holds a CSV line with unbalanced quotes: read line by line, a part of a
    record whose quoted field holds a line break (``ingest.csvrecords``)."""
    if rows.bad.num_rows == 0:
        return False
    return bool(pc.any(pc.equal(rows.bad["detail"], CSV_UNBALANCED)).as_py())


def newest_valid(table: pa.Table) -> datetime | None:
    """The newest event time of the valid rows of a ``batch_output`` table (``parse.Limits``)."""
    ts = table.filter(pc.is_null(table["reason"]))["ts"]
    return pc.max(ts).as_py() if len(ts) else None


def storable_details(bad: pa.Table) -> pa.Table:
    """Details quote the bad value, which may hold NUL; PostgreSQL text cannot (``\\0``
    instead, as in ``raw``)."""
    if bad.num_rows == 0:
        return bad
    index = bad.schema.get_field_index("detail")
    return bad.set_column(index, "detail", pc.replace_substring(bad["detail"], "\x00", "\\0"))


def dedup(good: pa.Table) -> pa.Table:
    """One row per (part, uuid, ts), the first in ``good``'s order, with the count of copies
    (an ordered aggregation: hence no threads)."""
    if good.num_rows == 0:
        return GOOD_SCHEMA.empty_table()
    grouped = good.group_by(["part", "uuid", "ts"], use_threads=False).aggregate(
        [("val", "first"), ("val", "count")]
    )
    return pa.table(
        [
            grouped["part"].cast(pa.int16()),
            grouped["uuid"],
            grouped["val_first"],
            grouped["ts"].cast(pa.timestamp("us", tz="UTC")),
            grouped["val_count"],
        ],
        schema=GOOD_SCHEMA,
    )


def partials(good: pa.Table, pid: int) -> pa.Table:
    """The rollups' partials (``parse.PARTIALS_COLUMNS``) of one pulled partition's good rows,
    summed with Arrow on the driver: per (part, second) count, sum, min and max -- what the
    statement triggers would add for the same rows, and what ``parse.partials`` has Spark
    compute in a second job over the scan. Here the rows are already in the driver, so summing
    them costs a vectorised pass instead of a second read of the files. ``total`` is
    decimal(38,0): a second's sum of 64-bit values can overflow 64 bits."""
    keyed = pa.table({
        "part": good["part"],
        "sec": pc.floor_temporal(good["ts"], unit="second"),
        "val": good["val"],
        "total": good["val"].cast(pa.decimal128(38, 0)),
    })
    grouped = keyed.group_by(["part", "sec"], use_threads=False).aggregate(
        [("val", "count"), ("total", "sum"), ("val", "min"), ("val", "max")]
    )
    return pa.table({
        "pid": pa.array(np.full(grouped.num_rows, pid, np.int32)),
        "part": grouped["part"],
        "sec": grouped["sec"],
        "n": grouped["val_count"],
        "total": grouped["total_sum"],
        "vmin": grouped["val_min"],
        "vmax": grouped["val_max"],
    })


def unreadable_file(name: str, path: str, error: str) -> pa.Table:
    """One ``batch_output``-shaped dead-letter row for a whole file Spark could not read."""
    return pa.table(
        {
            "part": pa.array([None], pa.int16()),
            "uuid": pa.array([None], pa.string()),
            "val": pa.array([None], pa.int64()),
            "ts": pa.array([None], pa.timestamp("us", tz="UTC")),
            "reason": ["unreadable_file"],
            "source": [name],
            "detail": [error],
            "raw": [path],
            "raw_bytes": pa.array([None], pa.string()),
            "extra": pa.array([None], pa.bool_()),
        }
    )
