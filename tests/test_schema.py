"""Schema init: idempotent, versioned, partitions only grow."""

from __future__ import annotations

import psycopg
import pytest

from slidewin.db.errors import ProcedureError, SchemaMissing
from slidewin.db.schema import current_version, init_schema, latest_version, require_schema


def test_init_is_idempotent_and_records_version(make_store):
    dsn = make_store(4)
    with psycopg.connect(dsn) as conn:
        again = init_schema(conn)  # no --partitions: keeps the 4 that exist
        assert again.partitions == 4
        assert current_version(conn) == latest_version() >= 2
        parts = conn.execute(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'slidewin.events'::regclass"
        ).fetchone()[0]
        assert parts == 4


def test_partitions_can_be_added_not_removed(make_store):
    dsn = make_store(2)
    with psycopg.connect(dsn) as conn:
        assert init_schema(conn, 3).partitions == 3
        with pytest.raises(ProcedureError, match="can only be added"):
            init_schema(conn, 2)
        keys = [r[0] for r in conn.execute("SELECT slidewin.partition_keys()").fetchall()]
        assert keys == [0, 1, 2]


def test_raw_table_has_no_index_on_val(conn):
    defs = [r[0] for r in conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE schemaname = 'slidewin' AND tablename = 'events'"
    ).fetchall()]
    assert defs and all("val" not in d for d in defs), defs


def test_partition_count_is_capped_where_names_stay_three_digits(conn):
    # events_p000 .. events_p999: a 1001st partition would need a name lpad() would cut short
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="from 1 to 1000"):
        conn.execute("SELECT slidewin.ensure_partitions(1001)")
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("UPDATE slidewin.config SET partitions = 1001")


def test_require_schema_names_the_fix(pg_admin_dsn, conn):
    from tests.pgfixture import create_database, drop_database

    require_schema(conn, "stream_state", "retention_settings")  # a store: all there
    with pytest.raises(SchemaMissing, match="lacks slidewin.no_such_table .*slidewin db init"):
        require_schema(conn, "stream_state", "no_such_table")
    bare = create_database(pg_admin_dsn)
    try:
        with psycopg.connect(bare) as empty, pytest.raises(SchemaMissing) as missing:
            require_schema(empty)
    finally:
        drop_database(pg_admin_dsn, bare)
    assert str(missing.value) == (
        "the slidewin schema is not in this database; run `slidewin db init` (it is idempotent) "
        "and try again"
    )
