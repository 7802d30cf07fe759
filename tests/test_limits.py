"""db.limits: the chunk cap and the partition naming rule, and the SQL copies agreeing with them."""

from __future__ import annotations

import psycopg
import pytest

from slidewin.db.events import Event, insert_events, partition_of
from slidewin.db.limits import (
    MAX_CHUNK,
    MAX_NAMED_PART,
    MAX_PARTITIONS,
    partition_name,
    partition_table,
)
from slidewin.db.retention_settings import RetentionSettings, upsert_settings
from tests.conftest import T0


def test_partition_names_have_three_digits():
    assert (partition_name(0), partition_name(42), partition_name(999)) == (
        "events_p000", "events_p042", "events_p999"
    )
    assert partition_table(7) == "slidewin.events_p007"
    assert MAX_NAMED_PART == MAX_PARTITIONS - 1 == 999
    for part in (-1, MAX_PARTITIONS):
        with pytest.raises(ValueError, match="parts are 0 to 999"):
            partition_name(part)


def test_sql_names_partitions_as_python_does(conn):
    for part in (0, 7, 42, MAX_NAMED_PART):
        row = conn.execute("SELECT slidewin.partition_name(%s)", (part,)).fetchone()
        assert row[0] == partition_name(part)
    for part in range(8):  # the store's own partitions carry those names
        row = conn.execute("SELECT to_regclass(%s)", (partition_table(part),)).fetchone()
        assert row[0] is not None


def test_the_sql_name_is_inlined_to_a_constant(conn):
    plan = conn.execute("EXPLAIN (VERBOSE) SELECT slidewin.partition_name(3)").fetchall()
    assert "'events_p003'::text" in plan[-1][0], plan  # no function call left at run time


def test_truncating_one_partition_empties_its_rollups_only(conn):
    keys = ["a", "b", "c", "d", "e", "f"]
    insert_events(conn, [Event(k, 1, T0) for k in keys], 8)
    part = partition_of("a", 8)
    conn.execute(f"TRUNCATE {partition_table(part)}")
    left = conn.execute("SELECT part, sum(n) FROM slidewin.rollups GROUP BY part").fetchall()
    assert part not in dict(left)
    assert sum(n for _, n in left) == sum(partition_of(k, 8) != part for k in keys)


def test_sql_caps_chunks_where_python_does(conn):
    conn.execute("SELECT slidewin.check_chunk(%s)", (MAX_CHUNK,))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=f"from 1 to {MAX_CHUNK}"):
        conn.execute("SELECT slidewin.check_chunk(%s)", (MAX_CHUNK + 1,))
    upsert_settings(conn, RetentionSettings("cap", 30.0, None, MAX_CHUNK, 100))
    with pytest.raises(psycopg.errors.CheckViolation):
        upsert_settings(conn, RetentionSettings("cap", 30.0, None, MAX_CHUNK + 1, 100))
