"""The query benchmark: window answers from the rollups against scanning the raw rows.

What one run does, all in a dedicated fresh database (``slidewin_bench_<random>``, dropped at the
end unless ``keep``), so the user's store is never touched:

1. Index cost. The same ``copy_rows`` rows are COPYed into the empty raw table three ways -- as
   shipped (primary key + rollup triggers), without the primary key (triggers kept), and with an
   extra index on ``val`` -- ``copy_rounds`` times, the variant order rotating each round so
   machine noise spreads evenly. Median rows/s per variant; the table is truncated in between.
2. Load. ``rows`` rows spread evenly over ``seconds`` of event time (ts increments of
   seconds/rows), keys from a fixed pool of random UUIDs, values uniform in [0, 1e6), COPYed in
   chunks of ``chunk_rows`` (one transaction each: the rollup trigger aggregates each COPY).
   Then VACUUM ANALYZE, as autovacuum would do soon after.
3. Windows. For each window of N whole seconds ending with the newest second: the average from
   the rollups (``slidewin.window_avg``) ``repeat`` times, interleaved with the naive raw scan
   (``SELECT avg(val) FROM slidewin.events WHERE ts >= .. AND ts < ..``) ``naive_repeat`` times;
   the max from the rollups (``slidewin.window_max``) ``repeat`` times. The answers of both ways
   are compared once (``answers_match``).
4. Nibbles. ``nibbles`` calls of ``slidewin.delete_after_date(part, cutoff, nibble_chunk)`` with a
   cutoff past every row, round-robin over the partitions, each its own transaction (timed whole,
   and split into the call and its COMMIT). State is NOT reset between calls: each call deletes
   the oldest ``nibble_chunk`` rows left by the previous ones, as retention does in steady state.
   A second series of as many calls runs with ``synchronous_commit = off``.

Every timing is client-side (``time.perf_counter``) over one warm connection, so it includes the
round trip; p50/p99 are nearest-rank percentiles.

``stream`` (``--stream wide``): the same phases over a declared benchmark stream
(client/bench/streams.py, ``Target``): its rows (``BenchStream.spread``, keys from a pool of
1,000) through its COPY, the index cost on its table's primary key and an index on its measure
(the ``val`` of the figures' names), avg and max over the measure from its rollups
(``slidewin.stream_summary``) against the raw scan, and nibbles of its retention
(``slidewin.stream_nibble``, its history set so that every row is due).
"""

from __future__ import annotations

import math
import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from slidewin.client.bench.stats import percentile
from slidewin.db import streams
from slidewin.db.connect import connect
from slidewin.db.errors import ConfigError, SlidewinError
from slidewin.db.events import partition_of
from slidewin.db.limits import MAX_CHUNK, MAX_PARTITIONS
from slidewin.db.schema import init_schema
from slidewin.db.scratch import scratch_database

if TYPE_CHECKING:
    from slidewin.client.bench.streams import BenchStream

Progress = Callable[[str], None]
WINDOWS_S = (1, 5, 10, 30)
KEY_POOL = 4096
INDEX_VARIANTS = ("pk", "no_index", "pk_plus_val_index")


@dataclass(frozen=True)
class QueryBenchSpec:
    """What to load and how often to measure. Field names match the CLI options."""

    rows: int = 2_000_000
    seconds: int = 40
    partitions: int = 8
    repeat: int = 200
    naive_repeat: int = 15
    nibbles: int = 200
    nibble_chunk: int = 1000
    copy_rows: int = 500_000
    copy_rounds: int = 3
    chunk_rows: int = 100_000
    keep: bool = False
    seed: int = 42
    stream: str = "events"

    def __post_init__(self) -> None:
        minimum = {"rows": 1, "seconds": 1, "partitions": 1, "repeat": 1, "naive_repeat": 1,
                   "nibbles": 0, "nibble_chunk": 1, "copy_rows": 0, "copy_rounds": 1,
                   "chunk_rows": 1}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in minimum and value < minimum[f.name]:
                option = "--" + f.name.replace("_", "-")
                raise ConfigError(
                    f"{option} must be at least {minimum[f.name]}, got {value}; "
                    f"e.g. {option} {f.default}"
                )
        if self.partitions > MAX_PARTITIONS:
            raise ConfigError(
                f"--partitions must be at most {MAX_PARTITIONS}, got {self.partitions}"
            )
        if self.nibble_chunk > MAX_CHUNK:
            raise ConfigError(
                f"--nibble-chunk must be at most {MAX_CHUNK}, got {self.nibble_chunk}"
            )


