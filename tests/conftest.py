"""Shared fixtures: one real PostgreSQL for the session, a fresh slidewin database per module,
and a clean store per test. See tests/pgfixture.py for where the server comes from."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import psycopg
import pytest

from slidewin.db.schema import init_schema
from tests.invariants import assert_rollups_exact
from tests.pgfixture import create_database, drop_database, server_dsn
from tests.restartable_pg import RestartablePostgres, restartable_postgres

# pytester runs the durations guard's own test; the guard fails an unmarked test over 10 s
pytest_plugins = ["pytester", "tests.durations_guard"]

# A pinned clock: tests pass it wherever "now" is needed and never sleep for expiry.
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)

CLEAN_SQL = (
    "TRUNCATE slidewin.events, slidewin.dead_letters, slidewin.ingest_batches, "
    "slidewin.retention_settings, slidewin.stream_state, slidewin.retention_state, "
    "slidewin.session_tombstones, slidewin.session_store, slidewin.session_defs"
)

# declared streams and joins are tables of their own: each test starts with none (a stream's
# session windows are removed first: stream_drop refuses a stream that has some)
DROP_STREAMS_SQL = (
    "UPDATE slidewin.session_defs SET dropped_at = now() "
    "WHERE stream <> 'events' AND dropped_at IS NULL; "
    "SELECT slidewin.join_drop(name) FROM slidewin.joins; "
    "SELECT slidewin.stream_drop(name) FROM slidewin.streams WHERE NOT builtin"
)


@pytest.fixture(scope="session")
def pg_admin_dsn() -> Iterator[str]:
    with server_dsn() as (dsn, _source):
        yield dsn


def pytest_report_header(config: pytest.Config) -> str:
    import os

    if os.environ.get("SLIDEWIN_TEST_DSN"):
        return "slidewin: PostgreSQL from SLIDEWIN_TEST_DSN"
    return "slidewin: PostgreSQL from testcontainers if Docker answers, else embedded pgserver"


@functools.cache
def java_missing() -> str | None:
    """Why Spark cannot start on this machine (no Java 17+, as the ingest would say), or None."""
    from slidewin.ingest.errors import JavaUnavailable
    from slidewin.ingest.java import check_java

    try:
        check_java()
    except JavaUnavailable as exc:
        return str(exc)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A Spark test (the ``spark`` marker, or one using the ``spark`` fixture) is skipped with
    the reason when Java 17+ is missing, before any fixture starts a JVM -- never an error."""
    fixtures = getattr(item, "fixturenames", ())
    uses_spark = item.get_closest_marker("spark") or {"spark", "spark_jvm"} & set(fixtures)
    if uses_spark and (why := java_missing()):
        pytest.skip(f"needs Java for Spark: {why}")


@pytest.fixture(scope="session")
def spark_jvm(make_store: Callable[..., str]) -> Iterator[object]:
    """The test session's one local Spark (local[2], UI off, 2 shuffle partitions), started by
    the first test that asks for ``spark`` and stopped at the end: a JVM start costs seconds,
    and one per module added up. It runs with the ingest's own heap (1 GB), which the largest
    input of tests/test_ingest_formats.py needs (a 21 MB line read by two jobs at once). Its
    setup ends with one ingest into a scratch store (``tests.ingest_fixtures.warm_up``), so the
    first run's extra seconds are setup, not the first Spark test's run. Tests that need a
    fresh JVM (the class-data-sharing archive is written by a JVM as it exits:
    tests/test_ingest_classcache.py) or a process of their own (the CLI's ingest, a cluster)
    start their own instead."""
    from tests.ingest_fixtures import spark_session

    yield from spark_session(warm_up_dsn=make_store(2))


@pytest.fixture
def spark(spark_jvm: object) -> Iterator[object]:
    """The shared SparkSession, handed back as the test found it (SQL confs put back, no
    streaming query left running: ``tests.ingest_fixtures.handed_back``)."""
    from tests.ingest_fixtures import handed_back

    with handed_back(spark_jvm):
        yield spark_jvm


@pytest.fixture(scope="session")
def make_store(pg_admin_dsn: str) -> Iterator[Callable[..., str]]:
    """Factory: a new database with the slidewin schema; returns its DSN. Dropped at the end."""
    made: list[str] = []

    def make(partitions: int = 8) -> str:
        dsn = create_database(pg_admin_dsn)
        made.append(dsn)
        with psycopg.connect(dsn) as conn:
            init_schema(conn, partitions)
        return dsn

    yield make
    for dsn in made:
        drop_database(pg_admin_dsn, dsn)


@pytest.fixture(scope="session")
def store_dsn(make_store: Callable[..., str]) -> str:
    """The session's shared store (8 partitions). Tests using it get it emptied first."""
    return make_store(8)


@contextlib.contextmanager
def clean_connection(dsn: str, clean_sql: str = CLEAN_SQL) -> Iterator[psycopg.Connection]:
    """An autocommit connection to the store emptied by ``clean_sql``; the rollup invariant is
    checked when the block ends. The body of every per-test connection fixture."""
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(DROP_STREAMS_SQL)
        c.execute(clean_sql)
        yield c
        assert_rollups_exact(c)


@pytest.fixture
def conn(store_dsn: str) -> Iterator[psycopg.Connection]:
    """An autocommit connection to an empty store; the rollup invariant is checked afterwards."""
    with clean_connection(store_dsn) as c:
        yield c


@pytest.fixture
def own_server() -> Iterator[RestartablePostgres]:
    """A PostgreSQL of the test's own, which it may stop and restart (the shared one never)."""
    with restartable_postgres() as pg:
        yield pg
