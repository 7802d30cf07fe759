"""Reading the counters the store keeps for /metrics (``slidewin.counters``).

The writers raise them in SQL, in the transaction of what they count: the dead letters' insert
trigger, ``slidewin.record_job_run``, ``slidewin.nibble`` and ``slidewin.stream_nibble``. Each
only grows; ``slidewin db reset`` empties them with the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg


@dataclass(frozen=True)
class Counter:
    name: str
    labels: dict[str, Any]
    value: int


def counters(conn: psycopg.Connection, name: str | None = None) -> list[Counter]:
    """Every counter (or those called ``name``), in key order."""
    rows = conn.execute(
        "SELECT name, labels, value FROM slidewin.counters "
        "WHERE %(name)s::text IS NULL OR name = %(name)s ORDER BY name, labels",
        {"name": name},
    ).fetchall()
    return [Counter(r[0], dict(r[1]), int(r[2])) for r in rows]
