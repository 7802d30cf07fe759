"""The windows benchmark: every window kind from slidewin against the same answer computed by
scanning the raw rows, side by side in one run.

1. Load: ``events`` events over one hour of event time in ``partitions`` partitions, written
   through the real write path (``INSERT ... SELECT`` into ``slidewin.events`` in chunks, one
   transaction each, so the rollup triggers build every grain), then VACUUM ANALYZE.
2. Check: each slidewin answer equals the naive SQL's (``answers_match`` per kind); a mismatch
   fails the run -- a fast wrong answer is no answer.
3. Time: rounds of (slidewin, naive) pairs per kind, interleaved so noise spreads evenly; p50 of
   client-side times over one warm connection (round trip included).
4. Long series (``BOUNDED_KINDS``): hopping windows of 7 days every second over a day (86,400
   windows) and 99,001 count windows of 1,000 events every one over the newest 100,000 -- each
   window checked against the same window aggregated on its own from the raw rows (numpy over
   the raw rows' per-second sums, or the raw values), then timed; and the ``slidewin windows
   hopping ... --json`` command for the 86,400 windows run as a process of its own, its peak
   memory reported as ``max_rss_mb``.

The hour ends 17.4 s before a minute boundary, so the 1 h average and max read seconds, 10 s
buckets, minutes and an hour boundary, as a window at an arbitrary time does.

The kinds are written once for any stream (``Source``): the built-in stream's functions or a
declared stream's ``stream_*``, and the raw rows of its table. By default the built-in stream,
then the same hour in a declared stream with a double measure, timed against it. ``stream``
(``--stream wide``): a declared benchmark stream (client/bench/streams.py) instead, its hour
written through its COPY (one transaction a chunk, the rollup triggers running), every kind --
one key's tumbling windows too (``key_tumbling10s_1h``) -- over its first measure against its raw
rows, the long series and the CLI's memory with ``--stream``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, localcontext
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from slidewin.client.bench.queries import timed_ms
from slidewin.client.bench.stats import percentile
from slidewin.db.connect import connect
from slidewin.db.errors import ConfigError, SlidewinError
from slidewin.db.limits import MAX_PARTITIONS
from slidewin.db.schema import init_schema
from slidewin.db.scratch import scratch_database

if TYPE_CHECKING:
    from slidewin.client.bench.streams import BenchStream

Progress = Callable[[str], None]
HOUR = timedelta(hours=1)
# the end of the hour of data: not on a minute, so every grain takes part
END = datetime(2026, 1, 1, 13, 0, 0, tzinfo=UTC) - timedelta(seconds=17.4)
START = END - HOUR

LOAD_SQL = """
INSERT INTO slidewin.events (part, uuid, val, ts)
SELECT slidewin.partition_of(k), k, (i * 7919) %% 1000003 - 500000,
       %(start)s + (i * %(span_us)s / %(events)s) * interval '1 microsecond'
  FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS i,
       LATERAL (SELECT 'e' || i::text AS k) AS key
