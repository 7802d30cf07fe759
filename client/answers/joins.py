"""Answers about joins: every join with where it stands (``joins list``) and a join's answers in
a range (``joins show``).

The objects are the joins command's own, made with its helpers (``client.cli.joins``), so the
route and the command print the same; the day that command takes its answers from here, the
helpers move here with them.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.types.json import set_json_loads

from slidewin.client.cli import joins as command
from slidewin.db import joins
from slidewin.db.errors import ConfigError


def join_list(conn: psycopg.Connection) -> dict[str, Any]:
    """``joins list --json``: every join as defined, with where it stands."""
    found = [(j, joins.status(conn, j.name)) for j in joins.list_joins(conn)]
    return {"joins": [{**j.as_json(), **command._status_json(s)} for j, s in found]}


def join_show(conn: psycopg.Connection, name: str, *, last: timedelta | None = None,
              from_: datetime | None = None, to: datetime | None = None,
              limit: int = 20) -> dict[str, Any]:
    """``joins show NAME --json``: where the join stands and its newest ``limit`` answers with
    ts in [from_, to), or in the ``last`` (default 1h) ending at its streams' newest record."""
    if last is not None and (from_ is not None or to is not None):
        raise ConfigError("--last and --from/--to both given (use one of them)")
    if (from_ is None) != (to is None):
        raise ConfigError("--from and --to go together (give both, or --last instead)")
    command._exact_json(conn)
    try:
        join = joins.get_join(conn, name)
        state = joins.status(conn, name)
        stamps = command._stamp_columns(conn, join)
        if from_ is not None and to is not None:
            start, end = from_, to
        else:
            end = command._stream_end(state)
            start = end - (last or command.DEFAULT_LAST)
        found = joins.show(conn, name, start, end, limit + 1)
    finally:
        set_json_loads(json.loads, conn)  # the connection goes back to a pool: as it came
    more = len(found) > limit
    found = sorted(found[:limit], key=command._newest_first)
    return {"join": join.name, "kind": join.kind, "type": join.join_type,
            "from": start.isoformat(), "to": end.isoformat(),
            "complete_up_to": command._iso(state.complete_up_to),
            "watermark": command._iso(state.watermark),
            "late": {"left": state.late_left, "right": state.late_right},
            "results": {"pairs": state.pairs, "left_only": state.left_only,
                        "right_only": state.right_only},
            "waiting_for": list(state.waiting_for),
            "rows": [command.answer_json(a, stamps) for a in found], "more": more}
