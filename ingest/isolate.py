"""Narrowing a failed write down to the records that fail, so one bad record never holds back
the rest of its file or batch.

When a batch fails for a reason the validation did not foresee -- PostgreSQL refuses a value,
a constraint someone added rejects a row, an encoding step chokes -- the batch's transaction
rolls back and the handler writes it again file by file, calling ``insert_narrowed`` for each
file's rows: the rows are written inside a SAVEPOINT; if that fails with a content error, the
rows are split in halves, each half written in its own savepoint, down to single rows. A row
that fails alone is a dead letter, reason ``unstorable``, with PostgreSQL's words; the rest
commit with the batch. Cost: about 2 x log2(rows) savepoints per failing row, and nothing at
all on a healthy stream (this path runs only after a failure).

Only *content* errors are narrowed: a database that went away, a missing table or a full disk
is no fault of the rows, and dead-lettering them would lose good data -- those errors fail the
batch, which is retried whole.
"""

from __future__ import annotations

import json

import psycopg
import pyarrow as pa
import pyarrow.compute as pc

from slidewin.ingest.errors import first_line
from slidewin.ingest.sink import BatchRows, insert_arrow_events

# errors a record's content can cause: SQLSTATE classes 22 (data exception) and 23 (integrity
# constraint violation) and 54000 (a value too large to index), and the Python-side encoding
NARROWABLE = (
    psycopg.DataError,
    psycopg.IntegrityError,
    psycopg.errors.ProgramLimitExceeded,
    ValueError,
    OverflowError,
    pa.ArrowException,
)
REASON = "unstorable"


def insert_narrowed(conn: psycopg.Connection, rows: BatchRows) -> tuple[int, str, BatchRows]:
    """Insert ``rows.good``, turning each row PostgreSQL refuses into dead letters (one per
    copy of it in the batch, so the batch's counts still add up). Returns (inserted, path,
    the rows as written: good without the refused rows, bad with their dead letters)."""
    inserted, failed = _insert_or_split(conn, rows.good, 0)
    if not failed:
        return inserted, "narrowed", rows
    indices = pa.array([index for index, _ in failed], pa.int64())
    keep = pc.invert(pc.is_in(pa.array(range(rows.good.num_rows)), indices))
    dead = _dead_letters(rows.good.take(indices), [why for _, why in failed], rows.source)
    bad = pa.concat_tables([rows.bad, dead], promote_options="permissive")
    narrowed = BatchRows(rows.good.filter(keep), bad, rows.source, extra=rows.extra)
    return inserted, "narrowed", narrowed


def _insert_or_split(
    conn: psycopg.Connection, good: pa.Table, offset: int
) -> tuple[int, list[tuple[int, str]]]:
    """(rows inserted, [(row index, PostgreSQL's reason)] for the rows that fail alone)."""
    if good.num_rows == 0:
        return 0, []
    try:
        with conn.transaction():  # SAVEPOINT: a failure undoes only this piece
            return insert_arrow_events(conn, good)[0], []
    except NARROWABLE as exc:
        if good.num_rows == 1:
            return 0, [(offset, first_line(str(exc)))]
    half = good.num_rows // 2
    left, left_failed = _insert_or_split(conn, good.slice(0, half), offset)
    right, right_failed = _insert_or_split(conn, good.slice(half), offset + half)
    return left + right, left_failed + right_failed


def _dead_letters(refused: pa.Table, reasons: list[str], source: str) -> pa.Table:
    """One dead letter per input copy of each refused row; raw is the event as JSON."""
    rows = []
    for event, why in zip(refused.to_pylist(), reasons, strict=True):
        raw = json.dumps(
            {"uuid": event["uuid"], "val": event["val"], "ts": event["ts"].isoformat()},
            ensure_ascii=False,
        )
        detail = f"PostgreSQL refused the event: {why}"
        rows += [{"source": source or "?", "reason": REASON, "detail": detail, "raw": raw,
                  "ts": event["ts"]}] * int(
            event.get("copies") or 1
        )
    return pa.Table.from_pylist(
        rows,
        schema=pa.schema(
            [("source", pa.string()), ("reason", pa.string()), ("detail", pa.string()),
             ("raw", pa.string()), ("ts", pa.timestamp("us", tz="UTC"))]
        ),
    )
