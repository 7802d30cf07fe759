"""Where the tests' PostgreSQL comes from, most explicit first.

1. ``SLIDEWIN_TEST_DSN``: a server you already run (any database on it; tests create their own).
2. testcontainers' PostgreSQL, when a Docker engine answers.
3. The embedded server (pgserver) in a temporary directory -- needs nothing installed.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from slidewin.db import scratch
from slidewin.db.scratch import drop_database  # noqa: F401 - the tests' import point


@contextlib.contextmanager
def server_dsn() -> Iterator[tuple[str, str]]:
    """Yield ``(admin DSN, where it came from)`` for a server the tests may create databases on."""
    explicit = os.environ.get("SLIDEWIN_TEST_DSN")
    if explicit:
        yield explicit, "SLIDEWIN_TEST_DSN"
        return
    if _docker_answers():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:16", driver=None) as pg:
            yield pg.get_connection_url(), "testcontainers"
        return
    import pgserver

    with tempfile.TemporaryDirectory(prefix="slidewin-test-pg-") as tmp:
        server = pgserver.get_server(Path(tmp) / "pgdata", cleanup_mode="delete")
        try:
            yield server.get_uri("postgres"), "embedded pgserver"
        finally:
            server.cleanup()


def _docker_answers() -> bool:
    try:
        import docker

        client = docker.from_env(timeout=3)
        return bool(client.ping())
    except Exception:
        return False


def create_database(admin_dsn: str, prefix: str = "slidewin_test") -> str:
    """An empty database for tests (named apart from the benchmarks' ``slidewin_bench_*``)."""
    return scratch.create_database(admin_dsn, prefix)