# --- timing -------------------------------------------------------------------------------------


def timed_ms(run: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    out = run()
    return (time.perf_counter() - start) * 1000.0, out


def _stats(prefix: str, samples: Sequence[float]) -> dict[str, float]:
    return {f"{prefix}_ms_p50": round(percentile(samples, 50), 4),
            f"{prefix}_ms_p99": round(percentile(samples, 99), 4)}


# --- data ---------------------------------------------------------------------------------------


def copy_chunks(
    rows: int, seconds: int, start: datetime, partitions: int, chunk_rows: int, seed: int
) -> Iterator[bytes]:
    """COPY text for ``rows`` events over ``seconds`` from ``start``, ``chunk_rows`` per chunk.

    Row i has ts = start + floor(i * seconds / rows) microseconds and key i mod KEY_POOL, so
    (uuid, ts) is unique while rows/s stays below KEY_POOL million.
    """
    rng = random.Random(seed)  # noqa: S311 - reproducible benchmark data, not secrets
    keys = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(KEY_POOL)]
    prefix = [f"{partition_of(k, partitions)}\t{k}\t" for k in keys]
    step_us = seconds * 1_000_000 / rows
    stamps = [(start + timedelta(seconds=s)).strftime("%Y-%m-%d %H:%M:%S")
              for s in range(seconds + 1)]
    for first in range(0, rows, chunk_rows):
        lines = []
        for i in range(first, min(rows, first + chunk_rows)):
            sec, micro = divmod(int(i * step_us), 1_000_000)
            val = rng.randrange(1_000_000)
            lines.append(f"{prefix[i % KEY_POOL]}{val}\t{stamps[sec]}.{micro:06d}+00\n")
        yield "".join(lines).encode()


def copy_rows(conn: psycopg.Connection, chunks: Sequence[bytes]) -> float:
    """COPY every chunk in its own transaction; returns the seconds spent (generation excluded)."""
    target = "COPY slidewin.events (part, uuid, val, ts) FROM STDIN"
    spent = 0.0
    for chunk in chunks:
        start = time.perf_counter()
        with conn.transaction(), conn.cursor().copy(target) as copy:
            copy.write(chunk)
        spent += time.perf_counter() - start
    return spent


# --- what each phase does to the stream it measures --------------------------------------------


