"""The root ``slidewin`` group and the error display every command shares.

Every failure ends in one ``error: ...`` line naming the cause and the fix, and a non-zero exit
code (``client.cli.failures`` words it); a command given ``--json`` still ends stdout with one JSON
object, ``{"error": ..., "exit_code": ...}`` plus the totals it has so far. Ctrl-C exits 130
quietly. ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import click

from client.cli.context import AppContext, emit_json
from client.cli.failures import INTERRUPTED_EXIT, describe

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
CLICK_EXITS = (click.ClickException, click.exceptions.Exit, click.Abort)


class SlidewinCommand(click.Command):
    """A command that tells the error display whether it was asked for --json."""

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

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CLICK_EXITS:
            raise  # usage errors, --help, ctx.exit: click prints and exits as usual
        except KeyboardInterrupt:
            if _debug(ctx):
                raise
            ctx.exit(INTERRUPTED_EXIT)
        except Exception as exc:
            if _debug(ctx):
                raise
            _fail(ctx, exc)


def _debug(ctx: click.Context) -> bool:
    app = ctx.find_object(AppContext)
    return app is not None and app.debug


def _fail(ctx: click.Context, exc: Exception) -> None:
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


@click.group(cls=SlidewinGroup, context_settings=CONTEXT_SETTINGS)
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
