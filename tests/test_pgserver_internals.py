"""``db.pgserver_internals`` with a real embedded server in a temp data dir: without pgserver's
pg_ctl the server is still stopped cleanly (PostgreSQL's fast shutdown), and a renamed piece of
pgserver's bookkeeping fails the start with DatabaseUnavailable and leaks no server."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from slidewin.db import embedded, pgserver_internals
from slidewin.db.errors import DatabaseUnavailable
from tests.test_embedded_server import _stop_everything, alive, gone_within, postmaster_pid

# slow: each test starts an embedded PostgreSQL server of its own
pytestmark = [pytest.mark.skipif(sys.platform == "win32", reason="signals and Unix sockets"),
              pytest.mark.slow]


@pytest.fixture
def server_dir() -> Iterator[Path]:
    """A fresh data dir under /tmp (see test_embedded_server's ``data`` for why not tmp_path);
    whatever server the test left in it is stopped."""
    with tempfile.TemporaryDirectory(prefix="slidewin-embedded-") as tmp:
        data = Path(tmp) / "sw"
        try:
            yield data
        finally:
            _stop_everything(data)


def test_without_pg_ctl_the_server_gets_a_fast_shutdown(server_dir, monkeypatch):
    import pgserver._commands

    with psycopg.connect(embedded.embedded_dsn(server_dir), autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (n int)")
        conn.execute("INSERT INTO kept VALUES (1)")
    first = postmaster_pid(server_dir)
    assert first is not None and alive(first)
    monkeypatch.delattr(pgserver._commands, "pg_ctl")
    with pytest.raises(pgserver_internals.PgCtlUnavailable):
        pgserver_internals.pg_ctl(["status"], pgdata=server_dir / "pgdata", user=None)

    assert embedded.stop_embedded(server_dir)

    assert gone_within(first) and not embedded.is_running(server_dir)
    log = (server_dir / "pgdata" / "log").read_text()
    assert "received fast shutdown request" in log and "database system is shut down" in log
    monkeypatch.undo()
    with psycopg.connect(embedded.embedded_dsn(server_dir), autocommit=True) as conn:
        assert conn.execute("SELECT n FROM kept").fetchall() == [(1,)]
    assert "not properly shut down" not in (server_dir / "pgdata" / "log").read_text()


def test_renamed_pgserver_bookkeeping_fails_the_start_and_leaks_no_server(
    server_dir, monkeypatch
):
    import pgserver
    from pgserver.postgres_server import PostgresServer

    real_get_server = pgserver.get_server

    def get_server_then_rename(*args, **kwargs):
        server = real_get_server(*args, **kwargs)  # started; now pgserver "renames" its cache
        monkeypatch.delattr(PostgresServer, "_instances")
        return server

    monkeypatch.setattr(pgserver, "get_server", get_server_then_rename)
    with pytest.raises(DatabaseUnavailable, match="_instances"):
        embedded.embedded_dsn(server_dir)
    started = postmaster_pid(server_dir)
    assert started is not None and alive(started)
    assert embedded.live_holders(server_dir) == []  # the failed start holds nothing ...

    embedded._detach(server_dir.resolve(), os.getpid())  # ... so its exit stops the server
    assert gone_within(started)
