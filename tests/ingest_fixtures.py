"""Shared fixtures and helpers for the ingest tests: one local Spark session, input files,
and the ground truth an ingest must reproduce."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.conftest import T0


def spark_session(driver_memory: str = "768m") -> Iterator[object]:
    """One local[2] session for the Spark tests (UI off, 2 shuffle partitions); use it as a
    session-scoped fixture body: ``yield from spark_session()``."""
    from slidewin.ingest.java import check_java
    from slidewin.ingest.spark import build_session, stop_session

    check_java()
    session = build_session("local[2]", shuffle_partitions=2, driver_memory=driver_memory)
    yield session
    stop_session(session)


def event(uuid: str, val: int, seconds: float) -> dict[str, object]:
    """An event ``seconds`` after the pinned clock T0, as a JSON-ready dict (ISO ts)."""
    ts = T0 + timedelta(seconds=seconds)
    return {"uuid": uuid, "val": val, "ts": ts.isoformat().replace("+00:00", "Z")}


def write_lines(folder: Path, name: str, lines: Iterable[str], mtime: float | None = None) -> Path:
    """Write a file atomically (dot name, then rename), like a well-behaved producer."""
    tmp = folder / f".{name}.tmp"
    tmp.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    final = folder / name
    os.replace(tmp, final)
    if mtime is not None:
        os.utime(final, (mtime, mtime))
    return final


def write_jsonl(folder: Path, name: str, events: Iterable[dict[str, object]], **kw) -> Path:
    return write_lines(folder, name, (json.dumps(e) for e in events), **kw)


def truth_from_jsonl(files: Iterable[Path]) -> set[tuple[str, int, datetime]]:
    """The exact raw row set the store must hold: first occurrence of each (uuid, ts)."""
    seen: dict[tuple[str, datetime], int] = {}
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            ts = datetime.fromisoformat(rec["ts"].replace("Z", "+00:00")).astimezone(UTC)
            seen.setdefault((rec["uuid"], ts), int(rec["val"]))
    return {(u, v, ts) for (u, ts), v in seen.items()}


def stored_rows(conn) -> set[tuple[str, int, datetime]]:
    rows = conn.execute("SELECT uuid, val, ts FROM slidewin.events").fetchall()
    return {(u, v, ts.astimezone(UTC)) for u, v, ts in rows}


def truth_rollups(rows: set[tuple[str, int, datetime]], partitions: int) -> dict:
    """Per (second, partition): (n, sum, min, max) computed in Python from the ground truth."""
    from slidewin.db.events import partition_of

    out: dict[tuple[datetime, int], list[int]] = {}
    for uuid, val, ts in rows:
        key = (ts.replace(microsecond=0), partition_of(uuid, partitions))
        agg = out.setdefault(key, [0, 0, val, val])
        agg[0] += 1
        agg[1] += val
        agg[2] = min(agg[2], val)
        agg[3] = max(agg[3], val)
    return {k: tuple(v) for k, v in out.items()}


def stored_rollups(conn) -> dict:
    rows = conn.execute("SELECT sec, part, n, total, vmin, vmax FROM slidewin.rollups").fetchall()
    return {(s.astimezone(UTC), p): (n, int(t), lo, hi) for s, p, n, t, lo, hi in rows}


def clean_ingest_state(conn):
    """Empty the ingest's own stream state too (tests.conftest's cleaning predates it)."""
    conn.execute("TRUNCATE slidewin.stream_state")
    return conn
