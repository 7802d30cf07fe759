"""A PostgreSQL of the test's own, which the test may stop and start (never the shared one).

pgserver makes the data directory (as its own system user when the tests run as root) and
starts the server on a Unix socket in a temporary directory; ``stop`` / ``start`` run
pgserver's bundled ``pg_ctl`` (``db.pgserver_internals``) on that directory, so the DSN stays
the same across a restart.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg

from slidewin.db.scratch import create_database


class RestartablePostgres:
    """One server in ``folder``; ``admin_dsn`` connects to its ``postgres`` database."""

    def __init__(self, folder: Path) -> None:
        import pgserver

        self.pgdata = folder / "pgdata"
        self.server = pgserver.get_server(self.pgdata, cleanup_mode="delete")
        info = self.server.get_postmaster_info()
        self.socket_dir = info.socket_dir
        self.admin_dsn = self.server.get_uri("postgres")
        self.running = True

    def _pg_ctl(self, *args: str) -> None:
        from slidewin.db.pgserver_internals import pg_ctl

        pg_ctl(list(args), pgdata=self.pgdata, user=self.server.system_user, timeout=60)

    def stop(self) -> None:
        """Fast shutdown: sessions are ended with admin_shutdown (SQLSTATE 57P01)."""
        self._pg_ctl("-w", "-m", "fast", "stop")
        self.running = False

    def start(self) -> None:
        self._pg_ctl(
            "-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}",
            "-l", str(self.pgdata / "log"), "start",
        )
        self.running = True

    def restart(self, down_s: float) -> None:
        self.stop()
        time.sleep(down_s)  # the outage itself: clients must see the server gone
        self.start()

    def database(self) -> str:
        """A new empty database on this server; its DSN."""
        return create_database(self.admin_dsn, "slidewin_reconnect")

    def store(self, partitions: int) -> str:
        """A new database on this server with the slidewin schema; its DSN."""
        from slidewin.db.schema import init_schema

        dsn = self.database()
        with psycopg.connect(dsn) as conn:
            init_schema(conn, partitions)
        return dsn

    def close(self) -> None:
        if not self.running:
            self.start()  # pgserver's cleanup stops and deletes a server it finds running
        with contextlib.suppress(Exception):
            self.stop()
        self.server.cleanup()


@contextlib.contextmanager
def restartable_postgres() -> Iterator[RestartablePostgres]:
    with tempfile.TemporaryDirectory(prefix="slidewin-restart-pg-") as tmp:
        pg = RestartablePostgres(Path(tmp))
        try:
            yield pg
        finally:
            pg.close()


def answers(dsn: str) -> bool:
    try:
        with psycopg.connect(dsn, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError:
        return False
    return True
