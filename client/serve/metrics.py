"""``/metrics``: the store's counters and gauges in Prometheus' text format (version 0.0.4).

Names follow Prometheus' rules: the ``slidewin_`` prefix, base units (seconds, events), counters
end in ``_total`` and never go down, labels name streams, reasons, kinds and definitions --
never a key of the data. Every figure is read from the store at scrape time, because the ingest,
the jobs and the clients are other processes:

- events accepted, duplicates, rejected and batches, dead letters by reason, retention deletes,
  job runs: ``slidewin.counters``, raised by the writers in the same transactions
  (``db.counters``; the batches' by a trigger on ``slidewin.ingest_batches``), so a scrape reads
  a few rows whatever the number of batches;
- session windows and joins: the totals their definitions keep (``slidewin.session_defs``,
  ``slidewin.joins``), raised by the triggers that maintain them;
- freshness, lag, rows held: gauges from the stream state and the rollups; a join's watermark
  and how far its final answers reach (``slidewin.join_status``).

Every stream has the same figures, the built-in one and the declared ones alike: the ingest's
and retention's counters start at 0 for a stream that has not had a batch or a deletion yet, so
a rate over them starts with the stream, not with its first count.

``db reset`` empties the store and its counters with it: to Prometheus that is a counter reset,
as a process restart is.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import psycopg

from slidewin.client.answers.store import version
from slidewin.db import streams
from slidewin.db.counters import counters
from slidewin.db.retention_settings import read_settings
from slidewin.db.schema import current_version

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = tuple[tuple[str, str], ...]


@dataclass
class Family:
    name: str
    kind: str  # counter or gauge
    help: str
    samples: list[tuple[Labels, float]] = field(default_factory=list)

    def add(self, value: float | int | None, **labels: str) -> None:
        if value is not None:
            self.samples.append((tuple(sorted(labels.items())), float(value)))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 2**63 else repr(value)


def render(families: Iterable[Family]) -> str:
    lines: list[str] = []
    for f in families:
        lines.append(f"# HELP {f.name} {f.help}")
        lines.append(f"# TYPE {f.name} {f.kind}")
        for labels, value in f.samples:
            shown = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
            lines.append(f"{f.name}{{{shown}}} {_number(value)}" if shown
                         else f"{f.name} {_number(value)}")
    return "\n".join(lines) + "\n"


def _epoch(t: datetime | None) -> float | None:
    return None if t is None else t.timestamp()


STATE_SQL = "SELECT stream, newest_ts, watermark, updated_at FROM slidewin.stream_state"

# events held: the hourly rollups (exact at every commit, 1/3,600 of the seconds' rows); the
# oldest and newest second from the per-second rollups' index
BUILTIN_SQL = ("SELECT (SELECT coalesce(sum(n), 0) FROM slidewin.rollups_coarse "
               "WHERE grain = 3600), (SELECT min(sec) FROM slidewin.rollups), "
               "(SELECT max(sec) FROM slidewin.rollups)")
# counters kept in the store -> the families they feed (the rest are read below)
COUNTED = {"ingest_batches": "ingest_batches_total",
           "ingest_events_accepted": "ingest_events_accepted_total",
           "ingest_events_duplicate": "ingest_events_duplicate_total",
           "ingest_records_rejected": "ingest_records_rejected_total",
           "dead_letters": "dead_letters_total", "job_runs": "job_runs_total"}

SESSIONS_SQL = """
SELECT s.name, s.open, s.merges, s.late, s.created
  FROM slidewin.session_defs d, LATERAL slidewin.session_stats(d.name) s
 WHERE d.dropped_at IS NULL ORDER BY d.name
