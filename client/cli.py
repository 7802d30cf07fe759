"""The ``slidewin`` command. Each ``client/cli_*.py`` module contributes its commands.

Errors a user can fix (SlidewinError) print one line and exit non-zero without a traceback;
``--debug`` shows the traceback.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import click

import client
from client.context import AppContext
from db.errors import SlidewinError

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class SlidewinGroup(click.Group):
    """A group whose errors are one clean line (unless --debug)."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except SlidewinError as exc:
            app = ctx.find_object(AppContext)
            if app is not None and app.debug:
                raise
            click.echo(f"error: {exc}", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=SlidewinGroup, context_settings=CONTEXT_SETTINGS)
@click.option(
    "--dsn",
    envvar="SLIDEWIN_DSN",
    show_envvar=True,
    help="PostgreSQL connection string (else DATABASE_URL, else the embedded server).",
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


def _load_commands() -> None:
    """Import every ``client.cli_*`` module; each registers its commands on ``cli``."""
    found = pkgutil.iter_modules(client.__path__)
    names = sorted(m.name for m in found if m.name.startswith("cli_"))
    if "cli_bench" in names:  # bench is the group other modules add subcommands to
        names.insert(0, names.pop(names.index("cli_bench")))
    for name in names:
        importlib.import_module(f"client.{name}")


def main() -> None:
    cli(prog_name="slidewin")


_load_commands()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
