"""What the dashboard shows of one stream, read in one go: the series its charts draw and the
tables beside them. ``client.serve.live`` reads it again after each change the store signals
and sends browsers what changed.

Series (rows of numbers, the x first, in Unix seconds):

- ``ingest``: per second of commit time, events the ingest accepted and records dead-lettered
  (every second of the range, 0 when nothing came);
- ``freshness``: per committed batch, how old its newest event was at the commit, and how long
  the batch took;
- ``live``: per second of event time, the average, maximum and count of the measure;
- ``window``: the chosen windows (tumbling, hopping or sliding) over the range: average,
  maximum, count, and 1 when final;

  both of one key's events alone with ``view.key`` (``key_note`` says when that key has none
  in the range, or when its stream has no key windows to show); both empty for a declared
  stream without a measure (``view.measured`` is false: the board shows its counts only), and
  when the store refuses the windows (``window_problem`` says why: the stream list, counts and
  tables still show);
- ``lag``: sampled by the server at each reading (``client.serve.live``): the newest event's
  age, and how far retention is behind its history.

Beside them: ``keys``, the keys of the stream's newest events (what the key filter offers), and
``join_results``, the newest answers of one join (``view.join``, else one reading the stream,
else the first) as ``joins show NAME --json`` gives them.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from slidewin.client.answers import joins as answer_joins
from slidewin.client.answers import sessions as answer_sessions
from slidewin.client.answers import store as answer_store
from slidewin.client.answers import windows as answer_windows
from slidewin.client.answers.windows import BUILTIN, TIME_KINDS, iso
from slidewin.client.serve import params
from slidewin.db import streams, windows
from slidewin.db.errors import ConfigError, ProcedureError
from slidewin.db.retention_settings import read_settings
from slidewin.db.status import partition_status

MIN_RANGE_S, MAX_RANGE_S = 60, 3600
MAX_WINDOWS = 4000  # windows one chart may draw (the range over the advance)
DEAD_LETTERS_SHOWN = 10
JOIN_RESULTS_SHOWN = 10
KEYS_OFFERED = 20  # distinct keys of the stream's newest events the key filter offers


@dataclass(frozen=True)
class View:
    """What one dashboard looks at: a stream (and measure), a window kind and its size and
    advance, how far back the charts reach, the one key its measure charts show (None: every
    key) and the join whose results it lists (None: the board picks one)."""

    stream: str = BUILTIN
    measure: str | None = None
    kind: str = "tumbling"
    size_s: int = 10
    advance_s: int | None = None
    range_s: int = 300
    key: str | None = None
    join: str | None = None

    @classmethod
    def parse(cls, stream: str | None = None, measure: str | None = None,
              kind: str | None = None, size: str | None = None, advance: str | None = None,
              range_: str | None = None, key: str | None = None,
              join: str | None = None) -> View:
        kind = kind or "tumbling"
        if kind not in TIME_KINDS:
            raise ConfigError(f"kind {kind!r}: use one of {', '.join(TIME_KINDS)}")
        size_s = _whole_seconds(size or "10s", "size")
        advance_s = _whole_seconds(advance, "advance") if advance and kind == "hopping" else None
        if kind == "hopping" and advance_s is None:
            advance_s = max(size_s // 2, 1)
        range_s = _whole_seconds(range_ or "5m", "range")
        if not MIN_RANGE_S <= range_s <= MAX_RANGE_S:
            raise ConfigError(f"range {range_s}s must be from {MIN_RANGE_S}s to {MAX_RANGE_S}s")
        step = advance_s if kind == "hopping" else (1 if kind == "sliding" else size_s)
        if range_s // max(step or 1, 1) > MAX_WINDOWS:
            raise ConfigError(f"{range_s}s of {kind} windows every {step}s is more than "
                              f"{MAX_WINDOWS} windows to draw; choose a larger advance or size")
        return cls(stream or BUILTIN, measure or None, kind, size_s, advance_s, range_s,
                   key or None, join or None)

    def as_json(self) -> dict[str, Any]:
        return {"stream": self.stream, "measure": self.measure, "kind": self.kind,
                "size_s": self.size_s, "advance_s": self.advance_s, "range_s": self.range_s,
                "key": self.key, "join": self.join}


def _whole_seconds(text: str | None, name: str) -> int:
    if text is None:
        raise ConfigError(f"{name} is needed")
    value = params.duration(text, name)
    seconds = value.total_seconds()
    if seconds < 1 or seconds != int(seconds):
        raise ConfigError(f"{name} {text!r} must be a whole number of seconds, 1s or more")
    return int(seconds)


def _epoch(t: datetime) -> float:
    return round(t.timestamp(), 3)


def _f(value: Any) -> float | None:
    return None if value is None else float(value)


INGEST_SQL = f"""
SELECT extract(epoch FROM date_trunc('second',
           committed_at + coalesce(seconds, 0) * interval '1 second'))::bigint AS t,
       sum(accepted)::bigint
  FROM slidewin.ingest_batches
 WHERE committed_at >= %(since)s - interval '10 minutes'
   AND {answer_store.BATCH_STREAM_SQL} = %(stream)s
 GROUP BY 1
