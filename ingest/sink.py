"""Writing one micro-batch to PostgreSQL, exactly once, in ONE transaction.

Order inside the transaction (autocommit connection + ``conn.transaction()``):

1. claim the batch marker: ``INSERT INTO slidewin.ingest_batches (query_id, batch_id) ON
   CONFLICT DO NOTHING``. No row inserted -> the batch committed before (Spark is replaying it
   after a crash): skip, change nothing. A concurrent writer of the same batch waits on the key.
2. lock and read the stream state (newest event time committed before this batch, and the
   watermark: ``StreamState``);
3. ``compute(state)`` -> the batch's good rows (deduplicated within the batch) and dead
   letters, classified against that state (Spark runs here);
4. raw rows: binary COPY straight into their partitions of slidewin.events (one COPY per partition
   written, no tuple routing) inside a SAVEPOINT (fast path); on a unique violation -- a row
   already stored by an earlier batch, file or replay -- roll back to the savepoint and COPY
   into a TEMP staging table, then ``INSERT ... SELECT ... ON CONFLICT DO NOTHING``.
   Rollups: a chunk that carries Spark's partials (``BatchRows.pid``) and holds no in-batch
   duplicate is COPYed with the insert trigger stepped aside (``slidewin.precomputed_rollups``,
   set for that COPY alone, undone with its savepoint); every other chunk -- the staging path
   above, which may insert fewer rows than it sent, included -- leaves the rollups to the
   statement triggers, which add exactly the rows inserted;
5. Spark's partials of the chunks COPYed that way: checked against those chunks' rows, then
   merged per (part, second) and applied with one upsert (``slidewin.rollups_add``), before
   anything below can read or nibble the rollups;
6. dead letters (COPY), the stream state (greatest of old and new), the watermark of the joins
   reading the stream (``slidewin.joins_advance``), optional inline nibbles of
   the partitions written, the marker's counts; commit.

The fault hook (``SLIDEWIN_INGEST_FAULT=before_commit|after_commit``) exists for the crash tests:
the process kills itself with SIGKILL at that point of its first batch.
"""

from __future__ import annotations

import io
import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from slidewin.db.connect import procedure_errors
from slidewin.db.events import insert_staged
from slidewin.db.limits import MAX_NAMED_PART, partition_table
from slidewin.db.retention import row_targets
from slidewin.ingest import sessions
from slidewin.ingest.pgbinary import encode_events

FAULT_ENV = "SLIDEWIN_INGEST_FAULT"
_CSV = pacsv.WriteOptions(include_header=False)
EVENTS_COPY = "(part, uuid, val, ts) FROM STDIN (FORMAT binary)"


@dataclass(frozen=True)
class BatchRows:
    """What Spark hands the sink: ``good`` (part, uuid, val, ts, copies) and ``bad``
    (source, reason, detail, raw) as Arrow tables."""

    good: pa.Table
    bad: pa.Table
    source: str = ""  # the one file these rows came from, when they came from one
    pid: int | None = None  # the Spark partition they are, when Spark computes its partials
    extra: int = 0  # input records with fields beyond uuid, val, ts (dropped; counted)


@dataclass(frozen=True)
class Partials:
    """The last item of a batch's chunks, when Spark computes the rollups' partials: ``fetch``
    returns them (``ingest.parse.PARTIALS_COLUMNS``) for every Spark partition of the batch."""

    fetch: Callable[[], pa.Table]


class PartialsMismatch(Exception):
    """Spark's partials of a partition do not match the rows written for it; the batch rolls
    back (its writer retries it with the rollups left to the triggers)."""


@dataclass(frozen=True)
class StreamState:
    """What a batch is classified against: the newest event time committed before it and the
    watermark (``slidewin.stream_state``); both None before the stream's first batch."""

    newest: datetime | None = None
    watermark: datetime | None = None


@dataclass(frozen=True)
class InlineRetention:
    """``--inline``: nibble the written partitions to these limits in the batch transaction."""

    history: timedelta | None
    max_rows: int | None
    chunk: int


