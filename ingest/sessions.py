"""Session windows for a chunk the sink COPYs whole: its islands computed here, with numpy.

The insert trigger (``slidewin.sessions_on_insert``) would find the same islands by sorting the
COPY's transition table in PostgreSQL -- a sort and two window passes per row, which halved the
sink's COPY rate. When a chunk is COPYed whole (no row stored before, none twice in it), its
rows are exactly the rows inserted, so the sink computes the islands itself, passes them to
``slidewin.sessions_apply`` (the one merge) and names the definitions it handles in
``slidewin.presummed_sessions`` for that COPY alone: the trigger skips those, and keeps any
other -- one added while the batch runs included. The staging path (rows already stored)
leaves every definition to the trigger, which sees only the rows really inserted.

Events older than a definition's stream time before the batch minus its grace are late for it
(``slidewin.session_begin``): both ways, they are dead-lettered and make no island, so what is
late never depends on how a batch is cut into chunks.

An island is one key's events in ts order with no two more than the gap apart. Keys are
dictionary-encoded and sorted with ``np.lexsort`` on (code, ts), so no string is compared.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.compute as pc

from slidewin.db.connect import procedure_errors
from slidewin.db.streams import BUILTIN

SETTING = "slidewin.presummed_sessions"  # read by slidewin.sessions_on_insert
_EXACT_INT64 = 2**62  # a sum whose float estimate reaches this is summed exactly instead


@dataclass(frozen=True)
class SessionRef:
    """A definition in force, as the sink needs it: ``cut`` is base_ts - grace -- events older
    are late for it (None before its first event)."""

    id: int
    gap: timedelta
    cut: datetime | None = None


@dataclass(frozen=True)
class Islands:
    """One chunk's islands under one gap: parallel arrays."""

    keys: list[str]
    first_us: np.ndarray  # microseconds since the epoch
    last_us: np.ndarray
    n: np.ndarray
    total: list[int]
    vmin: np.ndarray
    vmax: np.ndarray


def definitions(conn: psycopg.Connection) -> list[SessionRef]:
    """The session definitions of events in force (usually none: then the sink does nothing
    more), each locked for the transaction and with its cut (``slidewin.session_begin``)."""
    rows = conn.execute(
        "SELECT (d).id, (d).gap, (d).base_ts - (d).grace FROM ("
        " SELECT slidewin.session_begin(id) AS d FROM slidewin.session_defs"
        " WHERE dropped_at IS NULL AND stream = %s ORDER BY id) AS x"
        " WHERE (d).id IS NOT NULL", (BUILTIN,)
    ).fetchall()
    return [SessionRef(int(i), gap, cut) for i, gap, cut in rows]


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
    return Islands(
        keys=codes_enc.dictionary.take(pa.array(c[starts])).to_pylist(),
        first_us=t[starts],
        last_us=t[ends],
        n=ends - starts + 1,
        total=_sums(v, starts),
        vmin=np.minimum.reduceat(v, starts),
        vmax=np.maximum.reduceat(v, starts),
    )


def _sums(vals: np.ndarray, starts: np.ndarray) -> list[int]:
    """Exact sums per island: int64 when no sum can overflow, Python ints otherwise. The
    estimate is of the values as floats: np.abs of int64's smallest value is itself."""
    rough = np.add.reduceat(np.abs(vals.astype(np.float64)), starts)
    if len(rough) == 0 or rough.max() < _EXACT_INT64:
        return np.add.reduceat(vals, starts).tolist()
    bounds = np.append(starts, len(vals))
    return [sum(int(x) for x in vals[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


MAX_ISLANDS = 20_000  # per slidewin.sessions_apply call: no one statement grows with a chunk


def apply(conn: psycopg.Connection, good: pa.Table, refs: list[SessionRef]) -> int:
    """Per definition: dead-letter the chunk's events that are late for it
    (``slidewin.sessions_late``), and merge the islands of the others into its sessions, at
    most ``MAX_ISLANDS`` per call. Returns the late events."""
    late_events = 0
    for ref in refs:
        began = time.monotonic()
        on_time = good
        if ref.cut is not None:
            late_mask = pc.less(good["ts"], pa.scalar(ref.cut, good["ts"].type))
            late = good.filter(late_mask)
            if late.num_rows:
                late_events += _late(conn, late, ref)
                on_time = good.filter(pc.invert(late_mask))
        if on_time.num_rows:
            _merge(conn, islands(on_time, ref.gap), ref)
        conn.execute(  # what keeping it cost, for slidewin.session_cost
            "UPDATE slidewin.session_defs SET apply_seconds = apply_seconds + %s WHERE id = %s",
            (time.monotonic() - began, ref.id),
        )
    return late_events


def _merge(conn: psycopg.Connection, isl: Islands, ref: SessionRef) -> None:
    for lo in range(0, len(isl.keys), MAX_ISLANDS):
        hi = lo + MAX_ISLANDS
        with procedure_errors():
            conn.execute(
                "SELECT slidewin.sessions_apply(%s, %s::text[], "
                "slidewin.epoch_us_array(%s), slidewin.epoch_us_array(%s), %s::bigint[], "
                "%s::numeric[], %s::bigint[], %s::bigint[])",
                (ref.id, isl.keys[lo:hi], isl.first_us[lo:hi].tolist(),
                 isl.last_us[lo:hi].tolist(), isl.n[lo:hi].tolist(), isl.total[lo:hi],
                 isl.vmin[lo:hi].tolist(), isl.vmax[lo:hi].tolist()),
            )


def _late(conn: psycopg.Connection, late: pa.Table, ref: SessionRef) -> int:
    with procedure_errors():
        row = conn.execute(
            "SELECT slidewin.sessions_late(%s, %s::text[], %s::bigint[], "
            "slidewin.epoch_us_array(%s))",
            (ref.id, late["uuid"].to_pylist(), late["val"].to_pylist(),
             late["ts"].combine_chunks().cast(pa.int64()).to_pylist()),
        ).fetchone()
    return int(row[0]) if row else 0
