"""Writing one micro-batch of a declared stream, exactly once, in one transaction.

The order inside the transaction (autocommit connection + ``conn.transaction()``):

1. claim the batch marker (``slidewin.ingest_batches``, query id
   ``<query-id>/stream-<name>/<checkpoint id>``): a batch already there committed before (Spark
   replays it after a crash) and is skipped -- nothing changes;
2. read the stream's definition (``FOR SHARE``: a concurrent drop waits for the commit; a
   stream dropped meanwhile raises ``StreamGone`` and the batch rolls back) and lock its state
   (``slidewin.stream_begin``: newest event time and watermark before this batch);
3. parse the batch's files into typed rows and dead letters (``ingest.typed``), classified
   against that state, with the text columns an index holds (``indexed_columns``: the key,
   a join's ``on`` column, an index a user made) limited in length; a (key, time) repeated
   within the batch is kept once;
4. COPY the rows into a temporary staging table shaped like the stream's table, then
   ``INSERT INTO slidewin_streams.<name> ... ON CONFLICT DO NOTHING`` through the parent table
   (its statement triggers keep the rollups exact for the rows really inserted): rows already
   stored count as duplicates;
5. COPY the dead letters (``stream`` = the stream's name), raise the stream state
   (``slidewin.ingest_advance`` with the stream's grace), move the watermark of the joins
   reading the stream (``slidewin.joins_advance``: outer rows that became final; the pairs were
   written by the insert's ``joins_on_insert`` trigger), fill in the marker's counts; commit.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from slidewin.db.connect import procedure_errors
from slidewin.db.streams import Stream, get_stream
from slidewin.ingest.pgbinary import encode_table
from slidewin.ingest.sink import BatchResult, claim_batch, crash_point
from slidewin.ingest.typed import DeadLetter, Layout, Limits, Parsed, clean_text, parse_files
from slidewin.ingest.typed_arrow import csv_bytes

STAGE = "slidewin_stream_stage"
# the files of a batch, (name, content) -- content the reason when the entry must not be opened
# -- or a function that reads them once the batch is claimed
Files = Sequence[tuple[str, bytes | str]] | Callable[[], Iterable[tuple[str, bytes | str]]]
Pieces = Callable[[Layout, Limits], Iterable[Parsed]]


class StreamGone(Exception):
    """The stream was dropped (or never declared): its batch is not written."""

    def __init__(self, name: str) -> None:
        super().__init__(f"stream {name} is not declared (dropped while the ingest ran?)")
        self.name = name


def stream_query_id(query_id: str, name: str, checkpoint_id: str) -> str:
    """The marker's query id of one declared stream's query."""
    return f"{query_id}/stream-{name}/{checkpoint_id}"


def write_stream_batch(
    conn: psycopg.Connection,
    name: str,
    query_id: str,
    batch_id: int,
    files: Files,
    *,
    now: datetime,
    max_future: timedelta | None = None,
    pieces: Pieces | None = None,
) -> BatchResult:
    """Steps 1-5 above for one batch of stream ``name``; ``conn`` must be in autocommit mode.
    ``now`` is the clock of the ``future`` and ``expired`` rules and the state's update time.
    ``pieces``: the batch parsed elsewhere (on Spark, ``ingest.typed_spark``), piece by piece,
    given the stream's layout and the batch's limits; else ``files`` are parsed here."""
    started = time.monotonic()
    with conn.transaction():
        if not claim_batch(conn, query_id, batch_id):
            return BatchResult(query_id, batch_id, skipped=True)
        stream = _declared(conn, name)
        row = conn.execute("SELECT * FROM slidewin.stream_begin(%s)", (name,)).fetchone()
        newest, watermark = row if row else (None, None)
        limits = Limits(now, newest, watermark, stream.grace, stream.history, max_future)
        tick = time.monotonic()
        layout = Layout(stream, indexed_columns(conn, stream))
        if pieces is None:
            found: Iterable[Parsed] = [
                parse_files(layout, files() if callable(files) else files, limits)]
        else:
            found = pieces(layout, limits)
        parsed, inserted = write_pieces(conn, stream, layout, batch_id, found)
        parse_s = time.monotonic() - tick
        with procedure_errors():
            row = conn.execute("SELECT slidewin.ingest_advance(%s, %s, %s, %s)",
                               (name, parsed.max_ts, now, stream.grace)).fetchone()
            # the joins reading this stream: W moves with its time, outer rows become final
            conn.execute("SELECT slidewin.joins_advance(%s, %s)", (name, now))
        result = _result(query_id, batch_id, parsed, inserted, row[0] if row else None)
        seconds = time.monotonic() - started
        conn.execute(
            "UPDATE slidewin.ingest_batches SET rows_in = %s, accepted = %s, duplicates = %s, "
            "rejected = %s, max_ts = %s, seconds = %s, committed_at = now() "
            "WHERE query_id = %s AND batch_id = %s",
            (result.rows_in, result.accepted, result.duplicates, result.rejected,
             result.max_ts, seconds, query_id, batch_id),
        )
        crash_point("before_commit", batch_id)
    crash_point("after_commit", batch_id)
    return replace(result, seconds=time.monotonic() - started, compute_s=parse_s)


def _add(total: Parsed, piece: Parsed) -> None:
    """Count a written piece into the batch's totals (its rows are not kept)."""
    total.copies += piece.copies
    total.extra += piece.extra
    total.bad.extend(piece.bad)
    total.newest(piece.max_ts)
    total.counted += piece.good


