"""The root ``slidewin`` group and the error display every command shares.

Every failure ends in one ``error: ...`` line naming the cause and the fix, and a non-zero exit
code (``client.cli.failures`` words it); a command given ``--json`` still ends stdout with one JSON
object, ``{"error": ..., "exit_code": ...}`` plus the totals it has so far. Ctrl-C exits 130
quietly. ``--debug`` shows the traceback instead. Usage errors -- a bad value, an unknown
option, a missing argument -- are one such line too (``client.cli.usage``), exit code 2.

The root group imports its commands on first use (``LazyGroup``): ``slidewin --help`` and
``--version`` load click and this package only, not pandas, Spark or the database driver.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Mapping
from typing import Any

import click

from slidewin.client.cli.context import AppContext, emit_json
from slidewin.client.cli.interrupts import INTERRUPTED_EXIT
from slidewin.client.cli.usage import ARGS_KEY, command_path, one_line

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
CLICK_EXITS = (click.ClickException, click.exceptions.Exit, click.Abort)


class SlidewinCommand(click.Command):
    """A command that tells the error display whether it was asked for --json, and whose
    usage errors are one line."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        given = list(args)  # click's parser consumes the list it is handed
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            raise one_line(exc, given, self, command_path(info_name, parent)) from exc

    def invoke(self, ctx: click.Context) -> Any:
        app = ctx.find_object(AppContext)
        if app is not None:
            app.as_json = bool(ctx.params.get("as_json"))
        return super().invoke(ctx)


class SlidewinGroup(click.Group):
    """A group whose errors are one clean line (unless --debug); its commands and subgroups
    are SlidewinCommand and SlidewinGroup."""

    command_class = SlidewinCommand
    group_class = type  # subgroups are of this class too

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        given = list(args)  # click's parser consumes the list it is handed
        try:
            ctx = super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:  # the group's own options (``slidewin --bogus``)
            raise one_line(exc, given, self, command_path(info_name, parent)) from exc
        if parent is None:  # every context shares the root's meta: the usage errors' --json
            ctx.meta[ARGS_KEY] = given
        return ctx

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # a subcommand's parser or a BadParameter raised later
            raise one_line(exc, ctx.meta.get(ARGS_KEY, ())) from exc
        except CLICK_EXITS:
            raise  # --help, ctx.exit, other click errors: click prints and exits as usual
        except KeyboardInterrupt:
            if _debug(ctx):
                raise
            _interrupted(ctx)
        except Exception as exc:
            if _debug(ctx):
                raise
            _fail(ctx, exc)