@dataclass(frozen=True)
class BatchResult:
    """The counts of one committed (or skipped) batch: rows_in = accepted+duplicates+rejected."""

    query_id: str
    batch_id: int
    skipped: bool = False
    rows_in: int = 0
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)
    max_ts: datetime | None = None
    newest_ts: datetime | None = None
    nibbled: int = 0
    path: str = ""
    seconds: float = 0.0
    compute_s: float = 0.0
    spark_rollups: int = 0  # rows whose rollups came from Spark's partials, not the triggers
    session_s: float = 0.0  # of ``seconds``, spent keeping session windows
    extra_fields: int = 0  # records with fields beyond uuid, val, ts, which are not stored


# A chunk is its rows, or a function that makes them: the sink's writer thread calls it, so
# work such as the in-batch dedup runs while Spark computes the next chunk.
Chunk = BatchRows | Callable[[], BatchRows]
Compute = Callable[["StreamState"], "BatchRows | Iterable[Chunk | Partials]"]
# Writes a chunk's good rows: (inserted, path, the rows as written -- ``ingest.isolate`` moves
# rows PostgreSQL refuses from good to bad)
Insert = Callable[[psycopg.Connection, BatchRows], "tuple[int, str, BatchRows]"]


PRECOMPUTED = "presummed"  # the path of a chunk COPYed for Spark's partials (trigger aside)
PRECOMPUTED_SETTING = "slidewin.precomputed_rollups"  # read by slidewin.rollups_on_insert


def insert_rows(conn: psycopg.Connection, rows: BatchRows) -> tuple[int, str, BatchRows]:
    """The default ``Insert``: ``insert_arrow_events`` on the good rows, with Spark's partials
    where the chunk has them and no in-batch duplicate, and the session windows' islands
    computed here when it has none; a failure fails the batch."""
    refs = sessions.definitions(conn) if _no_copies(rows.good) else []
    inserted, path = insert_arrow_events(
        conn, rows.good, precomputed=presummable(rows), session_refs=refs
    )
    return inserted, path, rows


def _no_copies(good: pa.Table) -> bool:
    return good.num_rows > 0 and pc.max(good["copies"]).as_py() == 1


def presummable(rows: BatchRows) -> bool:
    """Spark's partials of this chunk equal the aggregates of the rows a COPY inserts: Spark
    computed them (``pid``) and counted no row twice (no in-batch duplicate, ``copies`` 1)."""
    return rows.pid is not None and _no_copies(rows.good)


def write_batch(
    conn: psycopg.Connection,
    query_id: str,
    stream: str,
    batch_id: int,
    compute: Compute,
    inline: InlineRetention | None = None,
    insert: Insert = insert_rows,
    grace: timedelta | None = None,
) -> BatchResult:
    """Run steps 1-5 above; ``conn`` must be in autocommit mode (transactions are explicit).
    ``stream`` names the state row every ingest of the stream shares. ``grace`` (the late
    rule's) is recorded with the stream time: windows read the watermark they make
    (``slidewin.complete_up_to``).

    ``compute`` may return the batch as one BatchRows or as an iterable of chunks (e.g. one per
    input file): chunk k is written by a helper thread while Spark computes chunk k+1, all in
    the one transaction, so Spark's and PostgreSQL's work overlap on a multi-core machine.
    """
    started = time.monotonic()
    with conn.transaction():
        if not claim_batch(conn, query_id, batch_id):
            return BatchResult(query_id, batch_id, skipped=True)
        state = _lock_state(conn, stream)
        sessions_before = _session_seconds(conn)
        chunks = compute(state)
        written = _write_chunks(
            conn, [chunks] if isinstance(chunks, BatchRows) else chunks, stream, batch_id, insert
        )
        spark_rollups = apply_partials(conn, written.tally.presummed, written.partials)
        result = _finish(conn, query_id, stream, batch_id, written, inline, grace)
        result = replace(result, spark_rollups=spark_rollups,
                         session_s=_session_seconds(conn) - sessions_before)
        _record_times(conn, query_id, batch_id, time.monotonic() - started, result.session_s)
        crash_point("before_commit", batch_id)
    crash_point("after_commit", batch_id)
    return replace(result, seconds=time.monotonic() - started)