"""

DEAD_SQL = """
SELECT extract(epoch FROM date_trunc('second', received_at))::bigint AS t, count(*)
  FROM slidewin.dead_letters
 WHERE received_at >= %(since)s
   AND stream = %(stream)s
 GROUP BY 1
"""

FRESHNESS_SQL = f"""
SELECT committed_at + coalesce(seconds, 0) * interval '1 second' AS done, max_ts, seconds
  FROM slidewin.ingest_batches
 WHERE committed_at >= %(since)s - interval '10 minutes'
   AND {answer_store.BATCH_STREAM_SQL} = %(stream)s
   AND max_ts IS NOT NULL
 ORDER BY 1
"""


def read(conn: psycopg.Connection, view: View, now: datetime | None = None) -> dict[str, Any]:
    """Everything the dashboard shows of ``view`` at ``now``: ``series`` (name -> rows),
    ``start`` (name -> the x each series starts at) and ``parts`` (the tables and figures)."""
    now = now or datetime.now(UTC)
    conn.execute("SET jit = off")  # small range reads; the planner's guesses would JIT them
    stream = streams.get_stream(conn, view.stream) if view.stream != BUILTIN else None
    measure = _measure_of(view, stream)
    since = now.replace(microsecond=0) - timedelta(seconds=view.range_s)
    first = int(since.timestamp())
    args = {"since": since, "stream": view.stream, "builtin": BUILTIN}

    accepted: dict[int, int] = dict(conn.execute(INGEST_SQL, args).fetchall())
    dead: dict[int, int] = dict(conn.execute(DEAD_SQL, args).fetchall())
    ingest = [[t, int(accepted.get(t, 0)), int(dead.get(t, 0))]
              for t in range(first, int(now.timestamp()) + 1)]
    freshness = []
    for done, max_ts, took in conn.execute(FRESHNESS_SQL, args):
        if done >= since:
            freshness.append([_epoch(done), round((done - max_ts).total_seconds(), 3),
                              _f(took)])

    # event time: the range ends with the stream's newest second (relative to the stream)
    newest = (windows.stream_time(conn) if stream is None
              else streams.newest_second(conn, view.stream))
    end = (newest + timedelta(seconds=1)) if newest is not None else now.replace(microsecond=0)
    start = end - timedelta(seconds=view.range_s)
    measured = stream is None or measure is not None  # a declared stream may have no measure
    live: list[list[Any]] = []
    chosen: list[list[Any]] = []
    window_problem = key_note = None
    if measured:
        try:
            live, chosen = _measure_series(conn, view, measure, start, end)
        except psycopg.DataError as exc:  # a key its key column's type cannot hold
            if view.key is None or stream is None:
                raise
            key_note = (f"key {view.key!r}: stream {view.stream} has no such key -- its key "
                        f"column {stream.key} is {stream.column(stream.key).type} "
                        f"({exc.diag.message_primary}); its charts are empty")
        except (ConfigError, ProcedureError) as exc:  # the rest of the board still shows
            window_problem = f"windows of {view.stream}: {exc}"
        else:
            if view.key is not None and not live and not chosen:
                key_note = (f"key {view.key!r}: no events of stream {view.stream} in the "
                            f"{_span(view.range_s)} shown (its charts are empty)")
    elif view.key is not None:
        key_note = (f"key {view.key!r}: stream {view.stream} has no measure, so it has no key "
                    "windows to show (add one: slidewin streams alter "
                    f"{view.stream} --measure COLUMN)")
    state = answer_windows.completeness(conn, view.stream, start, end)

    partitions, history, oldest = _partitions(conn, view, stream, now)
    row = conn.execute("SELECT newest_ts FROM slidewin.stream_state WHERE stream = %s",
                       (view.stream,)).fetchone()
    newest_event = row[0] if row and row[0] else (
        None if newest is None else newest + timedelta(seconds=1))  # else: its second's end
    fresh_s = None if newest_event is None else round((now - newest_event).total_seconds(), 3)
    lag_s = None
    if history is not None and oldest is not None:
        lag_s = round(max((now - oldest - history).total_seconds(), 0.0), 3)
    gauges = {"now": iso(now), "stream_time": iso(state.stream_time),
              "complete_up_to": iso(state.complete_up_to),
              "retired_through": iso(state.retired_through), "late_in_range": state.late,
              "freshness_s": fresh_s, "retention_lag_s": lag_s,
              "history_s": None if history is None else history.total_seconds(),
              "rows": sum(p["rows"] for p in partitions), "measure": measure}
    joins_now = answer_joins.join_list(conn)
    join_results = _join_results(conn, view, joins_now["joins"])
    parts = {
        "view": {**view.as_json(), "measure": measure, "measured": measured,
                 "join": None if join_results is None else join_results["join"]},
        "window_problem": window_problem,
        "key_note": key_note,
        "keys": streams.recent_keys(conn, view.stream, limit=KEYS_OFFERED),
        "gauges": gauges,
        "partitions": partitions,
        "dead_letters": answer_store.dead_letters(conn, stream=view.stream,
                                                  limit=DEAD_LETTERS_SHOWN).as_json(),
        "sessions": answer_sessions.definitions(conn, view.stream).as_json(),
        "joins": joins_now,
        "join_results": join_results,
        "streams": [{"name": s.name, "builtin": s.builtin, "measures": list(s.measures)}
                    for s in streams.list_streams(conn)],
        "health": answer_store.health(lambda: contextlib.nullcontext(conn))[0],
    }
    return {
        "at": _epoch(now),
        "series": {"ingest": ingest, "freshness": freshness, "live": live, "window": chosen},
        "start": {"ingest": first, "freshness": _epoch(since), "live": _epoch(start),
                  "window": _epoch(start)},
        "samples": {"lag": [_epoch(now), fresh_s, lag_s]},
        "parts": parts,
    }


def _span(seconds: int) -> str:
    return f"{seconds // 60} min" if seconds % 60 == 0 else f"{seconds} s"


def _join_results(conn: psycopg.Connection, view: View,
                  defined: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest answers of the join the view names -- else of the first reading its stream,
    else of the first -- as ``joins show NAME --json`` gives them, with ``problem`` None; None
    when there is no join. A join the store does not know (dropped while watched) is an empty
    list with ``problem`` saying so, not a failure of the board."""
    name = view.join
    if name is None:
        mine = [j["name"] for j in defined if view.stream in (j["left"], j["right"])]
        name = (mine or [j["name"] for j in defined] or [None])[0]
    if name is None:
        return None
    try:
        found = answer_joins.join_show(conn, name, limit=JOIN_RESULTS_SHOWN)
    except (ConfigError, ProcedureError) as exc:
        return {"join": name, "rows": [], "more": False, "problem": str(exc)}
    return {**found, "problem": None}


