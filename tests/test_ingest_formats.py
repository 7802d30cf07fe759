"""What real producers write, and input that used to be stored wrong or lost without a word:
a stream's first batch judged by the same retention rule as the next, epoch numbers in any
unit, file names that are not UTF-8, fields beyond uuid/val/ts counted, Parquet as pandas and
others write it (every timestamp unit, the usual integer widths), CSV records whose quoted
fields hold line breaks, uuids that are not JSON strings, and a field too long for Jackson.

Real local Spark (one shared session) and a real PostgreSQL; the ingest's clock is pinned
(NOW = T0 + 2 min). Every test ends with the rollups checked against the raw rows (the
``conn`` fixture).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ingest.progress import Totals
from tests.conftest import T0
from tests.ingest_fixtures import clean_ingest_state, spark_session, stored_rows
from tests.test_ingest_stream import ingest_once

pytestmark = pytest.mark.spark

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
T0_S = int(T0.timestamp())  # 1767268800
ISO = "2026-01-01T12:00:00Z"  # T0


@pytest.fixture(scope="module")
def spark():
    yield from spark_session()


@pytest.fixture
def iconn(conn):
    return clean_ingest_state(conn)


@pytest.fixture
def land(tmp_path: Path) -> Path:
    folder = tmp_path / "landing"
    folder.mkdir()
    return folder


def drop(folder: Path, name: str, data: bytes, age_s: float = 100) -> Path:
    """A file renamed into place, ``age_s`` seconds old (the file source reads in mtime order)."""
    tmp = folder / f".{name}.tmp"
    tmp.write_bytes(data)
    final = folder / name
    os.replace(tmp, final)
    mtime = datetime.now(UTC).timestamp() - age_s
    os.utime(final, (mtime, mtime))
    return final


def jsonl(*records: object) -> bytes:
    return b"".join(
        (r if isinstance(r, str) else json.dumps(r)).encode() + b"\n" for r in records
    )


def dead(conn, *columns: str) -> list[tuple]:
    return conn.execute(
        f"SELECT {', '.join(columns)} FROM slidewin.dead_letters ORDER BY id"
    ).fetchall()


def by_uuid(conn) -> dict[str, tuple[int, datetime]]:
    return {u: (v, ts) for u, v, ts in stored_rows(conn)}


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def results(spark, dsn, tmp_path, **kw):
    """Run the ingest once; returns (progress lines, totals over its batches)."""
    totals = Totals()
    lines = ingest_once(spark, dsn, tmp_path, on_batch=lambda _s, r: totals.add(r), **kw)
    return lines, totals


# ------------------------------------------------------------ 5: epoch numbers


EPOCH_TEXT = {  # the ts as sent -> seconds after T0 (auto: the unit by magnitude)
    str(T0_S): 0,  # seconds (used to be read as milliseconds: 1970-01-21)
    f"{T0_S}.25": 0.25,  # decimal seconds
    f"{T0_S}500": 0.5,  # milliseconds
    f"{T0_S}750000": 0.75,  # microseconds
    f"{T0_S + 1}000000999": 1.000000,  # nanoseconds, cut to the microsecond
    "1.76726880225E9": 2.25,  # a JSON number with a fraction, as Java renders it
}


def test_epoch_numbers_are_read_by_magnitude(spark, store_dsn, iconn, land, tmp_path):
    lines = [
        {"uuid": f"j{i}", "val": i, "ts": json.loads(ts) if "E" not in ts else ts}
        for i, ts in enumerate(EPOCH_TEXT)
    ]
    drop(land, "epochs.jsonl", jsonl(*lines))
    csv = "".join(f"c{i},{i},{ts}\n" for i, ts in enumerate(EPOCH_TEXT)).encode()
    drop(land, "epochs.csv", csv)
    ingest_once(spark, store_dsn, tmp_path, format="auto", max_files_per_trigger=5)
    want = {f"{kind}{i}": (i, at(s)) for kind in "jc" for i, s in enumerate(EPOCH_TEXT.values())}
    assert by_uuid(iconn) == want
    assert dead(iconn, "raw") == []


def test_an_explicit_epoch_unit_reads_every_number_in_it(spark, store_dsn, iconn, land, tmp_path):
    """``--epoch-unit ms``: a small number is milliseconds after all (1970-01-21, as asked);
    ``--epoch-unit s`` would put a millisecond time past year 9999: ``bad_ts``, never wrapped."""
    drop(land, "ms.csv", f"m1,1,{T0_S}\nm2,2,{T0_S}123\n".encode())
    ingest_once(spark, store_dsn, tmp_path, format="csv", epoch_unit="ms")
    assert by_uuid(iconn) == {
        "m1": (1, EPOCH + timedelta(milliseconds=T0_S)),
        "m2": (2, T0 + timedelta(milliseconds=123)),
    }
    clean_ingest_state(iconn).execute("TRUNCATE slidewin.events, slidewin.dead_letters")
    (land / "ms.csv").unlink()
    drop(land, "s.csv", f"s1,1,{T0_S}\ns2,2,{T0_S}123\n".encode(), age_s=5)
    ingest_once(spark, store_dsn, tmp_path, format="csv", epoch_unit="s",
                checkpoint_dir=tmp_path / "cp-s")
    assert by_uuid(iconn) == {"s1": (1, T0)}
    assert dead(iconn, "reason", "detail") == [(
        "bad_ts", f"ts is not ISO-8601 or epoch seconds in years 0001-9999, got {T0_S}123"
    )]


# ------------------------------------------------------------ 5: file names, extra fields


def test_a_file_name_that_is_not_utf8_is_renamed_read_and_reported(
    spark, store_dsn, iconn, land, tmp_path
):
    drop(land, "good.jsonl", jsonl({"uuid": "g", "val": 1, "ts": ISO}))
    bad_name = os.fsencode(land) + b"/caf\xe9.jsonl"
    with open(bad_name, "wb") as f:
        f.write(jsonl({"uuid": "latin", "val": 2, "ts": ISO}))
    lines = ingest_once(spark, store_dsn, tmp_path, max_files_per_trigger=5)
    assert set(by_uuid(iconn)) == {"g", "latin"}
    said = [x for x in lines if x.startswith("landing:")]
    assert said == [
        "landing: caf\\xe9.jsonl has a name that is not UTF-8, which Spark cannot read; "
        "renamed to caf%E9.jsonl"
    ]
    assert sorted(os.listdir(os.fsencode(land))) == [b"caf%E9.jsonl", b"good.jsonl"]