@dataclass
class _Tally:
    """What the batch's end needs of the rows written, kept per chunk instead of the rows
    themselves, so a batch of many files holds one chunk in memory, not the whole batch."""

    valid: int = 0  # good rows counted with their in-batch copies
    max_ts: datetime | None = None
    parts: Counter[int] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    rejected: int = 0
    presummed: dict[int, PartitionCheck] = field(default_factory=dict)  # by Spark partition
    extra: int = 0

    def add(self, rows: BatchRows, path: str = "") -> None:
        good, bad = rows.good, rows.bad
        self.extra += rows.extra
        if path == PRECOMPUTED and rows.pid is not None:
            self.presummed[rows.pid] = PartitionCheck.of(good)
        if good.num_rows:
            self.valid += int(pc.sum(good["copies"]).as_py() or 0)
            chunk_max = pc.max(good["ts"]).as_py()
            self.max_ts = chunk_max if self.max_ts is None else max(self.max_ts, chunk_max)
            self.parts.update(_value_counts(good["part"]))
        if bad.num_rows:
            self.rejected += bad.num_rows
            self.reasons.update(_value_counts(bad["reason"]))


@dataclass(frozen=True)
class PartitionCheck:
    """What Spark's partials of a partition must agree with: the rows COPYed for it. Cheap to
    take (vectorised), and a partial of the wrong partition -- were the two Spark jobs ever to
    split the scan differently -- fails it."""

    n: int
    vmin: int
    vmax: int
    sec_min: datetime
    sec_max: datetime

    @classmethod
    def of(cls, good: pa.Table) -> PartitionCheck:
        vals = pc.min_max(good["val"]).as_py()
        ts = pc.min_max(good["ts"]).as_py()
        return cls(
            good.num_rows, vals["min"], vals["max"], _second(ts["min"]), _second(ts["max"])
        )


def _second(t: datetime) -> datetime:
    return t.replace(microsecond=0)


@dataclass(frozen=True)
class _Written:
    tally: _Tally
    accepted: int
    path: str
    compute_s: float
    partials: Partials | None = None


def _write_chunks(
    conn: psycopg.Connection, chunks: Iterable[Chunk | Partials], stream: str, batch_id: int,
    insert: Insert,
) -> _Written:
    """Write each chunk while the next one is computed (at most one write in flight, so the
    writer thread is the only one that touches the tally until the end)."""
    tally, accepted, compute_s = _Tally(), 0, 0.0
    paths: list[str] = []
    partials: Partials | None = None
    source, pending = iter(chunks), None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="slidewin-sink") as pool:
        try:
            while True:
                tick = time.monotonic()
                rows = next(source, None)
                compute_s += time.monotonic() - tick
                if isinstance(rows, Partials):
                    partials = rows
                    continue
                if pending is not None:
                    done, pending = pending.result(), None
                    accepted, paths = accepted + done[0], [*paths, done[1]]
                if rows is None:
                    break
                pending = pool.submit(_write_chunk, conn, rows, stream, batch_id, tally, insert)
                del rows  # the writer holds the chunk until it is written
        finally:
            if pending is not None:  # never leave the transaction while a COPY still runs
                wait([pending])
    label = "+".join(sorted(set(paths) - {"empty"})) or "empty"
    return _Written(tally, accepted, label, compute_s, partials)


def _value_counts(values: pa.ChunkedArray) -> dict:
    return {e["values"]: e["counts"] for e in pc.value_counts(values).to_pylist()}


def _write_chunk(
    conn: psycopg.Connection, chunk: Chunk, stream: str, batch_id: int, tally: _Tally,
    insert: Insert,
) -> tuple[int, str]:
    rows = chunk if isinstance(chunk, BatchRows) else chunk()
    accepted, path, rows = insert(conn, rows)
    tally.add(rows, path)
    copy_dead_letters(conn, rows.bad, stream, batch_id)
    return accepted, path


def claim_batch(conn: psycopg.Connection, query_id: str, batch_id: int) -> bool:
    """Insert the batch's marker; False when it is there already (the batch committed)."""
    cur = conn.execute(
        "INSERT INTO slidewin.ingest_batches (query_id, batch_id) VALUES (%s, %s) "
        "ON CONFLICT DO NOTHING",
        (query_id, batch_id),
    )
    return cur.rowcount == 1


