"""Throw-away databases on a server: what benchmarks and tests measure in, never the user's store.

Each gets a random name with a prefix (``slidewin_bench_...``), optionally the slidewin schema,
and is dropped afterwards (WITH (FORCE): a benchmark's stray connection must not keep it alive).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from slidewin.db.connect import connect
from slidewin.db.errors import SlidewinError
from slidewin.db.schema import init_schema


def with_database(dsn: str, name: str) -> str:
    """``dsn`` pointed at database ``name`` on the same server, as the same user."""
    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    params["dbname"] = name
    return make_conninfo(**params)


def create_database(admin_dsn: str, prefix: str = "slidewin_bench") -> str:
    """Create an empty database named ``<prefix>_<random>``; return a DSN for it."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with connect(admin_dsn, autocommit=True) as conn:
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except psycopg.Error as exc:
            raise SlidewinError(
                f"cannot create the scratch database {name} ({exc.diag.message_primary}); "
                "this needs a role with CREATEDB on the server"
            ) from None
    return with_database(admin_dsn, name)


def drop_database(admin_dsn: str, dsn: str) -> None:
    """Drop the database ``dsn`` names, even with connections still open to it."""
    name = str(conninfo_to_dict(dsn)["dbname"])
    with connect(admin_dsn, autocommit=True) as conn:
        statement = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
        conn.execute(statement.format(sql.Identifier(name)))


@contextmanager
def scratch_database(
    admin_dsn: str,
    *,
    prefix: str = "slidewin_bench",
    partitions: int | None = None,
    keep: bool = False,
    progress: Callable[[str], None] = lambda _msg: None,
) -> Iterator[str]:
    """A fresh database for the ``with`` block (with the schema when ``partitions`` is given)."""
    dsn = create_database(admin_dsn, prefix)
    name = conninfo_to_dict(dsn)["dbname"]
    progress(f"benchmark database {name} created")
    try:
        if partitions is not None:
            with connect(dsn) as conn:
                init_schema(conn, partitions)
        yield dsn
    finally:
        if keep:
            progress(f"kept benchmark database {name}")
        else:
            drop_database(admin_dsn, dsn)
            progress(f"benchmark database {name} dropped")