@dataclass(frozen=True)
class Target:
    """The stream the phases measure: how its rows are made and written, its raw table, its
    avg and max from the rollups and by scanning, and its nibble -- the built-in stream's own
    functions, or a declared stream's (``slidewin.stream_*``) with its measure."""

    stream: BenchStream
    dsn: str  # the benchmark database (a declared stream's COPY opens its own connection)
    history: timedelta = timedelta(hours=2)  # a declared stream's, for the nibbles

    @property
    def declared(self) -> bool:
        return self.stream.declared

    def chunks(self, spec: QueryBenchSpec, rows: int, seconds: int, start: datetime,
               seed: int) -> Iterator[Any]:
        """``rows`` rows over ``seconds`` from ``start``, ``chunk_rows`` a chunk, as written."""
        if not self.declared:
            yield from copy_chunks(rows, seconds, start, spec.partitions, spec.chunk_rows, seed)
            return
        start_us, span_us = round(start.timestamp() * 1_000_000), seconds * 1_000_000
        for first in range(0, rows, spec.chunk_rows):
            last = min(rows, first + spec.chunk_rows)
            lo, hi = (start_us + i * span_us // rows for i in (first, last))
            yield self.stream.copy_input(self.stream.spread(last - first, lo, hi - lo,
                                                            seed + first), spec.partitions)

    def write(self, conn: psycopg.Connection, chunks: Sequence[Any]) -> float:
        """Every chunk in a transaction of its own; the seconds spent (generation excluded)."""
        if not self.declared:
            return copy_rows(conn, chunks)
        return sum(c.num_rows / self.stream.copy_rate(self.dsn, c, c.num_rows) for c in chunks)

    @staticmethod
    def count(chunk: Any) -> int:
        return chunk.count(b"\n") if isinstance(chunk, bytes) else chunk.num_rows

    def rollups(self) -> sql.Composable:
        if not self.declared:
            return sql.SQL("slidewin.rollups")
        return sql.Identifier("slidewin_rollups", self.stream.name)

    def stored(self, conn: psycopg.Connection) -> int:
        row = conn.execute(sql.SQL("SELECT coalesce(sum(n), 0) FROM {}").format(
            self.rollups())).fetchone()
        return int(row[0]) if row else 0

    def newest(self, conn: psycopg.Connection) -> datetime:
        """Stream time: the newest event (a declared stream's: its newest second)."""
        found = (streams.newest_second(conn, self.stream.name) if self.declared
                 else _scalar(conn, "SELECT slidewin.stream_time()", ()))
        if found is None:
            raise SlidewinError(f"stream {self.stream.name} holds no rows after the load")
        return found

    def rollup_query(self, what: str, seconds: int, end: datetime, lo: datetime, hi: datetime
                     ) -> tuple[str, tuple[object, ...]]:
        """``what`` (avg or max) over the window from the rollups."""
        if not self.declared:
            return f"SELECT slidewin.window_{what}(%s, %s)", (seconds, end)
        column = "avg" if what == "avg" else "vmax"
        return (f"SELECT {column} FROM slidewin.stream_summary(%s, %s, %s, %s)",
                (self.stream.name, self.stream.measure, lo, hi))

    def naive_query(self, what: str) -> sql.SQL | sql.Composed:
        """``what`` (avg or max) over [lo, hi) by scanning the raw rows (a double's max as the
        numeric a declared stream's rollups give)."""
        if not self.declared:
            return sql.SQL(NAIVE_AVG if what == "avg" else NAIVE_MAX)
        template = ("SELECT avg({v}) FROM {t} WHERE ts >= %s AND ts < %s" if what == "avg"
                    else "SELECT max({v})::text::numeric FROM {t} WHERE ts >= %s AND ts < %s")
        return sql.SQL(template).format(v=sql.Identifier(self.stream.measure),
                                        t=self.stream.table)

    def prepare_nibbles(self, conn: psycopg.Connection) -> None:
        if self.declared:  # a history, so that its rows are due
            streams.set_retention(conn, self.stream.name, history=self.history, grace=None)

    def nibble(self, i: int, spec: QueryBenchSpec, cutoff: datetime
               ) -> tuple[str, tuple[object, ...]]:
        """The i-th nibble deleting rows older than ``cutoff``: round-robin over the built-in
        stream's partitions; a declared stream's oldest rows, whichever partition holds them."""
        if not self.declared:
            return ("SELECT slidewin.delete_after_date(%s, %s, %s)",
                    (i % spec.partitions, cutoff, spec.nibble_chunk))
        return ("SELECT slidewin.stream_nibble(%s, %s, %s)",
                (self.stream.name, cutoff + self.history, spec.nibble_chunk))


# --- phases -------------------------------------------------------------------------------------


INDEX_NAME = "bench_val"


def _primary_key(conn: psycopg.Connection, target: Target) -> tuple[str, str]:
    """The raw table's primary key: its name and its definition, from the catalog."""
    row = conn.execute(
        sql.SQL("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = {}::regclass AND contype = 'p'").format(
            sql.Literal(target.stream.table.as_string(conn)))).fetchone()
    assert row is not None
    return row[0], row[1]


def _variant_setup(conn: psycopg.Connection, variant: str, target: Target,
                   key: tuple[str, str]) -> None:
    table = target.stream.table
    if variant == "no_index":
        conn.execute(sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(
            table, sql.Identifier(key[0])))
    elif variant == "pk_plus_val_index":
        conn.execute(sql.SQL("CREATE INDEX {} ON {} ({})").format(
            sql.Identifier(INDEX_NAME), table, sql.Identifier(target.stream.measure)))


def _variant_teardown(conn: psycopg.Connection, variant: str, target: Target,
                      key: tuple[str, str]) -> None:
    table = target.stream.table
    conn.execute(sql.SQL("TRUNCATE {}").format(table))  # its truncate trigger: the rollups too
    if variant == "no_index":
        conn.execute(sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} {}").format(
            table, sql.Identifier(key[0]), sql.SQL(key[1])))
    elif variant == "pk_plus_val_index":
        schema = "slidewin_streams" if target.declared else "slidewin"
        conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(schema, INDEX_NAME)))