"""

JOINS_SQL = ("SELECT s.name, s.pairs, s.left_only, s.right_only, s.late_left, s.late_right, "
             "s.watermark, s.complete_up_to FROM slidewin.joins j, "
             "LATERAL slidewin.join_status(j.name) s ORDER BY j.name")
PER_STREAM = ("ingest_batches_total", "ingest_events_accepted_total",
              "ingest_events_duplicate_total", "ingest_records_rejected_total",
              "retention_deleted_events_total")


def gather(conn: psycopg.Connection, now: datetime | None = None) -> list[Family]:
    """Every family, read from the store at ``now`` (default: the wall clock)."""
    started = time.monotonic()
    now = now or datetime.now(UTC)
    conn.execute("SET jit = off")  # small catalog and rollup reads; JIT only costs here
    c = {name: Family(f"slidewin_{name}", kind, text) for name, kind, text in FAMILIES}

    for counter in counters(conn):
        if counter.name in COUNTED:
            labels = {k: str(v) for k, v in counter.labels.items()}
            c[COUNTED[counter.name]].add(counter.value, **labels)
    deleted: dict[str, int] = {}
    for counter in counters(conn, "retention_deleted"):  # a row per partition: summed
        stream = str(counter.labels.get("stream"))
        deleted[stream] = deleted.get(stream, 0) + counter.value
    for stream, value in sorted(deleted.items()):
        c["retention_deleted_events_total"].add(value, stream=stream)

    _streams(conn, c, now)
    for name, open_, merges, late, created in conn.execute(SESSIONS_SQL):
        c["session_windows_open"].add(open_, window=name)
        c["session_windows_merges_total"].add(merges, window=name)
        c["session_windows_late_events_total"].add(late, window=name)
        c["session_windows_sessions_created_total"].add(created, window=name)
    joins = conn.execute(JOINS_SQL).fetchall()
    for name, pairs, left_only, right_only, late_left, late_right, watermark, complete in joins:
        c["join_results_total"].add(pairs, join=name, kind="pair")
        c["join_results_total"].add(left_only, join=name, kind="left_only")
        c["join_results_total"].add(right_only, join=name, kind="right_only")
        c["join_late_records_total"].add(late_left, join=name, side="left")
        c["join_late_records_total"].add(late_right, join=name, side="right")
        c["join_watermark_timestamp_seconds"].add(_epoch(watermark), join=name)
        c["join_complete_up_to_timestamp_seconds"].add(_epoch(complete), join=name)
        if complete is not None:
            c["join_complete_up_to_age_seconds"].add(
                round((now - complete).total_seconds(), 6), join=name)
    c["joins"].add(len(joins))
    c["session_windows"].add(len(c["session_windows_open"].samples))
    c["schema_version"].add(current_version(conn))
    c["build_info"].add(1, version=version())
    c["store_up"].add(1)
    c["scrape_duration_seconds"].add(round(time.monotonic() - started, 6))
    return list(c.values())


def _zeros(c: dict[str, Family], present: list[str]) -> None:
    """0 for each per-stream counter a stream has not raised yet: every stream there is, and
    every stream a counter names (a dropped stream's series stay, as its counts do)."""
    named = {dict(labels)["stream"] for f in (*PER_STREAM, "dead_letters_total")
             for labels, _v in c[f].samples if "stream" in dict(labels)}
    for name in PER_STREAM:
        counted = {dict(labels).get("stream") for labels, _v in c[name].samples}
        for stream in sorted(named.union(present) - counted):
            c[name].add(0, stream=stream)


def _streams(conn: psycopg.Connection, c: dict[str, Family], now: datetime) -> None:
    state = {r[0]: r[1:] for r in conn.execute(STATE_SQL)}
    found = streams.list_streams(conn)
    c["streams"].add(len(found))
    declared = {d["stream"]: d for d in streams.stream_status(conn)}
    policy = read_settings(conn)
    _zeros(c, [s.name for s in found])
    for s in found:
        newest_ts, watermark, updated_at = state.get(s.name, (None, None, None))
        if s.builtin:
            row = conn.execute(BUILTIN_SQL).fetchone()
            assert row is not None
            rows, oldest, newest_sec = int(row[0]), row[1], row[2]
            history = policy.history if policy is not None else None
        else:
            d = declared[s.name]
            rows = d["rows"]
            oldest = datetime.fromisoformat(d["oldest"]) if d["oldest"] else None
            newest_sec = datetime.fromisoformat(d["newest"]) if d["newest"] else None
            history = s.history
        newest = newest_ts or newest_sec
        c["stream_events"].add(rows, stream=s.name)
        c["stream_newest_event_timestamp_seconds"].add(_epoch(newest), stream=s.name)
        c["stream_oldest_event_timestamp_seconds"].add(_epoch(oldest), stream=s.name)
        c["stream_watermark_timestamp_seconds"].add(_epoch(watermark), stream=s.name)
        c["stream_last_commit_timestamp_seconds"].add(_epoch(updated_at), stream=s.name)
        if newest is not None:
            c["stream_freshness_seconds"].add(round((now - newest).total_seconds(), 6),
                                              stream=s.name)
        if history is not None:
            c["retention_history_seconds"].add(history.total_seconds(), stream=s.name)
            if oldest is not None:
                over = (now - oldest - history).total_seconds()
                c["retention_lag_seconds"].add(round(max(over, 0.0), 6), stream=s.name)


FAMILIES = (
    ("ingest_events_accepted_total", "counter",
     "Events the ingest stored (new (key, time) pairs), by stream."),
    ("ingest_events_duplicate_total", "counter",
     "Events the ingest skipped as already stored, by stream."),
    ("ingest_records_rejected_total", "counter",
     "Input records the ingest dead-lettered, by stream."),
    ("ingest_batches_total", "counter", "Micro-batches the ingest committed, by stream."),
    ("dead_letters_total", "counter",
     "Records dead-lettered, by stream and reason (the ingest's and the session windows')."),
    ("retention_deleted_events_total", "counter", "Events retention deleted, by stream."),
    ("job_runs_total", "counter", "Scheduled job runs, by kind and outcome (ok, skipped, error)."),
    ("session_windows_sessions_created_total", "counter",
     "Sessions a session window definition created."),
    ("session_windows_merges_total", "counter", "Sessions merged by a bridging event."),
    ("session_windows_late_events_total", "counter",
     "Events too late for a session window (dead-lettered as late, still stored)."),
    ("join_results_total", "counter",
     "Results an interval join wrote, by kind (pair, left_only, right_only)."),
    ("join_late_records_total", "counter", "Records too late for a join, by side."),
    ("join_watermark_timestamp_seconds", "gauge",
     "A join's watermark W: records before it are late for the join (Unix seconds)."),
    ("join_complete_up_to_timestamp_seconds", "gauge",
     "A join's answers before this time are final: they will not change (Unix seconds)."),
    ("join_complete_up_to_age_seconds", "gauge",
     "How far behind the wall clock a join's final answers reach: now minus complete_up_to."),
    ("stream_events", "gauge", "Events a stream holds now."),
    ("stream_newest_event_timestamp_seconds", "gauge",
     "The newest event time of a stream (Unix seconds)."),
    ("stream_oldest_event_timestamp_seconds", "gauge",
     "The oldest second holding events of a stream (Unix seconds)."),
    ("stream_watermark_timestamp_seconds", "gauge",
     "A stream's watermark: windows ending before it are final (Unix seconds)."),
    ("stream_last_commit_timestamp_seconds", "gauge",
     "When the ingest last committed a batch of the stream (Unix seconds)."),
    ("stream_freshness_seconds", "gauge",
     "How old the stream's newest event is: the wall clock minus its time."),
    ("retention_history_seconds", "gauge", "How long retention keeps a stream's events."),
    ("retention_lag_seconds", "gauge",
     "How far retention is behind: the oldest event's age minus the history (0: on time)."),
    ("session_windows_open", "gauge", "Sessions not yet final, per definition."),
    ("streams", "gauge", "Streams, the built-in one included."),
    ("session_windows", "gauge", "Session window definitions in force."),
    ("joins", "gauge", "Joins defined."),
    ("schema_version", "gauge", "The store's schema version."),
    ("build_info", "gauge", "The slidewin version serving, as a label."),
    ("store_up", "gauge", "1 when the store answered this scrape, else 0."),
    ("scrape_duration_seconds", "gauge", "How long reading the store took."),
)


def unreachable() -> str:
    """What a scrape shows when the store does not answer."""
    down = Family("slidewin_store_up", "gauge", "1 when the store answered this scrape, else 0.")
    down.add(0)
    return render([down])