class LazyGroup(SlidewinGroup):
    """A group whose commands are imported when first used, listed meanwhile from a table of
    ``name -> ("module:attribute", short help)``.

    The short help shown by ``--help`` comes from the table, loaded or not, so the listing never
    depends on what happened to be imported; a loaded command takes it as its ``short_help``.
    """

    def __init__(
        self, *args: Any, lazy_commands: Mapping[str, tuple[str, str]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            self.add_command(self._load(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def _load(self, name: str) -> click.Command:
        target, short_help = self.lazy_commands[name]
        module_name, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is a {type(command).__name__}, not a click command")
        command.short_help = short_help
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, self._short_help(ctx, name)) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def _short_help(self, ctx: click.Context, name: str) -> str:
        if name in self.lazy_commands:
            return self.lazy_commands[name][1]
        command = self.get_command(ctx, name)
        return command.get_short_help_str() if command is not None else ""


def _debug(ctx: click.Context) -> bool:
    app = ctx.find_object(AppContext)
    return app is not None and app.debug


def _interrupted(ctx: click.Context) -> None:
    """Ctrl-C (KeyboardInterrupt): exit 130 quietly; a --json command still ends stdout with
    its JSON object."""
    app = ctx.find_object(AppContext)
    if app is not None and app.as_json:
        emit_json({"error": "interrupted (Ctrl-C)", "exit_code": INTERRUPTED_EXIT,
                   **_totals(app)})
    ctx.exit(INTERRUPTED_EXIT)


def _fail(ctx: click.Context, exc: Exception) -> None:
    from slidewin.client.cli.failures import (
        describe,  # psycopg and the database layer: on failure only
    )

    app = ctx.find_object(AppContext) or AppContext()
    message, code = describe(exc, app.known_dsn)
    if app.as_json:
        emit_json({"error": message, "exit_code": code, **_totals(app)})
    click.echo(f"error: {message}", err=True)
    ctx.exit(code)


def _totals(app: AppContext) -> dict[str, Any]:
    """The failing command's totals so far; none when even they cannot be read."""
    try:
        return app.error_totals() if app.error_totals is not None else {}
    except Exception:
        return {}


# The root's commands: imported on first use, listed by --help from here (keep each short help
# to one line; tests/test_cli_promises.py checks every entry loads the command it names).
COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("slidewin.client.cli.bench:bench", "Measure slidewin on this machine (benchmarks)."),
    "client": ("slidewin.client.cli.client:client_command",
               "Write random events and report on the window (VoltDB's client)."),
    "db": ("slidewin.client.cli.db:db", "Create, inspect and serve the store."),
    "demo": ("slidewin.client.cli.demo:demo_command",
             "Run everything at once (store, ingest, retention, client)."),
    "ingest": ("slidewin.client.cli.ingest:ingest_command",
               "Stream landing files into the store, exactly once (Spark)."),
    "jobs": ("slidewin.client.cli.jobs:jobs", "Scheduled retention, view refresh and stats."),
    "joins": ("slidewin.client.cli.joins:joins_group",
              "Join two declared streams: in a time window, by rows, as of."),
    "query": ("slidewin.client.cli.query:query",
              "Ask windowed questions (max, avg) of the rollups."),
    "serve": ("slidewin.client.cli.serve:serve_command",
              "A live dashboard, JSON API and Prometheus metrics of the store."),
    "streams": ("slidewin.client.cli.streams:streams_group",
                "Declare your own streams: named, typed columns and measures."),
    "windows": ("slidewin.client.cli.windows:windows_group",
                "Tumbling, hopping, sliding, count and session windows."),
}


@click.group(cls=LazyGroup, lazy_commands=COMMANDS, context_settings=CONTEXT_SETTINGS)
@click.option(
    "--dsn",
    envvar="SLIDEWIN_DSN",
    show_envvar=True,
    help="PostgreSQL connection string (else DATABASE_URL, else the embedded server). With a "
    "password, prefer SLIDEWIN_DSN: `ps` shows a command line to every user.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    envvar="SLIDEWIN_DATA_DIR",
    show_envvar=True,
    help="Where the embedded server and checkpoints live (default: the per-user data folder).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.option("-q", "--quiet", is_flag=True, help="No progress messages on stderr.")
@click.version_option(package_name="slidewin")
@click.pass_context
def cli(
    ctx: click.Context, dsn: str | None, data_dir: str | None, debug: bool, quiet: bool
) -> None:
    """slidewin: a sliding window of timestamped values in PostgreSQL.

    \b
    Examples:
      slidewin demo --duration 60         # everything at once, embedded PostgreSQL
      slidewin db init                    # create or upgrade the schema
      slidewin query avg --seconds 30     # windowed average from the rollups
      slidewin --dsn postgresql://127.0.0.1/test db status
    """
    ctx.obj = AppContext(dsn_option=dsn, data_dir_option=data_dir, debug=debug, quiet=quiet)
    if not debug:
        # py4j logs a dying JVM's socket errors with their tracebacks, partly on its own
        # loggers and partly on the root logger (``logging.exception`` in java_gateway, which
        # also gives the root logger a stderr handler); the failure is one error line
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
        logging.getLogger().addFilter(_not_from_py4j)


def _not_from_py4j(record: logging.LogRecord) -> bool:
    """Drop root-logger records that py4j's modules log (keep everything else)."""
    return f"{os.sep}py4j{os.sep}" not in record.pathname