def measure_index_cost(
    conn: psycopg.Connection, spec: QueryBenchSpec, start: datetime, progress: Progress,
    target: Target | None = None,
) -> dict[str, Any]:
    """COPY rows/s into the raw table with its PK, without it, and with an index on the
    measure too."""
    if spec.copy_rows == 0:
        return {}
    target = target or _events_target(conn)
    rate = spec.rows / spec.seconds
    span = max(1, round(spec.copy_rows / rate))
    chunks = list(target.chunks(spec, spec.copy_rows, span, start, spec.seed + 1))
    key = _primary_key(conn, target)
    speeds: dict[str, list[float]] = {v: [] for v in INDEX_VARIANTS}
    for round_no in range(spec.copy_rounds):
        order = INDEX_VARIANTS[round_no % 3:] + INDEX_VARIANTS[:round_no % 3]
        for variant in order:
            _variant_setup(conn, variant, target, key)
            spent = target.write(conn, chunks)
            _variant_teardown(conn, variant, target, key)
            speeds[variant].append(spec.copy_rows / spent)
            progress(f"index cost round {round_no + 1}/{spec.copy_rounds}: {variant} "
                     f"{spec.copy_rows / spent:,.0f} rows/s")
    med = {v: percentile(s, 50) for v, s in speeds.items()}
    return {
        "copy_rows": spec.copy_rows,
        "copy_rounds": spec.copy_rounds,
        "copy_rows_per_s_pk": round(med["pk"]),
        "copy_rows_per_s_no_index": round(med["no_index"]),
        "copy_rows_per_s_pk_plus_val_index": round(med["pk_plus_val_index"]),
        "pk_ingest_cost_pct": round(100 * (med["no_index"] / med["pk"] - 1), 1),
        "val_index_ingest_cost_pct": round(100 * (med["pk"] / med["pk_plus_val_index"] - 1), 1),
    }


def _events_target(conn: psycopg.Connection) -> Target:
    from slidewin.client.bench.streams import bench_stream

    return Target(bench_stream("events"), conn.info.dsn)


def load(
    conn: psycopg.Connection, spec: QueryBenchSpec, start: datetime, progress: Progress,
    target: Target | None = None,
) -> dict[str, Any]:
    """Write the main data set in chunks, then VACUUM ANALYZE; returns load figures."""
    target = target or _events_target(conn)
    spent = 0.0
    done = 0
    for chunk in target.chunks(spec, spec.rows, spec.seconds, start, spec.seed):
        spent += target.write(conn, [chunk])
        done += target.count(chunk)
        progress(f"loaded {done:,}/{spec.rows:,} rows ({done / spent:,.0f} rows/s)")
    vacuum = sql.SQL("VACUUM (ANALYZE) {}, {}").format(target.stream.table, target.rollups())
    vacuum_s, _ = timed_ms(lambda: conn.execute(vacuum))
    return {"load_s": round(spent, 3), "load_rows_per_s": round(done / spent),
            "vacuum_analyze_s": round(vacuum_s / 1000, 3),
            "rows_stored": target.stored(conn)}


NAIVE_AVG = "SELECT avg(val) FROM slidewin.events WHERE ts >= %s AND ts < %s"
NAIVE_MAX = "SELECT max(val) FROM slidewin.events WHERE ts >= %s AND ts < %s"


def _scalar(conn: psycopg.Connection, query: str | sql.SQL | sql.Composed,
            args: tuple[object, ...]) -> Any:
    row = conn.execute(query, args).fetchone()
    return row[0] if row else None


