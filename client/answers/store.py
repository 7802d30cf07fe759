"""Answers about the store: its status per partition, stream and join (``db status``), the
streams (``streams list|show``), dead letters and ingest batches, a page at a time (``db
dead-letters``, ``db batches``), and what the server reports of itself (info, health)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import metadata
from typing import Any

import psycopg
from psycopg.rows import dict_row

from slidewin.client.answers.windows import BUILTIN, iso
from slidewin.db import joins, sessions, streams
from slidewin.db.errors import ConfigError
from slidewin.db.schema import current_version, latest_version
from slidewin.db.status import PartitionStatus, partition_status, store_summary

MAX_PAGE = 1000
RAW_CHARS = 2000  # of a dead letter's raw text, in a page (raw_chars: its whole length)

# the stream an ingest batch wrote: the built-in ingest's markers are ``<query>/<reader>/<ckpt>``
# (text, parquet), a declared stream's ``<query>/stream-<name>/<ckpt>`` (ingest.typed_sink)
BATCH_STREAM_SQL = ("CASE WHEN starts_with(split_part(query_id, '/', 2), 'stream-') "
                    "THEN substr(split_part(query_id, '/', 2), 8) ELSE %(builtin)s END")


def version() -> str:
    try:
        return metadata.version("slidewin")
    except metadata.PackageNotFoundError:  # a source tree without an install
        return "unknown"


# -- db status ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoreStatus:
    """``db status``: the store's header, its partitions, the declared streams, the joins,
    warnings."""

    head: dict[str, Any]
    embedded: dict[str, Any] | None
    partitions: list[PartitionStatus]
    streams: list[dict[str, Any]]
    joins: list[dict[str, Any]]
    warnings: list[str]

    def as_json(self) -> dict[str, Any]:
        return {**self.head, "embedded": self.embedded,
                "partitions": [p.as_json() for p in self.partitions], "streams": self.streams,
                "joins": self.joins, "warnings": self.warnings}


def store_status(conn: psycopg.Connection, *, builtin_only: bool = False,
                 embedded: dict[str, Any] | None = None) -> StoreStatus:
    """Every partition of the built-in stream and, unless ``builtin_only``, every declared
    stream. ``embedded``: what the command line says of an embedded server it started (the web
    server never says it: it names the server's data folder)."""
    parts = partition_status(conn)
    head = store_summary(conn)
    warnings = sessions.warnings(conn)
    declared = [] if builtin_only else streams.stream_status(conn)
    joined = [] if builtin_only else join_status(conn)
    return StoreStatus(head, embedded, parts, declared, joined, warnings)


def join_status(conn: psycopg.Connection) -> list[dict[str, Any]]:
    """Per join: its watermark W, the records late for it and the results it wrote."""
    out = []
    for j in joins.list_joins(conn):
        s = joins.status(conn, j.name)
        out.append({"join": j.name, "kind": j.kind, "watermark": iso(s.watermark),
                    "late_left": s.late_left, "late_right": s.late_right, "pairs": s.pairs,
                    "left_only": s.left_only, "right_only": s.right_only})
    return out


def stream_status(conn: psycopg.Connection, name: str) -> dict[str, Any]:
    """``db status --stream NAME``: one declared stream's rows, range, watermark, dead letters."""
    return streams.stream_status(conn, name)[0]


# -- streams ------------------------------------------------------------------------------------


def stream_json(s: streams.Stream) -> dict[str, Any]:
    return {"name": s.name, "key": s.key, "time": s.time, "builtin": s.builtin,
            "columns": [{"name": c.name, "type": c.type, "required": c.required}
                        for c in s.columns],
            "measures": list(s.measures), "keep_extra": s.keep_extra,
            "partitions": s.partitions,
            "history_s": None if s.history is None else s.history.total_seconds(),
            "grace_s": s.grace.total_seconds(), "is_table": s.is_table,
            "max_rows": s.max_rows,
            "table": "slidewin.events" if s.builtin else f"slidewin_streams.{s.name}"}


@dataclass(frozen=True)
class StreamList:
    """``streams list``: every stream and the rows it holds (None: the built-in one's are in
    ``db status``)."""

    found: list[streams.Stream]
    rows: dict[str, int | None]

    def as_json(self) -> dict[str, Any]:
        return {"streams": [{**stream_json(s), "rows": self.rows[s.name]} for s in self.found]}


def stream_list(conn: psycopg.Connection) -> StreamList:
    found = streams.list_streams(conn)
    return StreamList(found, {s.name: (None if s.builtin else streams.row_count(conn, s))
                              for s in found})


@dataclass(frozen=True)
class StreamShow:
    """``streams show NAME``: one declared stream as declared, and its rows."""

    stream: streams.Stream
    rows: int

    def as_json(self) -> dict[str, Any]:
        return {**stream_json(self.stream), "rows": self.rows}


def stream_show(conn: psycopg.Connection, name: str) -> StreamShow:
    stream = streams.get_stream(conn, name)
    return StreamShow(stream, streams.row_count(conn, stream))


# -- dead letters and batches, a page at a time -------------------------------------------------


def _check_page(limit: int) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise ConfigError(f"--limit {limit} must be from 1 to {MAX_PAGE}")


def _check_stream(conn: psycopg.Connection, stream: str | None) -> None:
    if stream not in (None, BUILTIN):
        streams.get_stream(conn, stream)  # an unknown stream is refused with the fix


DEAD_LETTERS_SQL = """
SELECT id, received_at, stream, source, reason, detail,
       left(raw, %(chars)s) AS raw, length(raw) AS raw_chars, event_ts, batch_id
  FROM slidewin.dead_letters
 WHERE (%(before)s::bigint IS NULL OR id < %(before)s)
   AND (%(reason)s::text IS NULL OR reason = %(reason)s)
   AND (%(stream)s::text IS NULL OR stream = %(stream)s)
 ORDER BY id DESC
 LIMIT %(limit)s
"""


@dataclass(frozen=True)
class DeadLetters:
    """``db dead-letters``: a page of dead letters, newest first; ``before`` of the next page
    (None: this is the last)."""

    letters: list[dict[str, Any]]
    next_before: int | None

    def as_json(self) -> dict[str, Any]:
        return {"dead_letters": self.letters, "next_before": self.next_before}


def dead_letters(conn: psycopg.Connection, *, stream: str | None = None,
                 reason: str | None = None, before: int | None = None,
                 limit: int = 20) -> DeadLetters:
    """The newest ``limit`` dead letters with an id below ``before`` (of one stream, of one
    reason); a raw text longer than RAW_CHARS is cut there (``raw_chars`` says its length)."""
    _check_page(limit)
    _check_stream(conn, stream)
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(DEAD_LETTERS_SQL, {"before": before, "reason": reason,
                                              "stream": stream, "limit": limit + 1,
                                              "chars": RAW_CHARS}).fetchall()
    more = len(rows) > limit
    page = [{**r, "received_at": iso(r["received_at"]), "event_ts": iso(r["event_ts"])}
            for r in rows[:limit]]
    return DeadLetters(page, page[-1]["id"] if more else None)


BATCHES_SQL = f"""
SELECT query_id, {BATCH_STREAM_SQL} AS stream, batch_id, rows_in, accepted, duplicates,
       rejected, max_ts, committed_at, seconds
  FROM slidewin.ingest_batches
 WHERE (%(at)s::timestamptz IS NULL
        OR (committed_at, batch_id, query_id) < (%(at)s, %(batch)s, %(query)s))
   AND (%(stream)s::text IS NULL OR {BATCH_STREAM_SQL} = %(stream)s)
 ORDER BY committed_at DESC, batch_id DESC, query_id DESC
 LIMIT %(limit)s
"""


@dataclass(frozen=True)
class Batches:
    """``db batches``: a page of committed ingest batches, newest first; ``next_before`` is
    where the next page starts (None: this is the last)."""

    batches: list[dict[str, Any]]
    next_before: str | None

    def as_json(self) -> dict[str, Any]:
        return {"batches": self.batches, "next_before": self.next_before}


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _cursor(row: dict[str, Any]) -> str:
    """A page's end as text that needs no quoting in a URL: commit time (Unix microseconds),
    batch id and query id (which may hold '/')."""
    at = datetime.fromisoformat(row["committed_at"])
    return f"{(at - EPOCH) // timedelta(microseconds=1)}:{row['batch_id']}:{row['query_id']}"


def _parse_cursor(text: str) -> tuple[datetime, int, str]:
    try:
        at, batch, query = text.split(":", 2)
        return EPOCH + timedelta(microseconds=int(at)), int(batch), query
    except ValueError:
        raise ConfigError(f"--before {text!r} is not where a page ends; pass the next_before "
                          "of the previous page") from None


def batches(conn: psycopg.Connection, *, stream: str | None = None,
            before: str | None = None, limit: int = 20) -> Batches:
    """The ``limit`` batches committed last, before the page that ended at ``before`` (of one
    stream)."""
    _check_page(limit)
    at, batch, query = _parse_cursor(before) if before else (None, None, None)
    _check_stream(conn, stream)
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(BATCHES_SQL, {"at": at, "batch": batch, "query": query,
                                         "stream": stream, "limit": limit + 1,
                                         "builtin": BUILTIN}).fetchall()
    more = len(rows) > limit
    page = [{**r, "max_ts": iso(r["max_ts"]), "committed_at": iso(r["committed_at"])}
            for r in rows[:limit]]
    return Batches(page, _cursor(page[-1]) if more and page else None)


# -- info and health -----------------------------------------------------------------------------


def info(conn: psycopg.Connection) -> dict[str, Any]:
    """What is serving and what it serves: versions, the streams, the joins, the definitions."""
    names = [s.name for s in streams.list_streams(conn)]
    joins = [r[0] for r in conn.execute("SELECT name FROM slidewin.joins ORDER BY name")]
    defs = [d.definition.name for d in sessions.definitions(conn)]
    return {"name": "slidewin", "version": version(), "api": "v1",
            "schema_version": current_version(conn), "schema_expected": latest_version(),
            "streams": names, "joins": joins, "session_windows": defs}


def health(connect: Any) -> tuple[dict[str, Any], bool]:
    """ksqlDB's ``/healthcheck`` shape: ``{"isHealthy": ..., "details": {part: {"isHealthy":
    ...}}}`` for the database (it answers), the schema (this code's version) and the jobs (the
    newest run of each did not fail); a part that is not healthy says why in ``reason``.
    ``connect`` is a context manager factory giving a connection."""
    details: dict[str, dict[str, Any]] = {}
    try:
        with connect() as conn:
            details["database"] = {"isHealthy": True}
            found = current_version(conn)
            wanted = latest_version()
            if found == wanted:
                details["schema"] = {"isHealthy": True}
            else:
                said = ("no slidewin schema here" if found is None
                        else f"schema version {found}, this slidewin needs {wanted}")
                details["schema"] = {"isHealthy": False, "reason": f"{said}; run slidewin db init"}
            details["jobs"] = _jobs_health(conn) if found is not None else {"isHealthy": False,
                                                                          "reason": "no schema"}
    except psycopg.Error as exc:
        reason = "the database does not answer" if isinstance(exc, psycopg.OperationalError) \
            else f"the database refused: {type(exc).__name__}"
        details = {"database": {"isHealthy": False, "reason": reason},
                   "schema": {"isHealthy": False, "reason": "the database does not answer"},
                   "jobs": {"isHealthy": False, "reason": "the database does not answer"}}
    healthy = all(d["isHealthy"] for d in details.values())
    return {"isHealthy": healthy, "details": details}, healthy


def _jobs_health(conn: psycopg.Connection) -> dict[str, Any]:
    failed = [r[0] for r in conn.execute(
        "SELECT job FROM (SELECT DISTINCT ON (job) job, error FROM slidewin.job_runs "
        "ORDER BY job, id DESC) last WHERE error IS NOT NULL ORDER BY job")]
    if failed:
        return {"isHealthy": False,
                "reason": f"the last run of {', '.join(failed)} failed; see slidewin jobs status"}
    return {"isHealthy": True}
