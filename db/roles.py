"""Least privilege: the group roles each part of slidewin connects as, and login roles in them.

``slidewin.create_roles`` (procedures/roles) does the work in SQL, so ``psql`` users get the same
roles as ``slidewin db roles``; this module checks first that the connecting user can create
roles (to say the fix instead of PostgreSQL's bare "permission denied"), lists the grants, adds
login roles and finds whether a process can drop to a role (``slidewin serve``).

While the ingest and the jobs run: ``create_roles`` makes the roles (no table lock), then hands
each object the owner role does not own yet over in a transaction of its own
(``slidewin.role_handover``), then grants (``slidewin.grant_roles``, which then changes no
owner, so it takes no lock stronger than a grant's). Every step waits at most LOCK_TIMEOUT_MS
for a lock and is tried again, up to ``attempts`` times, when it waited longer or was chosen
as a deadlock's victim: ``ALTER TABLE ... OWNER`` never holds one table's lock while it waits
for another's, so it cannot deadlock with a batch, and a step that never gets its lock gives
up with a message that says so.

A login's password is hashed here, by libpq (SCRAM-SHA-256, as psql's ``\\password`` does): the
server, its logs and ``pg_stat_activity`` only ever see the hash.
"""

from __future__ import annotations

import contextlib
import functools
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from slidewin.db.connect import procedure_errors
from slidewin.db.errors import ConfigError, SlidewinError
from slidewin.db.schema import require_schema

DEFAULT_PREFIX = "slidewin"
GROUPS: tuple[str, ...] = ("owner", "ingest", "jobs", "reader")
NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")  # plain role names: no quoting anywhere
LOCK_TIMEOUT_MS = 100  # each step's longest wait for a lock (below deadlock_timeout's 1 s)
ATTEMPTS = 50  # tries of each step before giving up
PAUSE_S = 0.05  # pause after the n-th failed try: n * PAUSE_S, at most MAX_PAUSE_S
MAX_PAUSE_S = 1.0
BUSY = (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected,
        psycopg.errors.SerializationFailure)

T = TypeVar("T")


class RoleError(SlidewinError):
    """The connecting user may not create or change roles; the message names the fix."""


def check_name(name: str, option: str) -> str:
    """``name`` when it is a plain role name, else ConfigError naming ``option``."""
    if not NAME.match(name):
        raise ConfigError(f"{option} {name!r} is not a plain role name; use lowercase letters, "
                          "digits and _, starting with a letter or _ (e.g. slidewin_web)")
    return name


def role_name(group: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The group role of ``group`` (owner, ingest, jobs, reader) in set ``prefix``."""
    if group not in GROUPS:
        raise ConfigError(f"--as {group!r} is not a role; use one of {', '.join(GROUPS)}")
    return f"{prefix}_{group}"


@dataclass(frozen=True)
class RoleGrants:
    """One role of the set: whether this call created it, its memberships and grants."""

    name: str
    created: bool
    member_of: list[str] = field(default_factory=list)
    grants: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"role": self.name, "created": self.created, "member_of": self.member_of,
                "grants": self.grants}


@dataclass(frozen=True)
class RolesReport:
    prefix: str
    roles: list[RoleGrants]
    login: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "roles": [r.as_json() for r in self.roles],
                "login": self.login}


def check_can_create_roles(conn: psycopg.Connection) -> None:
    """RoleError naming the fix unless the connecting user is a superuser or has CREATEROLE."""
    row = conn.execute(
        "SELECT current_user, rolsuper OR rolcreaterole FROM pg_roles "
        "WHERE rolname = current_user").fetchone()
    if row is None or not row[1]:
        user = row[0] if row else "this user"
        raise RoleError(
            f"the connecting user {user} cannot create roles (it lacks CREATEROLE); run "
            f"`slidewin db roles` as a superuser, or first ALTER ROLE {user} CREATEROLE")


def create_roles(conn: psycopg.Connection, prefix: str = DEFAULT_PREFIX, *,
                 attempts: int = ATTEMPTS) -> RolesReport:
    """Create (where missing) and grant the role set ``prefix``; idempotent. Safe while the
    ingest and the jobs run (module docstring); RoleError after ``attempts`` tries of a step."""
    require_schema(conn, "role_sets")
    check_can_create_roles(conn)
    rows = _short_locks(conn, "create the roles", attempts, lambda: conn.execute(
        "SELECT role, created FROM slidewin.create_role_set(%s)", (prefix,)).fetchall())
    made: dict[str, bool] = {str(role): bool(created) for role, created in rows}
    hand_over(conn, prefix, attempts)
    _short_locks(conn, "grant the roles", attempts,
                 lambda: conn.execute("SELECT slidewin.grant_roles(%s)", (prefix,)))
    return RolesReport(prefix, role_grants(conn, prefix, made))


def hand_over(conn: psycopg.Connection, prefix: str = DEFAULT_PREFIX,
              attempts: int = ATTEMPTS) -> list[str]:
    """Make ``<prefix>_owner`` the owner of every object of the slidewin schemas, one object
    per transaction (``slidewin.role_handover``'s order); the objects handed over."""
    done: list[str] = []
    for obj, statement in conn.execute("SELECT object, statement FROM slidewin.role_handover(%s)",
                                       (prefix,)).fetchall():
        _short_locks(conn, f"make {prefix}_owner the owner of {obj}", attempts,
                     functools.partial(conn.execute, statement))
        done.append(str(obj))
    return done


def _short_locks(conn: psycopg.Connection, what: str, attempts: int, work: Callable[[], T]) -> T:
    """``work()`` in a transaction whose lock waits last at most LOCK_TIMEOUT_MS; tried again
    after a pause when a wait timed out or the transaction was a deadlock's victim."""
    for attempt in range(1, attempts + 1):
        try:
            with conn.transaction(), _privilege_errors(), procedure_errors():
                conn.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
                return work()
        except BUSY:
            if attempt < attempts:
                time.sleep(min(attempt * PAUSE_S, MAX_PAUSE_S))
    raise RoleError(
        f"slidewin db roles could not {what}: another session held a lock it needs through "
        f"{attempts} tries of {LOCK_TIMEOUT_MS} ms (an ingest batch, a retention round or an "
        "open psql transaction); run it again, or pause the ingest and the jobs for a moment")


def role_grants(conn: psycopg.Connection, prefix: str = DEFAULT_PREFIX,
                created: dict[str, bool] | None = None) -> list[RoleGrants]:
    """Each role of the set with its memberships and grants in this database."""
    rows = conn.execute("SELECT role, kind, object, privileges FROM slidewin.role_grants(%s)",
                        (prefix,)).fetchall()
    found: dict[str, RoleGrants] = {}
    for group in GROUPS:
        name = f"{prefix}_{group}"
        found[name] = RoleGrants(name, bool((created or {}).get(name)))
    for role, kind, obj, privileges in rows:
        entry = found[role]
        if kind == "member of":
            entry.member_of.append(obj)
        else:
            entry.grants.append({"on": kind, "name": obj, "privileges": privileges})
    return list(found.values())


def create_login(conn: psycopg.Connection, name: str, group: str, password: str | None,
                 prefix: str = DEFAULT_PREFIX) -> dict[str, Any]:
    """Create (or update) LOGIN role ``name``, a member of the group ``group`` of set
    ``prefix`` and of nothing else this call grants; the password is sent as a SCRAM hash
    (None: no password, for peer or certificate authentication)."""
    target = role_name(group, prefix)
    check_name(name, "--login")
    check_can_create_roles(conn)
    with conn.transaction(), _privilege_errors():
        existed = conn.execute("SELECT to_regrole(%s) IS NOT NULL", (name,)).fetchone()
        verb = sql.SQL("ALTER" if existed and existed[0] else "CREATE")
        statement = sql.SQL("{} ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE "
                            "NOBYPASSRLS").format(verb, sql.Identifier(name))
        if password is not None:
            hashed = conn.pgconn.encrypt_password(password.encode(), name.encode(),
                                                  b"scram-sha-256")
            statement += sql.SQL(" PASSWORD {}").format(sql.Literal(hashed.decode()))
        conn.execute(statement)
        if not _member(conn, name, target):
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(target),
                                                          sql.Identifier(name)))
    return {"role": name, "member_of": target, "created": not (existed and existed[0]),
            "password": "set" if password is not None else "unchanged"}