def measure_window(
    conn: psycopg.Connection, spec: QueryBenchSpec, seconds: int, end: datetime,
    target: Target | None = None,
) -> dict[str, Any]:
    """Rollup avg and max against the naive raw scan, for the window of ``seconds`` ending at
    ``end``'s second; the raw scan covers the same [lo, hi) range."""
    target = target or _events_target(conn)
    hi = end + timedelta(seconds=1)
    lo = hi - timedelta(seconds=seconds)
    avg_q, avg_args = target.rollup_query("avg", seconds, end, lo, hi)
    max_q, max_args = target.rollup_query("max", seconds, end, lo, hi)
    naive_avg = target.naive_query("avg")
    rollup: list[float] = []
    naive: list[float] = []
    maxes: list[float] = []
    for i in range(spec.repeat):
        rollup.append(timed_ms(lambda: _scalar(conn, avg_q, avg_args))[0])
        maxes.append(timed_ms(lambda: _scalar(conn, max_q, max_args))[0])
        if i < spec.naive_repeat:
            naive.append(timed_ms(lambda: _scalar(conn, naive_avg, (lo, hi)))[0])
    for _ in range(len(naive), spec.naive_repeat):
        naive.append(timed_ms(lambda: _scalar(conn, naive_avg, (lo, hi)))[0])
    out = {**_stats(f"avg{seconds}_rollup", rollup), **_stats(f"avg{seconds}_naive", naive),
           **_stats(f"max{seconds}", maxes)}
    out[f"speedup_avg{seconds}"] = round(
        out[f"avg{seconds}_naive_ms_p50"] / max(out[f"avg{seconds}_rollup_ms_p50"], 1e-6), 1)
    out[f"answers_match_{seconds}"] = _answers_match(
        conn, target, (avg_q, avg_args), (max_q, max_args), lo, hi)
    return out


def _answers_match(
    conn: psycopg.Connection, target: Target, avg_call: tuple[str, tuple[object, ...]],
    max_call: tuple[str, tuple[object, ...]], lo: datetime, hi: datetime,
) -> bool:
    avg = _scalar(conn, *avg_call)
    vmax = _scalar(conn, *max_call)
    raw_avg = _scalar(conn, target.naive_query("avg"), (lo, hi))
    raw_max = _scalar(conn, target.naive_query("max"), (lo, hi))
    if raw_avg is None or avg is None:
        return raw_avg is None and avg is None and vmax is None and raw_max is None
    return math.isclose(float(raw_avg), avg, rel_tol=1e-9) and raw_max == vmax


def measure_nibbles(
    conn: psycopg.Connection, spec: QueryBenchSpec, cutoff: datetime,
    target: Target | None = None,
) -> dict[str, Any]:
    """``nibbles`` calls deleting the oldest ``nibble_chunk`` rows, round-robin over partitions.

    Each call is its own transaction; the figure is the whole of it (BEGIN, the call, COMMIT),
    with the call and the COMMIT (a WAL flush: the disk's fsync latency) also reported apart.
    A second series runs with ``synchronous_commit = off``, which a retention job may use: a
    crash can only undo the last few deletes (rollups included, same transaction), and the next
    round redoes them.
    """
    if spec.nibbles == 0:
        return {}
    target = target or _events_target(conn)
    target.prepare_nibbles(conn)
    label = f"nibble{spec.nibble_chunk}"
    total, calls, commits, deleted = _nibble_series(conn, spec, cutoff, target)
    conn.execute("SET synchronous_commit = off")
    try:
        async_total, _calls, _commits, _deleted = _nibble_series(conn, spec, cutoff, target)
    finally:
        conn.execute("RESET synchronous_commit")
    return {**_stats(label, total), f"{label}_ms_max": round(max(total), 4),
            **_stats(f"{label}_call", calls), **_stats(f"{label}_commit", commits),
            **_stats(f"{label}_async_commit", async_total),
            "nibbles": spec.nibbles, "nibble_chunk": spec.nibble_chunk,
            "nibble_rows_deleted": sum(deleted), "nibble_rows_per_call_min": min(deleted)}


def _nibble_series(
    conn: psycopg.Connection, spec: QueryBenchSpec, cutoff: datetime, target: Target
) -> tuple[list[float], list[float], list[float], list[int]]:
    """(whole, call, commit) milliseconds and rows deleted of each of ``nibbles`` calls."""
    total: list[float] = []
    calls: list[float] = []
    commits: list[float] = []
    deleted: list[int] = []
    for i in range(spec.nibbles):
        query, args = target.nibble(i, spec, cutoff)
        start = time.perf_counter()
        with conn.transaction():
            called = time.perf_counter()
            deleted.append(int(_scalar(conn, query, args)))
            done = time.perf_counter()
        end = time.perf_counter()
        total.append((end - start) * 1000)
        calls.append((done - called) * 1000)
        commits.append((end - done) * 1000)
    return total, calls, commits, deleted


# --- the whole run ------------------------------------------------------------------------------


