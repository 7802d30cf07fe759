"""Shared fixtures and helpers for the ingest tests: the test session's one local Spark session
(started by tests.conftest), input files, and the ground truth an ingest must reproduce."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.conftest import T0

SPARK_MASTER, SPARK_SHUFFLE_PARTITIONS = "local[2]", 2


def spark_session(driver_memory: str | None = None,
                  warm_up_dsn: str | None = None) -> Iterator[object]:
    """The body of the test session's one local Spark (tests.conftest's ``spark_jvm``): UI off,
    2 shuffle partitions, the ingest's own heap unless ``driver_memory`` says otherwise."""
    from slidewin.ingest.java import check_java
    from slidewin.ingest.spark import DEFAULT_DRIVER_MEMORY, build_session, stop_session

    check_java()
    session = build_session(SPARK_MASTER, shuffle_partitions=SPARK_SHUFFLE_PARTITIONS,
                            driver_memory=driver_memory or DEFAULT_DRIVER_MEMORY)
    if warm_up_dsn is not None:
        warm_up(session, warm_up_dsn)
    yield session
    stop_session(session)


def warm_up(spark, dsn: str) -> None:
    """One ``slidewin ingest --once`` of two JSON lines into the store ``dsn``: the first run of
    the ingest on a new JVM costs seconds more than the next (class loading, code generation,
    the Python callback server; 5-9 s on a loaded machine), and here it is paid in the session
    fixture's setup, which the durations guard does not count, instead of by whichever Spark
    test comes first."""
    import tempfile

    from slidewin.ingest.config import IngestConfig
    from slidewin.ingest.runner import preflight, run

    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        (tmp / "landing").mkdir()
        lines = [{"uuid": "warm", "val": i, "ts": (T0 + timedelta(seconds=i)).isoformat()}
                 for i in range(2)]
        (tmp / "landing" / "warm.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        config = IngestConfig(landing=tmp / "landing", checkpoint_dir=tmp / "cp",
                              archive_dir=tmp / "archive", once=True, format="json",
                              processed="keep", query_id="warm-up")
        run(preflight(config, dsn), dsn, lambda _line: None, spark=spark,
            clock=lambda: T0 + timedelta(minutes=2))


@contextlib.contextmanager
def spark_conf(spark, settings: dict[str, str | None]) -> Iterator[None]:
    """Set (or, for None, unset) SQL confs of the shared session for the block, then put the
    old values back -- a test that changes a conf must leave the next one the session it had."""
    before = {key: spark.conf.get(key, None) for key in settings}
    try:
        for key, value in settings.items():
            _set_conf(spark, key, value)
        yield
    finally:
        for key, value in before.items():
            _set_conf(spark, key, value)


def _set_conf(spark, key: str, value: str | None) -> None:
    if value is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, value)


@contextlib.contextmanager
def handed_back(spark) -> Iterator[None]:
    """Run a test on the shared session, then hand the session back as the test found it: the
    SQL confs put back (the ingest itself sets one for Parquet nanoseconds: ``ingest.foreign``)
    and any streaming query left running stopped -- and reported, since a test must stop its
    queries itself."""
    confs = dict(spark.conf.getAll)
    try:
        yield
    finally:
        left = list(spark.streams.active)
        for query in left:
            query.stop()
        now = dict(spark.conf.getAll)
        for key in now.keys() - confs.keys():
            spark.conf.unset(key)
        for key, value in confs.items():
            if now.get(key) != value:
                spark.conf.set(key, value)
        assert not left, f"streaming queries left running: {[q.name or q.id for q in left]}"


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