def write_pieces(conn: psycopg.Connection, stream: Stream, layout: Layout, batch_id: int,
                 found: Iterable[Parsed]) -> tuple[Parsed, int]:
    """Write each piece and its dead letters, in a thread of their own, while this thread
    readies the next (Spark's next partition, the record path's verdicts, the binary COPY
    payload): (the batch's totals, the rows inserted). One piece is written at a time, on the
    batch's one connection."""
    types = [c.type for c in layout.columns]
    parsed, inserted = Parsed(), 0

    def write(piece: Parsed) -> int:
        written = write_piece(conn, stream, layout, piece)
        copy_dead_letters(conn, stream.name, batch_id, piece.bad)
        return written

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="slidewin-stream-write") as pool:
        pending: Future[int] | None = None
        for piece in found:
            encode(piece, types)
            if pending is not None:
                inserted += pending.result()
            pending = pool.submit(write, piece)
            _add(parsed, piece)
        if pending is not None:
            inserted += pending.result()
    return parsed, inserted


def encode(piece: Parsed, types: list[str]) -> None:
    """The piece's Arrow tables as COPY payloads: PostgreSQL's binary form where every column's
    type allows (``ingest.pgbinary.encode_table``), else CSV."""
    piece.payloads = []
    for table in piece.tables:
        if table.num_rows:
            data = encode_table(table, types) if len(types) == table.num_columns else None
            piece.payloads.append(("binary", data) if data is not None
                                  else ("csv", csv_bytes(table)))


def write_piece(conn: psycopg.Connection, stream: Stream, layout: Layout, piece: Parsed) -> int:
    """The piece's rows COPYed straight into the stream's table (its triggers keep the
    rollups, sessions and joins) inside a savepoint; if one is stored already -- a replayed
    file, a record repeated across pieces -- the savepoint rolls back and the rows go through
    staging, ``ON CONFLICT DO NOTHING``. The rows inserted."""
    if not piece.good:
        return 0
    cols = sql.SQL(", ").join(sql.Identifier(n) for n in layout.names)
    try:
        with conn.transaction(), conn.cursor() as cur:
            _copy(cur, sql.SQL("COPY {} ({}) ").format(stream.table, cols), piece,
                  [c.type for c in layout.columns])
        return piece.good
    except psycopg.errors.UniqueViolation:
        return insert_rows(conn, stream, layout, piece.rows, piece.tables)


def _copy(cur: psycopg.Cursor, into: sql.Composed, piece: Parsed, types: list[str]) -> None:
    """The piece's rows: the record path's as text, the Arrow tables' payloads as encoded."""
    if piece.rows:
        with cur.copy(into + sql.SQL("FROM STDIN")) as copy:
            for row in piece.rows:
                copy.write_row(row)
    if piece.payloads is None:
        encode(piece, types)
    for form, data in piece.payloads or ():
        with cur.copy(into + sql.SQL("FROM STDIN (FORMAT {})").format(sql.SQL(form))) as copy:
            copy.write(data)