def _measure_of(view: View, stream: streams.Stream | None) -> str | None:
    """The measure the view shows: the one asked for, else the stream's first (None: the
    stream has none). A measure the stream does not have is refused here, not taken for a
    window the store refuses."""
    if stream is None:
        answer_windows.declared(BUILTIN, view.measure)  # refuses all but val
        return view.measure
    if view.measure is not None and view.measure not in stream.measures:
        choices = (f"choose one of: {', '.join(stream.measures)}" if stream.measures else
                   f"it has none (add one: slidewin streams alter {stream.name} --measure COLUMN)")
        raise ConfigError(f"measure {view.measure!r}: stream {stream.name} has no such measure; "
                          f"{choices}")
    return view.measure or (stream.measures[0] if stream.measures else None)


def _measure_series(conn: psycopg.Connection, view: View, measure: str | None, start: datetime,
                    end: datetime) -> tuple[list[list[Any]], list[list[Any]]]:
    """The measure's series: per second (``live``) and the chosen windows (``window``), of
    ``view.key``'s events alone when it names one."""
    per_second = answer_windows.window_spec("tumbling", timedelta(seconds=1), key=view.key,
                                            stream=view.stream, measure=measure)
    live = [[_epoch(w.start), w.avg, _f(w.vmax), w.n] for w in per_second.series(conn, start, end)]
    spec = answer_windows.window_spec(
        view.kind, timedelta(seconds=view.size_s),
        timedelta(seconds=view.advance_s) if view.advance_s else None, key=view.key,
        stream=view.stream, measure=measure)
    chosen = [[_epoch(spec.place(w)), w.avg, _f(w.vmax), w.n, 1 if w.final else 0]
              for w in spec.series(conn, start, end)]
    return live, chosen


def _partitions(conn: psycopg.Connection, view: View, stream: streams.Stream | None,
                now: datetime) -> tuple[list[dict[str, Any]], timedelta | None, datetime | None]:
    """Retention per partition: rows, time range, size and how far past the history its
    oldest row is (built-in stream); a declared stream's one line. Also the history and the
    oldest event, for the lag."""
    if stream is not None:
        d = answer_store.stream_status(conn, view.stream)
        oldest = datetime.fromisoformat(d["oldest"]) if d["oldest"] else None
        over = None
        if stream.history is not None and oldest is not None:
            over = round((now - oldest - stream.history).total_seconds(), 3)
        return ([{"part": None, "rows": d["rows"], "oldest": d["oldest"], "newest": d["newest"],
                  "bytes": d["bytes"], "age_over_s": over}], stream.history, oldest)
    policy = read_settings(conn)
    history = policy.history if policy is not None else None
    out = []
    oldest_all: datetime | None = None
    for p in partition_status(conn):
        over = None
        if history is not None and p.oldest is not None:
            over = round((now - p.oldest - history).total_seconds(), 3)
        if p.oldest is not None:
            oldest_all = p.oldest if oldest_all is None else min(oldest_all, p.oldest)
        out.append({"part": p.part, "rows": p.rows, "oldest": iso(p.oldest),
                    "newest": iso(p.newest), "bytes": p.table_bytes + p.index_bytes,
                    "age_over_s": over})
    return out, history, oldest_all