def _lock_state(conn: psycopg.Connection, stream: str) -> StreamState:
    """The stream's state committed before this batch, its row locked until the commit."""
    with procedure_errors():
        row = conn.execute("SELECT * FROM slidewin.stream_begin(%s)", (stream,)).fetchone()
    return StreamState(*row) if row else StreamState()


def _session_seconds(conn: psycopg.Connection) -> float:
    """Seconds spent keeping session windows so far, all definitions (a handful of rows)."""
    row = conn.execute("SELECT sum(apply_seconds) FROM slidewin.session_defs").fetchone()
    return float(row[0]) if row and row[0] is not None else 0.0


def _record_times(
    conn: psycopg.Connection, query_id: str, batch_id: int, seconds: float, session_s: float
) -> None:
    """The batch's time and its session windows' share (``slidewin.session_cost`` reads them)."""
    conn.execute(
        "UPDATE slidewin.ingest_batches SET seconds = %s, session_seconds = %s "
        "WHERE query_id = %s AND batch_id = %s",
        (seconds, session_s, query_id, batch_id),
    )


def _finish(
    conn: psycopg.Connection,
    query_id: str,
    stream: str,
    batch_id: int,
    written: _Written,
    inline: InlineRetention | None,
    grace: timedelta | None,
) -> BatchResult:
    tally = written.tally
    max_ts = tally.max_ts
    row = conn.execute(
        "SELECT slidewin.ingest_advance(%s, %s, now(), %s)", (stream, max_ts, grace)
    ).fetchone()
    newest = row[0] if row else None
    # the joins reading the stream: W moves with its time, outer rows become final
    conn.execute("SELECT slidewin.joins_advance(%s, now())", (stream,))
    nibbled = nibble_written(conn, tally.parts, newest, inline) if inline else 0
    result = BatchResult(
        query_id=query_id,
        batch_id=batch_id,
        rows_in=tally.valid + tally.rejected,
        accepted=written.accepted,
        duplicates=tally.valid - written.accepted,
        rejected=tally.rejected,
        by_reason=dict(tally.reasons),
        max_ts=max_ts,
        newest_ts=newest,
        nibbled=nibbled,
        path=written.path,
        extra_fields=tally.extra,
    )
    conn.execute(
        "UPDATE slidewin.ingest_batches SET rows_in = %s, accepted = %s, duplicates = %s, "
        "rejected = %s, max_ts = %s, committed_at = now() WHERE query_id = %s AND batch_id = %s",
        (
            result.rows_in,
            result.accepted,
            result.duplicates,
            result.rejected,
            max_ts,
            query_id,
            batch_id,
        ),
    )
    return replace(result, compute_s=written.compute_s)


def insert_arrow_events(
    conn: psycopg.Connection,
    good: pa.Table,
    *,
    precomputed: bool = False,
    session_refs: list[sessions.SessionRef] | None = None,
) -> tuple[int, str]:
    """Insert the batch's rows, skipping (uuid, ts) already stored. Returns (inserted, path):
    ``copy`` (binary COPY straight into the partitions) or, when some row is stored already,
    ``staging`` (``db.events.insert_staged``).

    ``precomputed``: the caller adds these rows' rollups itself (``apply_partials``), so the
    COPY runs with the insert trigger stepped aside (path ``PRECOMPUTED``). The switch is
    transaction-local and set inside the COPY's savepoint, so a unique violation undoes it with
    the COPY, and the staging path's insert -- which may insert fewer rows than it was sent --
    always leaves the rollups to the trigger.

    ``session_refs``: session definitions whose islands the caller may compute from these rows
    (they hold no (uuid, ts) twice). When the COPY inserts them all, they are applied here
    (``ingest.sessions``) and the session trigger skips those definitions during the COPY; on
    the staging path the trigger keeps every definition from the rows really inserted."""
    if good.num_rows == 0:
        return 0, "empty"
    rows = good.select(["part", "uuid", "val", "ts"])
    refs = session_refs or []
    try:
        with conn.transaction():  # SAVEPOINT: a unique violation undoes only these COPYs
            if precomputed:
                _precomputed(conn, True)
            if refs:
                sessions.skip(conn, refs)
            for table, piece in by_partition(rows):
                _copy(conn, f"COPY {table} {EVENTS_COPY}", piece)
            if precomputed:
                _precomputed(conn, False)
            if refs:
                sessions.skip(conn, [])
    except psycopg.errors.UniqueViolation:
        return insert_staged(conn, encode_events(rows)), "staging"
    if refs:
        sessions.apply(conn, rows, refs)
    return good.num_rows, PRECOMPUTED if precomputed else "copy"


