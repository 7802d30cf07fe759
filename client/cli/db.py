"""``slidewin db``: create/upgrade the schema, show per-partition state, run the embedded server."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import click

from slidewin.client.answers import store as answer_store
from slidewin.client.cli.context import AppContext, emit_json, pass_app
from slidewin.client.cli.options import json_option
from slidewin.client.cli.root import SlidewinGroup
from slidewin.db import embedded
from slidewin.db.config import configured_dsn, redact
from slidewin.db.connect import ensure_embedded
from slidewin.db.limits import MAX_PARTITIONS
from slidewin.db.schema import init_schema
from slidewin.db.streams import BUILTIN


@click.group(cls=SlidewinGroup)
def db() -> None:
    """Create, inspect and serve the store.

    \b
    Examples:
      slidewin db init --partitions 8
      slidewin db status --json
      slidewin db start && psql "$(slidewin db url)"
      slidewin db reset --yes
      slidewin db roles --login web --as reader
    """


@db.command("init")
@click.option(
    "--partitions",
    type=click.IntRange(1, MAX_PARTITIONS),
    default=None,
    help="Partitions of the raw table (default: keep the current count, or 8 on a new store). "
    "Partitions can be added later, never removed.",
)
@pass_app
def db_init(app: AppContext, partitions: int | None) -> None:
    """Create or upgrade the schema (idempotent).

    \b
    Example:
      slidewin db init --partitions 16
    """
    from slidewin.jobs.refs import migrate_job_refs

    with app.connect(autocommit=False) as conn:
        report = init_schema(conn, partitions)
        renamed = migrate_job_refs(conn)
    app.progress(
        f"slidewin schema version {report.version} ready at {redact(app.dsn)}: "
        f"{report.partitions} partitions"
        + (f", applied {', '.join(report.applied_migrations)}" if report.applied_migrations else "")
        + (f"; stored jobs {', '.join(renamed)} now name slidewin.jobs" if renamed else "")
    )


@db.command("roles")
@click.option("--prefix", default="slidewin", show_default=True,
              help="Name the roles <prefix>_owner, _ingest, _jobs and _reader.")
@click.option("--login", "login", default=None, metavar="NAME",
              help="Also create (or update) LOGIN role NAME, a member of the --as group.")
@click.option("--as", "group", type=click.Choice(["reader", "ingest", "jobs", "owner"]),
              default="reader", show_default=True, help="The group --login joins.")
@click.option("--password-env", default="SLIDEWIN_LOGIN_PASSWORD", show_default=True,
              metavar="VAR",
              help="The environment variable holding --login's password; unset: asked for "
                   "on the terminal (never echoed).")
@click.option("--no-password", is_flag=True,
              help="--login gets no password (peer or certificate authentication), or keeps "
                   "the one it has.")
@json_option("One JSON object on stdout: each role, its memberships and grants.")
@pass_app
def db_roles(app: AppContext, prefix: str, login: str | None, group: str, password_env: str,
             no_password: bool, as_json: bool) -> None:
    """Create the least-privilege roles (idempotent): NOLOGIN groups <prefix>_owner (owns the
    schema; runs db init), <prefix>_ingest (writes batches), <prefix>_jobs (the nibbles and
    retention jobs) and <prefix>_reader (SELECT and read-only functions: query, windows,
    serve). EXECUTE on every slidewin function is revoked from PUBLIC. Needs a superuser or
    CREATEROLE; the SQL is SELECT * FROM slidewin.create_roles('slidewin'). See docs/roles.md.

    \b
    Examples:
      slidewin db roles --json
      SLIDEWIN_LOGIN_PASSWORD=... slidewin db roles --login web --as reader
      slidewin db roles --login loader --as ingest   # asks for the password
    """
    from slidewin.db.roles import create_login, create_roles

    password = None if login is None or no_password else _login_password(password_env)
    with app.connect() as conn:
        report = create_roles(conn, prefix)
        if login is not None:
            report = replace(report, login=create_login(conn, login, group, password, prefix))
    if as_json:
        emit_json(report.as_json())
        return
    for role in report.roles:
        state = "created" if role.created else "exists"
        member = f", member of {', '.join(role.member_of)}" if role.member_of else ""
        click.echo(f"{role.name}: {state}{member}, {len(role.grants)} grants")
    if report.login is not None:
        click.echo(f"{report.login['role']}: login, member of {report.login['member_of']}, "
                   f"password {report.login['password']}")


def _login_password(variable: str) -> str:
    """The login's password: from ``variable``, else asked twice on a terminal, never echoed
    and never on a command line."""
    import os
    import sys

    from slidewin.db.errors import ConfigError

    if os.environ.get(variable):
        return os.environ[variable]
    if not sys.stdin.isatty():
        raise ConfigError(f"--login needs a password: set {variable} (or --password-env VAR), "
                          "run on a terminal to be asked, or pass --no-password")
    return str(click.prompt("password for the login role", hide_input=True,
                            confirmation_prompt=True, err=True))


@db.command("status")
@click.option("--stream", default=None,
              help="One declared stream alone (events: the built-in stream's partitions).")
@json_option("One JSON object on stdout.")
@pass_app
def db_status(app: AppContext, stream: str | None, as_json: bool) -> None:
    """Rows, event-time range, rollup seconds, sizes and dead tuples per partition; each
    declared stream; each join's watermark W, late records and results written.

    \b
    Example:
      slidewin db status --json | jq '.partitions[] | .rows'
    """
    with app.connect() as conn:
        if stream is not None and stream != BUILTIN:
            _stream_status(app, conn, stream, as_json)
            return
        answer = answer_store.store_status(conn, builtin_only=stream is not None)
    server = None if configured_dsn(app.dsn_option) else embedded.describe(app.data_dir)
    answer = replace(answer, embedded=server)
    head, parts, declared, joined = answer.head, answer.partitions, answer.streams, answer.joins
    for text in answer.warnings:  # stderr, whatever -q says: not progress
        click.echo(f"warning: {text}", err=True)
    if as_json:
        emit_json(answer.as_json())
        return
    if server is not None:
        click.echo(_embedded_line(server))
    click.echo(
        f"schema v{head['schema_version']}, {head['partition_count']} partitions, stream time "
        f"{head['stream_time'] or '-'}, {head['dead_letters']} dead letters, "
        f"{head['ingest_batches']} ingest batches"
    )
    click.echo(
        f"{'part':>4} {'rows':>10} {'oldest':>26} {'newest':>26} {'seconds':>8} "
        f"{'table_kB':>9} {'index_kB':>9} {'dead':>8}"
    )
    for p in parts:
        click.echo(
            f"{p.part:>4} {p.rows:>10} {_ts(p.oldest):>26} {_ts(p.newest):>26} "
            f"{p.rollup_seconds:>8} {p.table_bytes // 1024:>9} {p.index_bytes // 1024:>9} "
            f"{p.dead_tuples:>8}"
        )


    if declared:
        click.echo(STREAM_HEADER)
        for d in declared:
            click.echo(_stream_line(d))
    if joined:
        click.echo(JOIN_HEADER)
        for j in joined:
            click.echo(_join_line(j))


STREAM_HEADER = (f"{'stream':>20} {'rows':>10} {'oldest second':>26} {'newest second':>26} "
                 f"{'seconds':>8} {'dead':>7} {'kB':>9}")


def _stream_line(d: dict[str, Any]) -> str:
    return (f"{d['stream']:>20} {d['rows']:>10} {d['oldest'] or '-':>26} "
            f"{d['newest'] or '-':>26} {d['seconds']:>8} {d['dead_letters']:>7} "
            f"{d['bytes'] // 1024:>9}")


JOIN_HEADER = (f"{'join':>20} {'kind':>8} {'W':>26} {'late l/r':>13} {'pairs':>10} "
               f"{'left only':>10} {'right only':>10}")


def _join_line(j: dict[str, Any]) -> str:
    late = f"{j['late_left']}/{j['late_right']}"
    return (f"{j['join']:>20} {j['kind']:>8} {j['watermark'] or '-':>26} {late:>13} "
            f"{j['pairs']:>10} {j['left_only']:>10} {j['right_only']:>10}")


def _stream_status(app: AppContext, conn: Any, name: str, as_json: bool) -> None:
    found = answer_store.stream_status(conn, name)
    if as_json:
        emit_json(found)
        return
    history = found["history_s"]
    click.echo(STREAM_HEADER)
    click.echo(_stream_line(found))
    max_rows = found["max_rows"]
    click.echo(f"watermark {found['watermark'] or '-'}, retention deleted through "
               f"{found['retired_through'] or '-'}, history "
               + ("forever" if history is None else f"{history:g}s")
               + ("" if max_rows is None else f", max rows {max_rows}"))


def _embedded_line(server: dict) -> str:
    holders = " ".join(str(pid) for pid in server["holders"])
    kept = ", kept up by db start" if server["kept"] else ""
    return (
        f"embedded PostgreSQL pid {server['server_pid']} in {server['pgdata']}{kept}; "
        f"processes attached: {holders}"
    )


def _ts(value: object) -> str:
    return value.isoformat(timespec="milliseconds") if value is not None else "-"  # type: ignore[attr-defined]


@db.command("dead-letters")
@click.option("--stream", default=None, help="One stream's dead letters (events: the built-in's).")
@click.option("--reason", default=None, help="One reason's (malformed, late, expired, ...).")
@click.option("--before", type=int, default=None,
              help="Older than this id: the next_before of the previous page.")
@click.option("--limit", type=click.IntRange(1, answer_store.MAX_PAGE), default=20,
              show_default=True, help="At most this many.")
@json_option("One JSON object on stdout.")
@pass_app
def db_dead_letters(app: AppContext, stream: str | None, reason: str | None,
                    before: int | None, limit: int, as_json: bool) -> None:
    """The rejected input records, newest first, a page at a time: why each was refused and
    the record as it came (cut at 2,000 characters here; SQL has it whole).

    \b
    Examples:
      slidewin db dead-letters --limit 5
      slidewin db dead-letters --reason late --stream sensors --json
      slidewin db dead-letters --before 1200       # the page after the one ending at 1200
    SQL: SELECT * FROM slidewin.dead_letters ORDER BY id DESC LIMIT 20;
    """
    with app.connect() as conn:
        answer = answer_store.dead_letters(conn, stream=stream, reason=reason, before=before,
                                           limit=limit)
    if as_json:
        emit_json(answer.as_json())
        return
    if not answer.letters:
        click.echo("no dead letters")
    for d in answer.letters:
        raw = d["raw"] if len(d["raw"]) <= 60 else d["raw"][:57] + "..."
        click.echo(f"{d['id']:>8}  {_ts_text(d['received_at'])}  {d['stream']:<12} "
                   f"{d['reason']:<14} {d['source']}: {raw!r}")
    if answer.next_before is not None:
        click.echo(f"more: slidewin db dead-letters --before {answer.next_before}")


@db.command("batches")
@click.option("--stream", default=None, help="One stream's batches (events: the built-in's).")
@click.option("--before", default=None,
              help="The page after this one: the next_before of the previous page.")
@click.option("--limit", type=click.IntRange(1, answer_store.MAX_PAGE), default=20,
              show_default=True, help="At most this many.")
@json_option("One JSON object on stdout.")
@pass_app
def db_batches(app: AppContext, stream: str | None, before: str | None, limit: int,
               as_json: bool) -> None:
    """The ingest's committed batches, newest first: records read, accepted, duplicates and
    rejected, the newest event time and how long each took.

    \b
    Examples:
      slidewin db batches --limit 5
      slidewin db batches --stream sensors --json
    """
    with app.connect() as conn:
        answer = answer_store.batches(conn, stream=stream, before=before, limit=limit)
    if as_json:
        emit_json(answer.as_json())
        return
    if not answer.batches:
        click.echo("no batches")
    for b in answer.batches:
        took = "-" if b["seconds"] is None else f"{b['seconds'] * 1000:.0f} ms"
        click.echo(f"{_ts_text(b['committed_at'])}  {b['stream']:<12} #{b['batch_id']:<6} "
                   f"{b['rows_in']:>8} in {b['accepted']:>8} accepted {b['duplicates']:>6} dup "
                   f"{b['rejected']:>6} rejected  {took}")
    if answer.next_before is not None:
        click.echo(f"more: slidewin db batches --before {answer.next_before}")


def _ts_text(value: str | None) -> str:
    return "-" if value is None else value.replace("T", " ")[:23]


@db.command("start")
@pass_app
def db_start(app: AppContext) -> None:
    """Start the embedded PostgreSQL and keep it running (until ``slidewin db stop``).

    Other commands start it on demand and stop it when they finish; start it explicitly when you
    want to connect with psql in between.

    \b
    Example:
      slidewin db start && psql "$(slidewin db url)"
    """
    _refuse_with_dsn(app, "start")
    dsn = ensure_embedded(app.data_dir, keep=True)
    app.progress(f"embedded PostgreSQL running in {embedded.pgdata(app.data_dir)}")
    click.echo(dsn)


@db.command("stop")
@pass_app
def db_stop(app: AppContext) -> None:
    """Stop the embedded PostgreSQL (its data stays in the data directory).

    \b
    Example:
      slidewin db stop
    """
    _refuse_with_dsn(app, "stop")
    stopped = embedded.stop_embedded(app.data_dir)
    app.progress(f"embedded PostgreSQL {'stopped' if stopped else 'was not running'}")


@db.command("url")
@pass_app
def db_url(app: AppContext) -> None:
    """Print the connection string in use (password masked), e.g. for psql.

    \b
    Example:
      psql "$(slidewin db url)"
    """
    click.echo(redact(app.dsn))


def _refuse_with_dsn(app: AppContext, verb: str) -> None:
    if configured_dsn(app.dsn_option):
        from slidewin.db.errors import ConfigError

        raise ConfigError(
            f"db {verb} manages the embedded server, but a DSN is configured "
            "(--dsn / SLIDEWIN_DSN / DATABASE_URL); unset it to use the embedded server"
        )


@db.command("reset")
@click.option("--yes", is_flag=True,
              help="Really delete the data (nothing is deleted without it).")
@json_option("One JSON object on stdout: the tables emptied and the paths removed.")
@pass_app
def db_reset(app: AppContext, yes: bool, as_json: bool) -> None:
    """Start over: empty the store and forget what the ingest has read.

    Deletes every event, rollup, dead letter, batch marker, stream state, retention progress,
    session and job run; keeps the schema, retention policies, session window definitions and
    scheduled jobs. Removes the Spark checkpoints in the data dir and the files archived from
    their landing folders, so the next ingest starts afresh (files still in a landing folder
    are read then). Refused while anything else is connected to the database: stop the
    ingest, the scheduler and clients first.

    \b
    Example:
      slidewin db reset --yes
    """
    from slidewin.db.errors import ConfigError
    from slidewin.db.reset import other_sessions, reset_store
    from slidewin.ingest.checkpoints import forget

    if not yes:
        known = app.known_dsn
        raise ConfigError(
            f"db reset deletes all data in {redact(known) if known else 'the store'} and the "
            "ingest's checkpoints and archive; add --yes to do it"
        )
    with app.connect() as conn:
        others = other_sessions(conn)
        if others:
            raise ConfigError(
                f"db reset refused: {len(others)} other connection(s) to the database "
                f"({', '.join(s.describe() for s in others[:3])}); stop the ingest, the "
                "scheduler and clients first, then run slidewin db reset --yes again"
            )
        tables = reset_store(conn)
    removed = forget(app.data_dir)
    app.progress(
        f"store emptied ({len(tables)} tables); removed {len(removed)} checkpoint and archive "
        f"folder(s) in {app.data_dir}"
    )
    if as_json:
        emit_json({"tables": list(tables), "removed": [str(p) for p in removed]})