def _result(query_id: str, batch_id: int, parsed: Parsed, inserted: int,
            newest: datetime | None) -> BatchResult:
    return BatchResult(
        query_id=query_id,
        batch_id=batch_id,
        rows_in=parsed.rows_in,
        accepted=inserted,
        duplicates=parsed.counted + parsed.copies - inserted,
        rejected=len(parsed.bad),
        by_reason=dict(Counter(b.reason for b in parsed.bad)),
        max_ts=parsed.max_ts,
        newest_ts=newest,
        path="copy" if parsed.counted else "empty",
        extra_fields=parsed.extra,
    )


def _declared(conn: psycopg.Connection, name: str) -> Stream:
    """The stream's definition as of this batch (columns may have been added since the last),
    its registry row share-locked until the commit."""
    found = conn.execute(
        "SELECT 1 FROM slidewin.streams WHERE name = %s AND NOT builtin FOR SHARE", (name,)
    ).fetchone()
    if found is None:
        raise StreamGone(name)
    return get_stream(conn, name)


def indexed_columns(conn: psycopg.Connection, stream: Stream) -> frozenset[str]:
    """The stream's columns any index of its table or of a partition holds (a column, not an
    expression over one): a text value there must fit in an index entry."""
    rows = conn.execute(
        "SELECT DISTINCT a.attname FROM pg_partition_tree(%s::regclass) t "
        "JOIN pg_index i ON i.indrelid = t.relid "
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)",
        (stream.table.as_string(conn),),
    ).fetchall()
    return frozenset(name for (name,) in rows)


def insert_rows(
    conn: psycopg.Connection, stream: Stream, layout: Layout, rows: Sequence[tuple],
    tables: Sequence[Any] = (),
) -> int:
    """COPY ``rows`` (in ``layout.names`` order) and ``tables`` (Arrow, the same order) into a
    staging table dropped at commit, then insert them into the stream's table, skipping a
    (key, time) stored already; the rows inserted."""
    if not rows and not any(t.num_rows for t in tables):
        return 0
    stage = sql.Identifier(STAGE)
    cols = sql.SQL(", ").join(sql.Identifier(n) for n in layout.names)
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(stage))
    conn.execute(
        sql.SQL("CREATE TEMP TABLE {} (LIKE {} INCLUDING DEFAULTS) ON COMMIT DROP").format(
            stage, stream.table
        )
    )
    with conn.cursor() as cur:
        if rows:
            with cur.copy(sql.SQL("COPY {} ({}) FROM STDIN").format(stage, cols)) as copy:
                for row in rows:
                    copy.write_row(row)
        for table in tables:
            with cur.copy(
                sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(stage, cols)
            ) as copy:
                copy.write(csv_bytes(table))
        cur.execute(
            sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} ON CONFLICT DO NOTHING").format(
                stream.table, cols, cols, stage
            )
        )
        inserted = cur.rowcount
        cur.execute(sql.SQL("DROP TABLE {}").format(stage))
    return inserted


def copy_dead_letters(
    conn: psycopg.Connection, name: str, batch_id: int, bad: Sequence[DeadLetter]
) -> None:
    """The batch's dead letters, each naming the stream. Their text is made storable here
    whatever a rule put in it (a detail quoting a value may hold a lone surrogate or NUL):
    a dead letter that cannot be written would stop the stream."""
    if not bad:
        return
    with conn.cursor() as cur, cur.copy(
        "COPY slidewin.dead_letters (source, reason, detail, raw, raw_bytes, event_ts, batch_id, "
        "stream) FROM STDIN"
    ) as copy:
        for b in bad:
            raw, exact = clean_text(b.raw)
            copy.write_row((clean_text(b.source)[0], b.reason, clean_text(b.detail)[0], raw,
                            b.raw_bytes if b.raw_bytes is not None else exact, b.event_ts,
                            batch_id, name))
