"""Ctrl-C stops the ingest within seconds in every phase -- also while the database is busy
with a long statement of a batch -- and the statement does not go on running in the server.

A test-only trigger makes each insert sleep for minutes (standing in for a batch whose session
windows or lock waits take that long). SIGINT must end `slidewin ingest` promptly with exit code
130, cancel the sleeping statement, and leave the batch uncommitted; the next run stores it
exactly once.
"""

from __future__ import annotations

import signal
import subprocess
import time

import psycopg
import pytest

from tests.ingest_fixtures import event, write_jsonl
from tests.invariants import assert_rollups_exact
from tests.test_ingest_crash import command, env_with
from tests.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SLOW = """
CREATE FUNCTION slidewin.test_slow_insert() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN PERFORM pg_sleep(600); RETURN NULL; END $$;
DO $$ DECLARE p int; BEGIN
  FOR p IN SELECT slidewin.partition_keys() LOOP
    EXECUTE format('CREATE TRIGGER test_slow AFTER INSERT ON slidewin.%I '
                   'FOR EACH STATEMENT EXECUTE FUNCTION slidewin.test_slow_insert()',
                   slidewin.partition_name(p));
  END LOOP;
END $$;
"""


def sleeping(conn: psycopg.Connection) -> int:
    return conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND state = 'active' AND wait_event = 'PgSleep'"
    ).fetchone()[0]


def test_ctrl_c_during_a_long_statement_stops_within_seconds(make_store, tmp_path):
    dsn = make_store(2)
    (tmp_path / "landing").mkdir()
    write_jsonl(tmp_path / "landing", "a.jsonl", [event(f"k{i}", i, i) for i in range(50)])
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SLOW)
        proc = subprocess.Popen(command(dsn, tmp_path), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env_with("stop", None))
        try:
            wait_until(lambda: sleeping(conn) > 0 or proc.poll() is not None, 180,
                       interval_s=0.2, what="the batch's insert to reach the slow trigger")
            assert proc.poll() is None, proc.communicate()
            asked = time.monotonic()
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
            took = time.monotonic() - asked
        finally:
            if proc.poll() is None:
                proc.kill()
        _, err = proc.communicate()
        assert proc.returncode == 130, err[-2000:]
        assert took < 30, f"stopping took {took:.1f}s"
        wait_until(lambda: sleeping(conn) == 0, 10, what="the sleeping statement to be cancelled")
        assert conn.execute("SELECT count(*) FROM slidewin.events").fetchone() == (0,)
        conn.execute("DROP FUNCTION slidewin.test_slow_insert() CASCADE")
    again = subprocess.run([*command(dsn, tmp_path), "--once"], capture_output=True, text=True,
                           env=env_with("stop-again", None), timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*), sum(val) FROM slidewin.events").fetchone() == (
            50, sum(range(50)))
        assert_rollups_exact(conn)