def _member(conn: psycopg.Connection, name: str, group: str) -> bool:
    row = conn.execute("SELECT pg_has_role(%s, %s, 'MEMBER')", (name, group)).fetchone()
    return bool(row and row[0])


def can_become(conn: psycopg.Connection, role: str) -> str | None:
    """None when this session may ``SET ROLE`` to ``role``, else why not (in words)."""
    row = conn.execute(
        "SELECT to_regrole(%(r)s) IS NOT NULL, "
        "       pg_has_role(session_user, to_regrole(%(r)s), 'MEMBER'), "
        "       has_schema_privilege(to_regrole(%(r)s), 'slidewin', 'USAGE')",
        {"r": role}).fetchone()
    if not row or not row[0]:
        return f"role {role} does not exist here (run `slidewin db roles`)"
    if not row[2]:
        return f"role {role} has no grants in this database (run `slidewin db roles` on it)"
    if not row[1]:
        return (f"the connecting user is not a member of {role} (GRANT {role} TO <user>, or "
                "`slidewin db roles --login NAME --as reader`)")
    return None


def with_role(dsn: str, role: str) -> str:
    """``dsn`` whose sessions start as ``role`` (libpq ``options=-c role=...``): every
    connection made from it, pooled, listening or opened by a library, is that role from its
    first statement, and ``RESET ROLE`` keeps it."""
    check_name(role, "--role")
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    options = str(params.get("options") or "")
    params["options"] = f"{options} -c role={role}".strip()
    return psycopg.conninfo.make_conninfo("", **params)


@contextlib.contextmanager
def _privilege_errors() -> Iterator[None]:
    """InsufficientPrivilege from CREATE ROLE, GRANT or ALTER OWNER as RoleError, with the fix."""
    try:
        yield
    except psycopg.errors.InsufficientPrivilege as exc:
        raise RoleError(
            f"{exc.diag.message_primary}; run `slidewin db roles` as a superuser, or as a user "
            "with CREATEROLE that owns the slidewin schema") from None


def reader_dsn(conn: psycopg.Connection, dsn: str, role: str | None,
               prefix: str = DEFAULT_PREFIX) -> tuple[str, str | None]:
    """``dsn`` made to connect as the reader, and a warning when it cannot be.

    ``role`` given: that role or RoleError (a server asked to drop privileges must not start
    without). Not given: ``<prefix>_reader`` when this session may become it, else ``dsn`` as
    it is and a warning that says the fix."""
    wanted = role or role_name("reader", prefix)
    why = can_become(conn, wanted)
    if why is None:
        return with_role(dsn, wanted), None
    if role is not None:
        raise RoleError(f"--role {role}: {why}")
    user = conn.execute("SELECT session_user").fetchone()
    return dsn, (f"serving as {user[0] if user else 'the connecting user'}, not as a reader: "
                 f"{why}; requests still run in read-only transactions")
