"""Answers about joins (``db.joins``): every join with where it stands, and a join's answers
in a time range."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg

from client.answers.windows import iso
from db import clock, joins


def status_json(s: joins.JoinStatus) -> dict[str, Any]:
    return {"watermark": iso(s.watermark), "complete_up_to": iso(s.complete_up_to),
            "late_left": s.late_left, "late_right": s.late_right, "pairs": s.pairs,
            "left_only": s.left_only, "right_only": s.right_only,
            "left_newest": iso(s.left_newest), "right_newest": iso(s.right_newest)}


def join_list(conn: psycopg.Connection) -> dict[str, Any]:
    """Every join as defined, with its status."""
    return {"joins": [{**j.as_json(), "status": status_json(joins.status(conn, j.name))}
                      for j in joins.list_joins(conn)]}


def answer_json(a: joins.Answer) -> dict[str, Any]:
    return {"seq": a.seq, "ts": a.ts.isoformat(), "emitted_at": iso(a.emitted_at),
            "l": a.l, "r": a.r, "final": a.final}


def join_answers(conn: psycopg.Connection, name: str, *, last: timedelta | None = None,
                 from_: datetime | None = None, to: datetime | None = None,
                 limit: int = 100) -> dict[str, Any]:
    """The join's answers with ts in [from_, to) -- default the last hour to now -- newest
    first, at most ``limit``."""
    join = joins.get_join(conn, name)
    end = to or clock.utc_now()
    start = from_ or end - (last or timedelta(hours=1))
    found = joins.show(conn, name, start, end, limit)
    return {"name": join.name, "from": start.isoformat(), "to": end.isoformat(),
            "status": status_json(joins.status(conn, name)),
            "answers": [answer_json(a) for a in found]}