def _precomputed(conn: psycopg.Connection, on: bool) -> None:
    conn.execute("SELECT set_config(%s, %s, true)", (PRECOMPUTED_SETTING, "on" if on else "off"))


def apply_partials(
    conn: psycopg.Connection,
    presummed: Mapping[int, PartitionCheck],
    partials: Partials | None,
) -> int:
    """Add Spark's partials of the partitions COPYed without the trigger to the rollups, with
    one upsert in (second, part) order (``slidewin.rollups_add``, which also keeps the coarse
    grains and signals the change). Each partition's partials are first checked against its
    rows (``PartitionCheck``). Returns the rows they cover."""
    if not presummed:
        return 0
    if partials is None:
        raise PartialsMismatch("rows were COPYed for Spark's partials, but none were computed")
    table = partials.fetch()
    table = table.filter(pc.is_in(table["pid"], pa.array(list(presummed), table["pid"].type)))
    _check_partials(table, presummed)
    merged = table.group_by(["part", "sec"], use_threads=False).aggregate(
        [("n", "sum"), ("total", "sum"), ("vmin", "min"), ("vmax", "max")]
    )
    with procedure_errors():
        conn.execute(
            "SELECT slidewin.rollups_add(%s::timestamptz[], %s::smallint[], %s::bigint[], "
            "%s::numeric[], %s::bigint[], %s::bigint[])",
            [
                merged[name].to_pylist()
                for name in ("sec", "part", "n_sum", "total_sum", "vmin_min", "vmax_max")
            ],
        )
    return sum(check.n for check in presummed.values())


def _check_partials(table: pa.Table, presummed: Mapping[int, PartitionCheck]) -> None:
    by_pid = table.group_by("pid", use_threads=False).aggregate(
        [("n", "sum"), ("vmin", "min"), ("vmax", "max"), ("sec", "min"), ("sec", "max")]
    )
    found = {
        row["pid"]: PartitionCheck(
            row["n_sum"], row["vmin_min"], row["vmax_max"], row["sec_min"], row["sec_max"]
        )
        for row in by_pid.to_pylist()
    }
    for pid, expected in presummed.items():
        if found.get(pid) != expected:
            raise PartialsMismatch(
                f"Spark's partials of partition {pid} ({found.get(pid)}) do not match "
                f"the rows written for it ({expected})"
            )


def by_partition(rows: pa.Table) -> Iterator[tuple[str, bytes]]:
    """(table, binary COPY data) per COPY: each partition's rows straight into its table (no
    tuple routing; the partitions carry the same rollup triggers, and PostgreSQL checks each row
    against the partition's bound), or all rows through slidewin.events if a part has no such
    name. Binary, not CSV: see ``ingest.pgbinary``."""
    bounds = pc.min_max(rows["part"]).as_py()
    if rows["part"].null_count or bounds["min"] < 0 or bounds["max"] > MAX_NAMED_PART:
        yield "slidewin.events", encode_events(rows)
        return
    rows, offset = rows.sort_by("part"), 0
    for entry in pc.value_counts(rows["part"]).to_pylist():  # sorted: in part order
        count = entry["counts"]
        yield partition_table(entry["values"]), encode_events(rows.slice(offset, count))
        offset += count


