"""CSV files whose records span lines: RFC 4180 lets a quoted field hold a line break.

The text stream reads files line by line (Spark's text source: splittable, and each bad line
keeps its exact text). Read so, a record ``"a<newline>b",1,<ts>`` is two lines; worse, a line
strictly inside such a field may itself look like a whole record and would be stored as an
event nobody sent. Lines cannot be judged alone there: whether a line starts inside a quoted
field depends on every quote before it in the file.

What is cheap to know: a file has such a record exactly when one of its lines holds an odd
number of quotes (a line with an even number, including none, ends outside any field, so
the next line starts outside one too). The stream's plan flags those lines anyway; a batch
that has one is read again from its files, and ``spans_lines`` finds the files that need it.
Those files are split into records here, on the driver, by RFC 4180 -- a line break ends a
record only outside quotes -- each record's exact bytes kept for its dead letter, and the
records go through the same plan as lines do. A quote never closed makes the rest of its file
one record, refused as ``malformed`` with all of its text (there is no telling where that
record was meant to end).

Only such files pay for this (a scan of their bytes with numpy, then one Spark job each); the
others are read line by line as before. A file read here is held in the driver's memory.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

QUOTE, LF, CR = ord('"'), ord("\n"), ord("\r")


def is_csv(path: str) -> bool:
    return path.lower().endswith(".csv")


def spans_lines(path: str) -> bool:
    """Whether the CSV file at ``path`` has a quoted field holding a line break (False for
    other files, and for a file that cannot be read: Spark's reader reports that)."""
    if not is_csv(path):
        return False
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return False
    if b'"' not in data:  # almost every machine-written file: one memchr
        return False
    quotes, breaks = _positions(data)
    return bool(np.any(np.searchsorted(quotes, breaks) % 2))


def _positions(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(offsets of the quotes, offsets of the line-break bytes) in ``data``."""
    view = np.frombuffer(data, np.uint8)
    return np.flatnonzero(view == QUOTE), np.flatnonzero((view == LF) | (view == CR))


def records(data: bytes) -> list[bytes]:
    """The records of CSV ``data``: split at line breaks outside quotes (``\\n``, ``\\r\\n``
    or ``\\r``, as Spark's text source splits lines), each record's bytes exact, without its
    line break. Empty records (blank lines) are left out: they hold no event."""
    quotes, breaks = _positions(data)
    ends = breaks[np.searchsorted(quotes, breaks) % 2 == 0]  # breaks outside any field
    starts = np.concatenate(([0], ends + 1))
    stops = np.concatenate((ends, [len(data)]))
    return [data[a:b] for a, b in zip(starts.tolist(), stops.tolist(), strict=True) if b > a]


def read_records(spark: SparkSession, path: str) -> DataFrame:
    """The file's records as the text stream's columns ``raw, source`` (``raw`` the exact
    bytes as a string, which may hold invalid UTF-8 just as a line read by Spark does)."""
    with open(path, "rb") as f:
        found = records(f.read())
    table = pa.table({"raw": pa.array(found, pa.binary())})
    name = PurePosixPath(path).name
    df = spark.createDataFrame(table)
    return df.select(F.col("raw").cast("string").alias("raw"), F.lit(name).alias("source"))