"""

@dataclass(frozen=True)
class Source:
    """The stream a window kind reads (every benchmark stream's time column is ``ts``):
    slidewin's functions for it -- the built-in stream's own, or a declared stream's
    ``stream_*`` with the stream and measure bound -- and its raw rows for the answer to check
    against: its table, its key column and the measure's exact aggregates (a double's sum is
    the exact sum of its shortest decimals, as a declared stream's windows give it)."""

    stream: str
    key: str
    measure: str
    declared: bool
    double: bool = False
    sample_key: str | None = None  # the key whose windows KEY_KINDS read

    @property
    def table(self) -> sql.Composable:
        if not self.declared:
            return sql.SQL("slidewin.events")
        return sql.Identifier("slidewin_streams", self.stream)

    def args(self) -> dict[str, Any]:
        return {"stream": self.stream, "measure": self.measure, "key": self.sample_key}

    def fragments(self) -> dict[str, sql.Composable]:
        """What the kinds' SQL is written with (see ``KINDS``)."""
        v = sql.Identifier(self.measure)
        exact = sql.SQL("{}::text::numeric").format(v) if self.double else v
        as_numeric = "::text::numeric" if self.double else ""
        fn = "slidewin.stream_{}" if self.declared else "slidewin.{}"
        one_hour = ("(%(stream)s, %(measure)s, date_trunc('second', %(end)s::timestamptz, "
                    "'UTC') - interval '3599 s', date_trunc('second', %(end)s::timestamptz, "
                    "'UTC') + interval '1 s')")
        return {
            "v": v, "exact": exact, "table": self.table, "key": sql.Identifier(self.key),
            "sum": sql.SQL("sum({})").format(exact),
            "min": sql.SQL("min({})" + as_numeric).format(v),
            "max": sql.SQL("max({})" + as_numeric).format(v),
            "avg": (sql.SQL("(sum({}) / count({}))::double precision").format(exact, v)
                    if self.double else sql.SQL("avg({})::double precision").format(v)),
            "head": sql.SQL("%(stream)s, %(measure)s, " if self.declared else ""),
            **{kind: sql.SQL(fn.format(kind)) for kind in
               ("tumbling", "hopping", "sliding", "count_windows")},
            "avg_1h": sql.SQL("SELECT avg FROM slidewin.stream_summary" + one_hour
                              if self.declared else "SELECT slidewin.window_avg(3600, %(end)s)"),
            "max_1h": sql.SQL("SELECT vmax FROM slidewin.stream_summary" + one_hour
                              if self.declared else "SELECT slidewin.window_max(3600, %(end)s)"),
        }

    def render(self, template: str) -> sql.Composed:
        return sql.SQL(template).format(**self.fragments())


EVENTS = Source("events", key="uuid", measure="val", declared=False)

# kind -> (slidewin's query, the same answer from the raw rows), for any Source; both return
# comparable rows
SERIES = "SELECT window_start, n, total, vmin, vmax FROM {call} ORDER BY 1"
TUMBLING_NAIVE = (
    "SELECT date_bin('10 s', ts, 'epoch'), count(*), {sum}, {min}, {max} "
    "FROM {table} WHERE ts >= date_bin('10 s', %(start)s::timestamptz, 'epoch') "
    "+ CASE WHEN date_bin('10 s', %(start)s::timestamptz, 'epoch') < %(start)s "
    "THEN interval '10 s' ELSE interval '0' END AND ts < date_bin('10 s', "
    "%(end)s::timestamptz - interval '1 microsecond', 'epoch') + interval '10 s' ")
KINDS: dict[str, tuple[str, str]] = {
    "tumbling10s_1h": (
        SERIES.format(call="{tumbling}({head}'10 s', %(start)s, %(end)s)"),
        TUMBLING_NAIVE + "GROUP BY 1 ORDER BY 1",
    ),
    "hopping60s_10s_1h": (
        SERIES.format(call="{hopping}({head}'60 s', '10 s', %(start)s, %(end)s)"),
        "SELECT s, count(*), {sum}, {min}, {max} FROM {table}, "
        "LATERAL generate_series(date_bin('10 s', ts, 'epoch') - interval '50 s', "
        "date_bin('10 s', ts, 'epoch'), interval '10 s') AS s "
        "WHERE ts >= %(start)s::timestamptz - interval '60 s' AND ts < %(end)s::timestamptz "
        "+ interval '60 s' AND s >= %(start)s AND s < %(end)s GROUP BY 1 ORDER BY 1",
    ),
    "sliding30s_1h": (
        SERIES.format(call="{sliding}({head}'30 s', %(start)s, %(end)s)"),
        "WITH s AS (SELECT date_trunc('second', ts, 'UTC') AS sec, count(*) AS n, "
        "{sum} AS total, {min} AS vmin, {max} AS vmax FROM {table} "
        "WHERE ts >= date_trunc('second', %(start)s::timestamptz, 'UTC') - interval '31 s' "
        "AND ts < %(end)s GROUP BY 1) "
        "SELECT a.sec - interval '30 s', sum(b.n), sum(b.total), min(b.vmin), max(b.vmax) "
        "FROM s a JOIN s b ON b.sec BETWEEN a.sec - interval '30 s' AND a.sec "
        "WHERE a.sec >= %(start)s GROUP BY a.sec ORDER BY 1",
    ),
    "last10k_rows": (
        "SELECT n, total, vmin, vmax FROM {count_windows}({head}10000)",
        "SELECT count(*), {sum}, {min}, {max} FROM (SELECT {v} FROM {table} "
        "ORDER BY ts DESC, {key} DESC LIMIT 10000) AS x",
    ),
    "avg_1h": (
        "{avg_1h}",
        "SELECT {avg} FROM {table} "
        "WHERE ts >= date_trunc('second', %(end)s::timestamptz, 'UTC') - interval '3599 s' "
        "AND ts < date_trunc('second', %(end)s::timestamptz, 'UTC') + interval '1 s'",
    ),
    "max_1h": (
        "{max_1h}",
        "SELECT {max} FROM {table} "
        "WHERE ts >= date_trunc('second', %(end)s::timestamptz, 'UTC') - interval '3599 s' "
        "AND ts < date_trunc('second', %(end)s::timestamptz, 'UTC') + interval '1 s'",
    ),
}
# one key's windows: the declared streams' alone here, as the built-in stream's load gives
# every event a key of its own (a key's windows over it: slidewin bench sessions)
KEY_KINDS: dict[str, tuple[str, str]] = {
    "key_tumbling10s_1h": (
        SERIES.format(call="{tumbling}({head}'10 s', %(start)s, %(end)s, %(key)s)"),
        TUMBLING_NAIVE + "AND {key} = %(key)s GROUP BY 1 ORDER BY 1",
    ),
}


def kinds(source: Source) -> dict[str, tuple[str, str]]:
    """The kinds ``source`` is checked and timed on."""
    return {**KINDS, **KEY_KINDS} if source.declared else KINDS


# a declared stream of the same events with a double precision measure (val + 0.25): the same
# questions through the declared streams' functions, each against its raw rows, and timed
# against the built-in stream's answer (``double_<kind>_vs_events``: p50 over the events' p50)
STREAM_LOAD_SQL = """
INSERT INTO slidewin_streams.readings (k, ts, v)
SELECT 'e' || i::text, %(start)s + (i * %(span_us)s / %(events)s) * interval '1 microsecond',
       ((i * 7919) %% 1000003 - 500000) + 0.25
  FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS i
"""
READINGS = Source("readings", key="k", measure="v", declared=True, double=True)
TWIN_KINDS = ("tumbling10s_1h", "avg_1h", "max_1h")
# the targets, reported next to each figure (never asserted)
TARGETS_MS = {"tumbling10s_1h": 10.0, "hopping60s_10s_1h": 10.0, "sliding30s_1h": 10.0,
              "last10k_rows": 5.0, "avg_1h": 1.0, "max_1h": 1.0}
# long series: each window checked against itself aggregated alone from the raw rows
WEEK_FROM = END - timedelta(days=1)
BOUNDED_KINDS: dict[str, str] = {
    "hopping7d_1s_1d": SERIES.format(call="{hopping}({head}'7 days', '1 s', %(from)s, %(end)s)"),
    "count_rows100k_adv1": "SELECT window_no, n, total, vmin, vmax FROM "
                           "{count_windows}({head}1000, 1, 100000) ORDER BY 1",
}
BOUNDED_TARGETS_MS = {"hopping7d_1s_1d": 2000.0, "count_rows100k_adv1": 2000.0}
MAX_RSS_TARGET_MB = 300.0
# the CLI's request for the 86,400 windows, run as its own process
CLI_ARGS = ["-q", "windows", "hopping", "--size", "7d", "--advance", "1s", "--from",
            WEEK_FROM.isoformat(), "--to", END.isoformat(), "--json"]
# runs the CLI with its stdout counted as it comes, then prints the windows and its peak RSS
RSS_PROBE = """
import resource, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)
count, tail = 0, b""
while chunk := child.stdout.read(1 << 20):
    data = tail + chunk
    count += data.count(b'"final": ') - tail.count(b'"final": ')
    tail = data[-16:]
if child.wait():
    sys.exit(child.returncode)
print(count, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


@dataclass(frozen=True)
class WindowBenchSpec:
    """What to load and how often to measure. Field names match the CLI options."""

    events: int = 5_000_000
    partitions: int = 8
    repeat: int = 30
    naive_repeat: int = 3
    chunk: int = 500_000
    keep: bool = False
    stream: str = "events"

    def __post_init__(self) -> None:
        for name, low in (("events", 10_000), ("partitions", 1), ("repeat", 1),
                          ("naive_repeat", 1), ("chunk", 1)):
            if getattr(self, name) < low:
                option = "--" + name.replace("_", "-")
                raise ConfigError(f"{option} must be at least {low}, got {getattr(self, name)}")
        if self.partitions > MAX_PARTITIONS:
            raise ConfigError(f"--partitions must be at most {MAX_PARTITIONS}")


def source_of(stream: BenchStream) -> Source:
    """The benchmark stream as the window kinds read it (its measure, its first key)."""
    types = {c.name: c.type for c in stream.columns}
    return Source(stream.name, key=stream.key, measure=stream.measure, declared=stream.declared,
                  double=types.get(stream.measure) == "double precision",
                  sample_key=f"{stream.key_prefix}0")


def load(conn: psycopg.Connection, spec: WindowBenchSpec, progress: Progress) -> dict[str, Any]:
    """The hour of events through the real write path, chunk by chunk."""
    span_us = int(HOUR.total_seconds() * 1_000_000)
    done, total_ms = 0, 0.0
    while done < spec.events:
        hi = min(done + spec.chunk, spec.events)
        args = {"start": START, "span_us": span_us, "events": spec.events, "lo": done,
                "hi": hi - 1}
        total_ms += _time_load(conn, args)
        done = hi
        progress(f"loaded {done:,} of {spec.events:,} events")
    conn.execute("VACUUM ANALYZE")
    return {"load_events_per_s": round(spec.events / (total_ms / 1000.0))}


def load_declared(conn: psycopg.Connection, dsn: str, stream: BenchStream,
                  spec: WindowBenchSpec, progress: Progress) -> dict[str, Any]:
    """The hour of a declared benchmark stream's rows (``BenchStream.spread``) through its write
    path -- its COPY, one transaction a chunk, the rollup triggers building every grain."""
    stream.declare(conn)
    span_us = int(HOUR.total_seconds() * 1_000_000)
    start_us = round(START.timestamp() * 1_000_000)
    done, seconds = 0, 0.0
    while done < spec.events:
        hi = min(done + spec.chunk, spec.events)
        lo_us, hi_us = (start_us + i * span_us // spec.events for i in (done, hi))
        rows = stream.spread(hi - done, lo_us, hi_us - lo_us, seed=done)
        rate = stream.copy_rate(dsn, stream.copy_input(rows, spec.partitions), hi - done)
        seconds += (hi - done) / rate
        done = hi
        progress(f"loaded {done:,} of {spec.events:,} events into stream {stream.name}")
    conn.execute("VACUUM ANALYZE")
    stored = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(stream.table)).fetchone()
    return {"load_events_per_s": round(spec.events / seconds),
            "rows_stored": int(stored[0]) if stored else 0}


def load_stream(conn: psycopg.Connection, spec: WindowBenchSpec, progress: Progress) -> None:
    """The same hour into a declared stream with a double measure, chunk by chunk."""
    from slidewin.db import streams
    from slidewin.db.streams import Column

    streams.define(conn, "readings", key="k", time="ts", measures=["v"],
                   columns=[Column("k", "text"), Column("v", "double precision")])
    span_us = int(HOUR.total_seconds() * 1_000_000)
    done = 0
    while done < spec.events:
        hi = min(done + spec.chunk, spec.events)
        conn.execute(STREAM_LOAD_SQL, {"start": START, "span_us": span_us,
                                       "events": spec.events, "lo": done, "hi": hi - 1})
        done = hi
        progress(f"loaded {done:,} of {spec.events:,} events into stream readings")
    conn.execute("VACUUM ANALYZE")


def check_stream(conn: psycopg.Connection) -> bool:
    """The declared stream's answers against its raw rows; raises on any difference."""
    return all(check(conn, READINGS, TWIN_KINDS).values())


def measure_stream(conn: psycopg.Connection, spec: WindowBenchSpec, events: dict[str, Any],
                   progress: Progress) -> dict[str, Any]:
    """Per kind over the double measure: p50 and the ratio to the built-in stream's p50 of the
    same question, each timed in turn with it (``events`` holds the built-in stream's)."""
    out: dict[str, Any] = {}
    mine_args, theirs_args = _args(READINGS), _args(EVENTS)
    for kind in TWIN_KINDS:
        progress(f"timing double_{kind}")
        ours, theirs_query = READINGS.render(KINDS[kind][0]), EVENTS.render(KINDS[kind][0])
        mine, theirs = [], []
        for _ in range(spec.repeat):
            mine.append(_time(conn, ours, mine_args))
            theirs.append(_time(conn, theirs_query, theirs_args))
        out[f"double_{kind}_ms_p50"] = round(percentile(mine, 50), 4)
        out[f"double_{kind}_vs_events"] = round(percentile(mine, 50) / percentile(theirs, 50), 2)
    return out


def _time_load(conn: psycopg.Connection, args: dict[str, Any]) -> float:
    return timed_ms(lambda: conn.execute(LOAD_SQL, args))[0]


def _args(source: Source) -> dict[str, Any]:
    return {"start": START, "end": END, "from": WEEK_FROM, **source.args()}


def answers(conn: psycopg.Connection, query: sql.Composed,
            source: Source = EVENTS) -> list[tuple[Any, ...]]:
    rows = conn.execute(query, _args(source)).fetchall()
    return [tuple(float(v) if isinstance(v, float) else v for v in r) for r in rows]


def same(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    """Equal row by row; floats (averages) to 1e-9 relative."""
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b, strict=True):
        for x, y in zip(ra, rb, strict=True):
            if isinstance(x, float) or isinstance(y, float):
                if x is None or y is None or abs(float(x) - float(y)) > 1e-9 * max(1.0, abs(y)):
                    return False
            elif x != y:
                return False
    return True


def check(conn: psycopg.Connection, source: Source = EVENTS,
          only: tuple[str, ...] | None = None) -> dict[str, bool]:
    """Each kind's answer from slidewin against the raw rows'; raises on any difference."""
    if source.double:
        conn.execute("SET extra_float_digits = 1")  # a double's text: its shortest round trip
    result = {}
    for kind, (ours, naive) in kinds(source).items():
        if only is None or kind in only:
            raw = answers(conn, source.render(naive), source)
            if not raw:  # nothing to compare: a match would prove nothing
                raise SlidewinError(f"{kind}: the raw rows hold no answer to check against")
            result[kind] = same(answers(conn, source.render(ours), source), raw)
    wrong = [k for k, ok in result.items() if not ok]
    if wrong:
        raise SlidewinError(f"window answers differ from the raw rows' for {', '.join(wrong)}")
    return result


def measure(conn: psycopg.Connection, spec: WindowBenchSpec, progress: Progress,
            source: Source = EVENTS) -> dict[str, Any]:
    """Per kind: ``repeat`` timed slidewin calls and ``naive_repeat`` naive ones, interleaved."""
    out: dict[str, Any] = {}
    args = _args(source)
    for kind, (ours_text, naive_text) in kinds(source).items():
        progress(f"timing {kind}")
        ours, naive = source.render(ours_text), source.render(naive_text)
        fast: list[float] = []
        slow: list[float] = []
        per_naive = max(1, spec.repeat // spec.naive_repeat)
        for i in range(spec.repeat):
            fast.append(_time(conn, ours, args))
            if i % per_naive == 0 and len(slow) < spec.naive_repeat:
                slow.append(_time(conn, naive, args))
        out[f"{kind}_ms_p50"] = round(percentile(fast, 50), 4)
        out[f"{kind}_ms_p99"] = round(percentile(fast, 99), 4)
        out[f"{kind}_naive_ms_p50"] = round(percentile(slow, 50), 3)
        out[f"speedup_{kind}"] = round(out[f"{kind}_naive_ms_p50"] / out[f"{kind}_ms_p50"], 1)
    return out


def brute_hopping_week(conn: psycopg.Connection,
                       source: Source = EVENTS) -> list[tuple[Any, ...]]:
    """Each 7-day window every second over the day, aggregated on its own from the raw rows'
    per-second sums: counts by numpy, totals exact (a difference of running sums), min and max
    the seconds' own values picked by numpy."""
    secs = conn.execute(source.render(
        "SELECT date_trunc('second', ts, 'UTC'), count(*), {sum}, {min}, {max} "
        "FROM {table} WHERE ts >= %(from)s::timestamptz - interval '1 s' "
        "AND ts < %(end)s::timestamptz + interval '7 days' GROUP BY 1 ORDER BY 1"),
        _args(source)).fetchall()
    times = np.array([(r[0] - START).total_seconds() for r in secs])
    n = np.array([r[1] for r in secs], dtype=np.int64)
    running = _running_sums([r[2] for r in secs])
    lo, hi = [r[3] for r in secs], [r[4] for r in secs]
    lo_f, hi_f = np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64)
    first = WEEK_FROM.replace(microsecond=0)
    first += timedelta(seconds=1) if first < WEEK_FROM else timedelta(0)
    out = []
    for k in range(86400):
        ws = first + timedelta(seconds=k)
        a = np.searchsorted(times, (ws - START).total_seconds(), "left")
        b = np.searchsorted(times, (ws + timedelta(days=7) - START).total_seconds(), "left")
        if b > a:
            out.append((ws, int(n[a:b].sum()), running[b] - running[a],
                        lo[a + int(lo_f[a:b].argmin())], hi[a + int(hi_f[a:b].argmax())]))
    return out


def _running_sums(values: list[Any]) -> list[Decimal]:
    """0, then the running sums of ``values``, exact (integers or the doubles' decimals)."""
    with localcontext() as ctx:
        ctx.prec = 200
        out = [Decimal(0)]
        for v in values:
            out.append(out[-1] + Decimal(v))
    return out


def brute_count_windows(conn: psycopg.Connection,
                        source: Source = EVENTS) -> list[tuple[Any, ...]]:
    """Each of the 99,001 windows of 1,000 events every one over the newest 100,000, aggregated
    on its own from the raw values, newest first in (ts, key) order: totals exact (a
    difference of running sums), min and max picked by numpy."""
    vals = [r[0] for r in conn.execute(source.render(
        "SELECT {exact} FROM {table} ORDER BY ts DESC, {key} DESC LIMIT 100000"),
        _args(source)).fetchall()]
    floats = np.array(vals, dtype=np.float64)
    running = _running_sums(vals)
    out = []
    if len(vals) >= 1000:
        view = np.lib.stride_tricks.sliding_window_view(floats, 1000)
        lows, highs = view.argmin(axis=1), view.argmax(axis=1)
        out = [(k + 1, 1000, running[k + 1000] - running[k], vals[k + int(lows[k])],
                vals[k + int(highs[k])]) for k in range(len(view))]
    # fewer events stored than the windows cover: the last windows are shorter (every stream's)
    for k in range(len(out), min(len(vals), 100000 - 1000 + 1)):
        end = min(k + 1000, len(vals))
        part = floats[k:end]
        out.append((k + 1, end - k, running[end] - running[k], vals[k + int(part.argmin())],
                    vals[k + int(part.argmax())]))
    return out


def check_bounded(conn: psycopg.Connection, source: Source = EVENTS) -> bool:
    """The long series against their brute force; raises on any difference."""
    brute = {"hopping7d_1s_1d": brute_hopping_week, "count_rows100k_adv1": brute_count_windows}
    wrong = [kind for kind, query in BOUNDED_KINDS.items()
             if not same(answers(conn, source.render(query), source), brute[kind](conn, source))]
    if wrong:
        raise SlidewinError(f"window answers differ from the raw rows' for {', '.join(wrong)}")
    return True


def measure_bounded(conn: psycopg.Connection, spec: WindowBenchSpec, progress: Progress,
                    source: Source = EVENTS) -> dict[str, Any]:
    """p50 of the long series (a few calls each: each is up to a second)."""
    out: dict[str, Any] = {}
    for kind, query in BOUNDED_KINDS.items():
        progress(f"timing {kind}")
        rendered = source.render(query)
        times = [_time(conn, rendered, _args(source)) for _ in range(min(spec.repeat, 7))]
        out[f"{kind}_ms_p50"] = round(percentile(times, 50), 3)
    return out


def cli_max_rss_mb(dsn: str, source: Source = EVENTS) -> dict[str, Any]:
    """``slidewin windows hopping`` for the 86,400 windows, as its own process (the DSN in its
    environment, never on a command line): its peak resident memory, and the windows it wrote
    (counted as they stream by)."""
    stream = ["--stream", source.stream, "--measure", source.measure] if source.declared else []
    cli = [sys.executable, "-c", "from slidewin.client.cli import main; main()", *CLI_ARGS,
           *stream]
    done = subprocess.run([sys.executable, "-c", RSS_PROBE, *cli], capture_output=True,
                          text=True, env={**os.environ, "SLIDEWIN_DSN": dsn}, check=False)
    if done.returncode != 0:
        raise SlidewinError(f"slidewin windows hopping for the 86,400 windows failed: "
                            f"{(done.stderr or done.stdout).strip()[-300:]}")
    count, rss_kb = map(int, done.stdout.split())
    return {"max_rss_mb": round(rss_kb / 1024, 1), "cli_windows": count}


def _time(conn: psycopg.Connection, query: sql.Composed, args: dict[str, Any]) -> float:
    return timed_ms(lambda: conn.execute(query, args).fetchall())[0]


def run_window_bench(
    admin_dsn: str, spec: WindowBenchSpec, progress: Progress = lambda _msg: None
) -> dict[str, Any]:
    """Load, check and time in a dedicated database on ``admin_dsn``'s server, over the
    benchmark stream ``spec.stream``: the built-in one, then the same hour in a declared stream
    with a double measure against it; or a declared benchmark stream (``--stream wide``) alone,
    every kind it has -- a key's windows too -- against its raw rows."""
    from slidewin.client.bench.streams import bench_stream

    stream = bench_stream(spec.stream)
    source = source_of(stream)
    result: dict[str, Any] = {"events": spec.events, "partitions": spec.partitions,
                              "from": START.isoformat(), "to": END.isoformat()}
    if source.declared:
        result.update({"stream": source.stream, "measure": source.measure,
                       "key": source.sample_key})
    with scratch_database(admin_dsn, keep=spec.keep, progress=progress) as dsn, \
            connect(dsn) as conn:
        init_schema(conn, spec.partitions)
        conn.commit()
        conn.autocommit = True
        result["server_version"] = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        result.update(load_declared(conn, dsn, stream, spec, progress) if source.declared
                      else load(conn, spec, progress))
        progress("checking every answer against the raw rows")
        result["answers_match"] = all(check(conn, source).values())
        result.update(measure(conn, spec, progress, source))
        progress("checking the long series against each window aggregated alone")
        result["bounded_answers_match"] = check_bounded(conn, source)
        result.update(measure_bounded(conn, spec, progress, source))
        progress("running slidewin windows hopping for the 86,400 windows")
        result.update(cli_max_rss_mb(dsn, source))
        if not source.declared:
            load_stream(conn, spec, progress)
            result["stream_answers_match"] = check_stream(conn)
            result.update(measure_stream(conn, spec, result, progress))
        if spec.keep:
            result["kept_database"] = conninfo_to_dict(dsn).get("dbname")
    result["spec"] = asdict(spec)
    return result


def format_table(result: dict[str, Any]) -> str:
    over = (f" of stream {result['stream']} (measure {result['measure']})"
            if "stream" in result else "")
    lines = [f"{result['events']:,} events{over} over 1 h in {result['partitions']} partitions "
             f"(PostgreSQL {result.get('server_version')}); load "
             f"{result['load_events_per_s']:,} events/s; answers match the raw rows: "
             f"{result['answers_match']}",
             f"{'window':>18} {'slidewin p50':>13} {'target':>7} {'raw scan p50':>13} "
             f"{'speedup':>8}"]
    for kind in [*TARGETS_MS, *KEY_KINDS]:
        if f"{kind}_ms_p50" in result:
            aim = f"{TARGETS_MS[kind]:>4g} ms" if kind in TARGETS_MS else " " * 7
            lines.append(f"{kind:>18} {result[f'{kind}_ms_p50']:>10.3f} ms {aim} "
                         f"{result[f'{kind}_naive_ms_p50']:>10.1f} ms "
                         f"{result[f'speedup_{kind}']:>7.0f}x")
    for kind, target in BOUNDED_TARGETS_MS.items():
        if f"{kind}_ms_p50" in result:
            lines.append(f"{kind:>22} {result[f'{kind}_ms_p50']:>8.1f} ms (target {target:g} "
                         f"ms), answers match each window alone: "
                         f"{result.get('bounded_answers_match')}")
    if "max_rss_mb" in result:
        lines.append(f"{'max_rss_mb':>22} {result['max_rss_mb']:>8.1f} MB (target "
                     f"{MAX_RSS_TARGET_MB:g}) for slidewin windows hopping writing "
                     f"{result['cli_windows']:,} windows")
    for kind in (f"double_{k}" for k in TWIN_KINDS):
        if f"{kind}_ms_p50" in result:
            lines.append(f"{kind:>22} {result[f'{kind}_ms_p50']:>8.3f} ms, "
                         f"{result[f'{kind}_vs_events']}x the built-in stream's")
    return "\n".join(lines)
