"""Session windows for a chunk the sink COPYs whole: its islands computed here, with numpy.

The insert trigger (``slidewin.sessions_on_insert``) would find the same islands by sorting the
COPY's transition table in PostgreSQL -- a sort and two window passes per row, which halved the
sink's COPY rate. When a chunk is COPYed whole (no row stored before, none twice in it), its
rows are exactly the rows inserted, so the sink computes the islands itself, passes them to
``slidewin.sessions_apply`` (the one merge) and names the definitions it handles in
``slidewin.presummed_sessions`` for that COPY alone: the trigger skips those, and keeps any
other -- one added while the batch runs included. The staging path (rows already stored)
leaves every definition to the trigger, which sees only the rows really inserted.

An island is one key's events in ts order with no two more than the gap apart. Keys are
dictionary-encoded and sorted with ``np.lexsort`` on (code, ts), so no string is compared.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.compute as pc

from db.connect import procedure_errors

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SETTING = "slidewin.presummed_sessions"  # read by slidewin.sessions_on_insert
_EXACT_INT64 = 2**62  # a sum whose float estimate reaches this is summed exactly instead


@dataclass(frozen=True)
class SessionRef:
    """A definition in force, as the sink needs it."""

    id: int
    gap: timedelta


@dataclass(frozen=True)
class Islands:
    """One chunk's islands under one gap: parallel arrays, plus each row's island."""

    keys: list[str]
    first_us: np.ndarray  # microseconds since the epoch
    last_us: np.ndarray
    n: np.ndarray
    total: list[int]
    vmin: np.ndarray
    vmax: np.ndarray
    row_island: np.ndarray  # island index of each row, in the rows' original order


def definitions(conn: psycopg.Connection) -> list[SessionRef]:
    """The session definitions in force (usually none: then the sink does nothing more)."""
    rows = conn.execute(
        "SELECT id, gap FROM slidewin.session_defs WHERE dropped_at IS NULL ORDER BY id"
    ).fetchall()
    return [SessionRef(int(i), gap) for i, gap in rows]


def skip(conn: psycopg.Connection, refs: list[SessionRef]) -> None:
    """Name ``refs`` as applied by the sink (transaction-local; '' names none)."""
    conn.execute(
        "SELECT set_config(%s, %s, true)", (SETTING, ",".join(str(r.id) for r in refs))
    )


def islands(good: pa.Table, gap: timedelta) -> Islands:
    """The islands of ``good`` (uuid, val, ts) under ``gap``."""
    codes_enc = pc.dictionary_encode(good["uuid"].combine_chunks())
    codes = codes_enc.indices.to_numpy()
    ts = good["ts"].combine_chunks().cast(pa.int64()).to_numpy()
    vals = good["val"].combine_chunks().to_numpy()
    order = np.lexsort((ts, codes))
    c, t, v = codes[order], ts[order], vals[order]
    brk = np.ones(len(c), dtype=bool)
    brk[1:] = (c[1:] != c[:-1]) | (t[1:] - t[:-1] > gap // timedelta(microseconds=1))
    starts = np.flatnonzero(brk)
    ends = np.append(starts[1:], len(c)) - 1
    row_island = np.empty(len(c), dtype=np.int64)
    row_island[order] = np.cumsum(brk) - 1
    return Islands(
        keys=codes_enc.dictionary.take(pa.array(c[starts])).to_pylist(),
        first_us=t[starts],
        last_us=t[ends],
        n=ends - starts + 1,
        total=_sums(v, starts),
        vmin=np.minimum.reduceat(v, starts),
        vmax=np.maximum.reduceat(v, starts),
        row_island=row_island,
    )


def _sums(vals: np.ndarray, starts: np.ndarray) -> list[int]:
    """Exact sums per island: int64 when no sum can overflow, Python ints otherwise."""
    rough = np.add.reduceat(np.abs(vals).astype(np.float64), starts)
    if len(rough) == 0 or rough.max() < _EXACT_INT64:
        return np.add.reduceat(vals, starts).tolist()
    bounds = np.append(starts, len(vals))
    return [sum(int(x) for x in vals[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _us(t: datetime) -> int:
    return (t - EPOCH) // timedelta(microseconds=1)


LATE_LETTERS = """
INSERT INTO slidewin.dead_letters (source, reason, detail, raw, event_ts)
SELECT 'session:' || d.name, 'late', slidewin.session_late_detail(d, x.first, x.last, x.close),
       json_build_object('uuid', x.uuid, 'val', x.val, 'ts', x.ts)::text, x.ts
  FROM slidewin.session_defs d,
       unnest(%s::text[], %s::bigint[], %s::timestamptz[], %s::timestamptz[],
              %s::timestamptz[], %s::timestamptz[]) AS x(uuid, val, ts, first, last, close)
 WHERE d.id = %s
"""


def apply(conn: psycopg.Connection, good: pa.Table, refs: list[SessionRef]) -> int:
    """Merge the chunk's islands into each definition's sessions; dead-letter the events of
    islands that are late for one. Returns the late events."""
    late_events = 0
    for ref in refs:
        isl = islands(good, ref.gap)
        with procedure_errors():
            late = conn.execute(
                "SELECT * FROM slidewin.sessions_apply(%s, %s::text[], "
                "slidewin.epoch_us_array(%s), slidewin.epoch_us_array(%s), %s::bigint[], "
                "%s::numeric[], %s::bigint[], %s::bigint[])",
                (ref.id, isl.keys, isl.first_us.tolist(), isl.last_us.tolist(),
                 isl.n.tolist(), isl.total, isl.vmin.tolist(), isl.vmax.tolist()),
            ).fetchall()
        if late:
            late_events += _dead_letters(conn, good, isl, ref, late)
    return late_events


def _dead_letters(
    conn: psycopg.Connection, good: pa.Table, isl: Islands, ref: SessionRef, late: list[tuple]
) -> int:
    first_of = {(k, int(f)): i for i, (k, f) in enumerate(zip(isl.keys, isl.first_us,
                                                               strict=True))}
    island_close = {first_of[(k, _us(f))]: (f, e, close) for k, f, e, close in late}
    rows = np.flatnonzero(np.isin(isl.row_island, list(island_close)))
    picked = good.take(pa.array(rows))
    spans = [island_close[int(isl.row_island[r])] for r in rows]
    conn.execute(LATE_LETTERS, (
        picked["uuid"].to_pylist(), picked["val"].to_pylist(), picked["ts"].to_pylist(),
        [s[0] for s in spans], [s[1] for s in spans], [s[2] for s in spans], ref.id,
    ))
    return len(rows)