def run_query_bench(
    admin_dsn: str, spec: QueryBenchSpec, progress: Progress = lambda _msg: None
) -> dict[str, Any]:
    """Run every phase in a dedicated database on ``admin_dsn``'s server; returns the figures."""
    from slidewin.client.bench.streams import bench_stream

    stream = bench_stream(spec.stream)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=spec.seconds)
    result: dict[str, Any] = {"rows": spec.rows, "seconds": spec.seconds,
                              "partitions": spec.partitions, "repeat": spec.repeat,
                              "naive_repeat": spec.naive_repeat}
    if stream.declared:
        result.update({"stream": stream.name, "measure": stream.measure})
    with scratch_database(admin_dsn, keep=spec.keep, progress=progress) as dsn, \
            connect(dsn) as conn:
        init_schema(conn, spec.partitions)
        conn.commit()
        conn.autocommit = True
        stream.declare(conn)
        target = Target(stream, dsn)
        result["server_version"] = _scalar(conn, "SHOW server_version", ())
        progress("measuring the ingest cost of each index")
        result.update(measure_index_cost(conn, spec, start, progress, target))
        result.update(load(conn, spec, start, progress, target))
        end = target.newest(conn)
        result["stream_time"] = end.isoformat()
        for seconds in WINDOWS_S:
            progress(f"timing {seconds} s windows")
            result.update(measure_window(conn, spec, seconds, end, target))
        result["max_ms_p50"] = result["max30_ms_p50"]
        result["max_ms_p99"] = result["max30_ms_p99"]
        result["answers_match"] = all(result.pop(f"answers_match_{s}") for s in WINDOWS_S)
        progress(f"timing {spec.nibbles} nibbles of {spec.nibble_chunk} rows")
        result.update(measure_nibbles(conn, spec, end + timedelta(days=1), target))
        if spec.keep:
            result["kept_database"] = conninfo_to_dict(dsn).get("dbname")
    result["spec"] = {k: v for k, v in asdict(spec).items() if k not in result}
    return result


def format_table(result: dict[str, Any]) -> str:
    """The human table: one line per window, then max, nibble and index-cost figures."""
    over = (f" of stream {result['stream']} (measure {result['measure']})"
            if "stream" in result else "")
    lines = [f"{result['rows']:,} rows{over} over {result['seconds']} s in {result['partitions']} "
             f"partitions (PostgreSQL {result.get('server_version')}); load "
             f"{result['load_rows_per_s']:,} rows/s",
             f"{'window':>7} {'avg rollup p50':>15} {'avg naive p50':>14} {'speedup':>8} "
             f"{'max p50':>9} {'max p99':>9}"]
    for s in WINDOWS_S:
        lines.append(f"{s:>5} s {result[f'avg{s}_rollup_ms_p50']:>12.3f} ms "
                     f"{result[f'avg{s}_naive_ms_p50']:>11.2f} ms "
                     f"{result[f'speedup_avg{s}']:>7.0f}x "
                     f"{result[f'max{s}_ms_p50']:>6.3f} ms {result[f'max{s}_ms_p99']:>6.3f} ms")
    lines.append(f"answers match (rollups vs raw scan): {result['answers_match']}")
    label = f"nibble{result.get('nibble_chunk', 1000)}"
    if f"{label}_ms_p50" in result:
        lines.append(f"{label}: p50 {result[f'{label}_ms_p50']:.2f} ms, p99 "
                     f"{result[f'{label}_ms_p99']:.2f} ms over {result['nibbles']} calls "
                     f"(the call alone: p99 {result[f'{label}_call_ms_p99']:.2f} ms; "
                     f"its COMMIT: p99 {result[f'{label}_commit_ms_p99']:.2f} ms)")
        lines.append(f"{label} with synchronous_commit = off: p50 "
                     f"{result[f'{label}_async_commit_ms_p50']:.2f} ms, p99 "
                     f"{result[f'{label}_async_commit_ms_p99']:.2f} ms")
    if "copy_rows_per_s_pk" in result:
        lines.append(f"COPY rows/s ({result['copy_rows']:,} rows, median of "
                     f"{result['copy_rounds']}): PK {result['copy_rows_per_s_pk']:,}, no index "
                     f"{result['copy_rows_per_s_no_index']:,}, PK + index on "
                     f"{result.get('measure', 'val')} "
                     f"{result['copy_rows_per_s_pk_plus_val_index']:,}")
    return "\n".join(lines)
