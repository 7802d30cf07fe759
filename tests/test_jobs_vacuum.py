"""The retention job's vacuum: partitions whose dead tuples pass the threshold (or that were
never analyzed) are vacuumed, the others left alone; partitions carry the autovacuum settings."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from slidewin.jobs.config import RetentionPolicy
from slidewin.jobs.retention import run_until_caught_up
from slidewin.jobs.vacuum import BackgroundVacuum, partitions_due, vacuum_due
from tests.jobs_fixtures import at, events, load
from tests.waiting import wait_until


def dead_tuples(conn: psycopg.Connection) -> dict[str, int]:
    rows = conn.execute(
        "SELECT relname, n_dead_tup FROM pg_stat_user_tables "
        "WHERE schemaname = 'slidewin' AND relname LIKE 'events_p%'"
    ).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def flush_stats(conn: psycopg.Connection) -> None:
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT 1")
    conn.execute("SELECT pg_stat_clear_snapshot()")


# alone: a VACUUM leaves the dead tuples any open snapshot on the server may still see, and a
# test running beside it holds one now and then
@pytest.mark.serial
def test_nibbled_partitions_get_vacuumed_and_analyzed(make_store):
    dsn = make_store(2)
    with psycopg.connect(dsn, autocommit=True) as conn:
        load(conn, events(0, 10, 2000), 2)  # 20,000 rows
        policy = RetentionPolicy(history=timedelta(seconds=2), chunk=5000)
        run_until_caught_up(conn, policy, at(10))  # deletes the 16,000 rows before t = 8 s
        flush_stats(conn)
        due = dict(partitions_due(conn, min_dead=1000, fraction=0.05))
        assert set(due) == {"events_p000", "events_p001"}
        assert all(due.values())  # never analyzed: analyze too
        assert sorted(vacuum_due(conn, min_dead=1000, fraction=0.05)) == sorted(due)
        flush_stats(conn)
        assert all(n == 0 for n in dead_tuples(conn).values())
        analyzed = conn.execute(
            "SELECT count(*) FROM pg_stat_user_tables WHERE relname LIKE 'events_p%' "
            "AND last_analyze IS NOT NULL"
        ).fetchone()
        assert analyzed == (2,)
        assert partitions_due(conn, min_dead=1000, fraction=0.05) == []


def test_background_vacuum_reports_what_it_did(make_store):
    dsn = make_store(2)
    with psycopg.connect(dsn, autocommit=True) as conn:
        load(conn, events(0, 10, 1000), 2)
        conn.execute("DELETE FROM slidewin.events WHERE ts < %s", (at(8),))
        flush_stats(conn)
    vacuum = BackgroundVacuum(dsn, min_dead=1000, fraction=0.05)
    try:
        vacuum.nudge()
        done: list[str] = []

        def both_reported() -> bool:
            done.extend(vacuum.drain()[0])
            return len(done) >= 2

        wait_until(both_reported, 20, what="both partitions vacuumed")
        assert sorted(done) == ["events_p000", "events_p001"] and vacuum.errors == []
    finally:
        vacuum.close()


def test_partitions_carry_autovacuum_settings_even_after_a_change(make_store):
    dsn = make_store(2)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE slidewin.events_p001 RESET (autovacuum_vacuum_threshold)")
        conn.execute("SELECT slidewin.ensure_partitions(3)")  # as `db init` does
        rows = conn.execute(
            "SELECT c.relname, c.reloptions FROM pg_inherits i JOIN pg_class c "
            "ON c.oid = i.inhrelid WHERE i.inhparent = 'slidewin.events'::regclass"
        ).fetchall()
    assert len(rows) == 3
    for _, options in rows:
        assert "autovacuum_vacuum_scale_factor=0" in options
        assert "autovacuum_vacuum_threshold=2000" in options
        assert "autovacuum_vacuum_cost_delay=0" in options
