"""db.events.insert_staged: the one staging-table insert, from tuples and from binary COPY data."""

from __future__ import annotations

import pyarrow as pa

from slidewin.db.events import Event, insert_events, insert_staged, partition_of
from slidewin.ingest.pgbinary import encode_events
from tests.conftest import T0

PARTS = 8


def _row(uuid: str, val: int) -> tuple[int, str, int, object]:
    return partition_of(uuid, PARTS), uuid, val, T0


def _stored(conn) -> list[tuple[str, int]]:
    return conn.execute("SELECT uuid, val FROM slidewin.events ORDER BY uuid").fetchall()


def test_tuples_skip_rows_stored_or_sent_twice(conn):
    assert insert_events(conn, [Event("a", 1, T0)], PARTS) == 1
    with conn.transaction():
        inserted = insert_staged(conn, [_row("a", 9), _row("b", 2), _row("b", 2), _row("c", 3)])
    assert inserted == 2
    assert _stored(conn) == [("a", 1), ("b", 2), ("c", 3)]


def test_binary_copy_data_goes_the_same_way(conn):
    assert insert_events(conn, [Event("a", 1, T0)], PARTS) == 1
    rows = [_row("a", 9), _row("d", 4)]
    table = pa.table({
        "part": pa.array([r[0] for r in rows], pa.int16()),
        "uuid": pa.array([r[1] for r in rows], pa.string()),
        "val": pa.array([r[2] for r in rows], pa.int64()),
        "ts": pa.array([r[3] for r in rows], pa.timestamp("us", tz="UTC")),
    })
    with conn.transaction():
        assert insert_staged(conn, encode_events(table)) == 1
        assert insert_staged(conn, encode_events(table)) == 0  # the staging table was emptied
    assert _stored(conn) == [("a", 1), ("d", 4)]