def copy_dead_letters(conn: psycopg.Connection, bad: pa.Table, stream: str,
                      batch_id: int) -> None:
    """COPY the batch's dead letters, each naming ``stream``; ``ts`` (the event time, when it
    parsed) goes to ``event_ts``, which windows read to count the late events of a range."""
    if bad.num_rows == 0:
        return
    if "raw_bytes" not in bad.column_names:  # only rows with inexact raw text carry bytes
        bad = bad.append_column("raw_bytes", pa.nulls(bad.num_rows, pa.string()))
    table = (
        bad.select(["source", "reason", "detail", "raw", "raw_bytes"])
        .append_column("event_ts", _event_times(bad))
        .append_column("batch_id", pa.array([batch_id] * bad.num_rows, pa.int64()))
        .append_column("stream", pa.array([stream] * bad.num_rows, pa.string()))
    )
    _copy(
        conn,
        "COPY slidewin.dead_letters (source, reason, detail, raw, raw_bytes, event_ts, batch_id, "
        "stream) FROM STDIN (FORMAT csv)",
        to_csv(table),
    )


# the reasons whose ts parsed and lies in PostgreSQL's range (a bad_ts may be year -13097)
_TIMED_REASONS = pa.array(["late", "expired", "future"])
_TS_TYPE = pa.timestamp("us", tz="UTC")
_TS_LOW = pa.scalar(datetime(1, 1, 1, tzinfo=UTC), _TS_TYPE)


def _event_times(bad: pa.Table) -> pa.Array | pa.ChunkedArray:
    """The event time of each dead letter where it is one, else NULL."""
    if "ts" not in bad.column_names:
        return pa.nulls(bad.num_rows, _TS_TYPE)
    ts = bad["ts"].cast(_TS_TYPE)
    keep = pc.and_(pc.is_in(bad["reason"], _TIMED_REASONS), pc.greater_equal(ts, _TS_LOW))
    return pc.if_else(keep, ts, pa.scalar(None, _TS_TYPE))


def nibble_written(
    conn: psycopg.Connection,
    written: Mapping[int, int],
    newest: datetime | None,
    inline: InlineRetention,
) -> int:
    """Nibble each partition this batch wrote, in partition order, to the inline limits.

    ``max_rows`` is the store-wide total, as everywhere in slidewin: it is split into per-partition
    targets by ``slidewin.retention_targets`` (the newest rows of the whole store are kept).

    Per partition: repeat ``slidewin.nibble`` while it deletes a full chunk, up to (rows this
    batch sent to the partition + one chunk) -- enough to keep up in steady state, and bounded by
    the batch's own size, so a large backlog is worked off over several batches instead of in one
    long transaction.
    """
    cutoff = newest - inline.history if inline.history is not None and newest else None
    if cutoff is None and inline.max_rows is None:
        return 0
    targets = row_targets(conn, inline.max_rows) if inline.max_rows is not None else {}
    total = 0
    for part in sorted(written):
        total += _nibble_part(conn, part, written[part], cutoff, targets.get(part), inline)
    return total


def _nibble_part(
    conn: psycopg.Connection,
    part: int,
    written: int,
    cutoff: datetime | None,
    target: int | None,
    inline: InlineRetention,
) -> int:
    if cutoff is None and target is None:
        return 0
    budget, deleted = written + inline.chunk, 0
    while deleted < budget:
        with procedure_errors():
            row = conn.execute(
                "SELECT slidewin.nibble(%s, %s, %s, %s)",
                (part, cutoff, target, inline.chunk),
            ).fetchone()
        step = int(row[0]) if row else 0
        deleted += step
        if step < inline.chunk:
            break
    return deleted


def to_csv(table: pa.Table) -> bytes:
    """Arrow table -> CSV bytes for ``COPY ... (FORMAT csv)`` (NULL = empty, '' = quoted)."""
    sink = io.BytesIO()
    pacsv.write_csv(table, sink, _CSV)
    return sink.getvalue()


def _copy(conn: psycopg.Connection, statement: str, data: bytes) -> None:
    with conn.cursor().copy(statement) as copy:
        copy.write(data)


def crash_point(point: str, batch_id: int) -> None:
    """Crash-test hook: die with SIGKILL at ``point`` of the first batch when asked to."""
    if batch_id == 0 and os.environ.get(FAULT_ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)
