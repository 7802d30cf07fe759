"""Creating and upgrading the schema: versioned SQL with a recorded version.

The idempotent baseline (procedures.BASELINE) is always the newest schema, and ``init_schema``
applies it every time -- so functions are always the ones shipped with this code. A store made by
an older version first gets each migration newer than its recorded version, once, in version
order: a migration changes what the older baseline made (a renamed column, merged rows) before the
newer baseline, whose functions may already read the new shape, is applied over it. A new store
gets the baseline alone and has every migration recorded as applied (the baseline holds them).
All in one transaction under an advisory lock: two inits never interleave, and a failed init
leaves the previous schema intact.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from slidewin import procedures
from slidewin.db.connect import procedure_errors
from slidewin.db.errors import SchemaMissing

BASELINE_VERSION = 1  # the first recorded version; migrations number on from 2
INIT_LOCK = "slidewin.init_schema"
INIT_FIX = "run `slidewin db init` (it is idempotent) and try again"


@dataclass(frozen=True)
class SchemaReport:
    version: int
    partitions: int
    applied_migrations: tuple[str, ...]


def init_schema(conn: psycopg.Connection, partitions: int | None = None) -> SchemaReport:
    """Create or upgrade the schema; add partitions up to ``partitions`` (default: keep, or 8)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (INIT_LOCK,))
        applied = _apply_migrations(conn)
        for name in procedures.all_files():
            conn.execute(procedures.read_sql(name))
        _record_new_store(conn)
        with procedure_errors():
            count = _ensure_partitions(conn, partitions)
        # one row, but never analyzed it looks like thousands to the planner, and every
        # "run everywhere" query joins it through slidewin.partition_keys()
        conn.execute("ANALYZE slidewin.config")
        # the statements the registries hold, made again from their definitions: whatever a
        # role that could once write them stored there is replaced
        conn.execute("SELECT slidewin.registry_regenerate()")
        # objects this init created belong to whoever ran it: hand them to each role set
        # (`slidewin db roles`) and grant them, or readers and writers would lack them
        conn.execute("SELECT slidewin.regrant_roles()")
    return SchemaReport(current_version(conn) or BASELINE_VERSION, count, applied)


def _apply_migrations(conn: psycopg.Connection) -> tuple[str, ...]:
    """The migrations newer than an existing store's version, in order (none for a new store)."""
    done = current_version(conn)
    if done is None:
        return ()
    applied = []
    for version, name in procedures.migrations():
        if version > done:
            conn.execute(procedures.read_sql(name))
            _record(conn, version, name)
            applied.append(name)
    return tuple(applied)


def _record_new_store(conn: psycopg.Connection) -> None:
    """A new store (no version yet) is at the newest version: the baseline holds every
    migration, so each is recorded as applied without running it."""
    if conn.execute("SELECT count(*) FROM slidewin.schema_version").fetchone() != (0,):
        return
    _record(conn, BASELINE_VERSION, "baseline")
    for version, name in procedures.migrations():
        _record(conn, version, name)


def _record(conn: psycopg.Connection, version: int, name: str) -> None:
    conn.execute(
        "INSERT INTO slidewin.schema_version (version, name) VALUES (%s, %s) "
        "ON CONFLICT DO NOTHING",
        (version, name),
    )


def _ensure_partitions(conn: psycopg.Connection, partitions: int | None) -> int:
    if partitions is None:
        row = conn.execute("SELECT partitions FROM slidewin.config").fetchone()
        partitions = row[0] if row else 8
    result = conn.execute("SELECT slidewin.ensure_partitions(%s)", (partitions,)).fetchone()
    return int(result[0]) if result else partitions


def latest_version() -> int:
    """The version this code's schema is at: the newest migration's, or the baseline's."""
    return max([BASELINE_VERSION, *(version for version, _ in procedures.migrations())])


def current_version(conn: psycopg.Connection) -> int | None:
    """The recorded schema version, or None when slidewin was never initialised here."""
    exists = conn.execute("SELECT to_regclass('slidewin.schema_version')").fetchone()
    if not exists or exists[0] is None:
        return None
    row = conn.execute("SELECT max(version) FROM slidewin.schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else None


def require_schema(conn: psycopg.Connection, *tables: str) -> None:
    """SchemaMissing, saying the fix, unless the slidewin schema is here -- with each of
    ``tables`` (names in schema slidewin) that a caller needs beyond the baseline."""
    if current_version(conn) is None:
        raise SchemaMissing(f"the slidewin schema is not in this database; {INIT_FIX}")
    found = {
        row[0]
        for row in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'slidewin' AND c.relname = ANY(%s)",
            (list(tables),),
        ).fetchall()
    }
    missing = [f"slidewin.{table}" for table in tables if table not in found]
    if missing:
        raise SchemaMissing(
            f"the slidewin schema here lacks {', '.join(missing)} (it is older than this "
            f"slidewin); {INIT_FIX}"
        )
