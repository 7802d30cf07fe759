"""Per-partition state of the store, read without scanning the raw table.

Row counts come from the exact rollups; oldest/newest event time from one probe at each end of
the primary key; sizes and dead tuples from the catalog and statistics views.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import psycopg

from slidewin.db.schema import require_schema

PARTITION_STATUS_SQL = """
SELECT k.part,
       coalesce(r.rows, 0) AS rows,
       (SELECT e.ts FROM slidewin.events e WHERE e.part = k.part ORDER BY e.ts LIMIT 1) AS oldest,
       (SELECT e.ts FROM slidewin.events e WHERE e.part = k.part ORDER BY e.ts DESC LIMIT 1)
           AS newest,
       coalesce(r.seconds, 0) AS rollup_seconds,
       pg_table_size(c.oid) AS table_bytes,
       pg_indexes_size(c.oid) AS index_bytes,
       coalesce(s.n_dead_tup, 0) AS dead_tuples
  FROM slidewin.partition_keys() AS k(part)
  JOIN pg_class c ON c.oid = to_regclass(format('slidewin.%I', slidewin.partition_name(k.part)))
  LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
  LEFT JOIN LATERAL (SELECT sum(n)::bigint AS rows, count(*) AS seconds
                       FROM slidewin.rollups WHERE part = k.part) r ON true
 ORDER BY k.part
"""


@dataclass(frozen=True)
class PartitionStatus:
    part: int
    rows: int
    oldest: datetime | None
    newest: datetime | None
    rollup_seconds: int
    table_bytes: int
    index_bytes: int
    dead_tuples: int

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("oldest", "newest"):
            out[key] = out[key].isoformat() if out[key] else None
        return out


def partition_status(conn: psycopg.Connection) -> list[PartitionStatus]:
    require_schema(conn)
    return [PartitionStatus(*row) for row in conn.execute(PARTITION_STATUS_SQL).fetchall()]


def store_summary(conn: psycopg.Connection) -> dict[str, Any]:
    """Version, partition count, dead letters and batches: the header of ``db status``."""
    row = conn.execute(
        "SELECT (SELECT max(version) FROM slidewin.schema_version),"
        " (SELECT partitions FROM slidewin.config),"
        " (SELECT count(*) FROM slidewin.dead_letters),"
        " (SELECT count(*) FROM slidewin.ingest_batches),"
        " slidewin.stream_time()"
    ).fetchone()
    assert row is not None
    version, partitions, dead, batches, stream = row
    return {
        "schema_version": version,
        "partition_count": partitions,
        "dead_letters": dead,
        "ingest_batches": batches,
        "stream_time": stream.isoformat() if stream else None,
    }
