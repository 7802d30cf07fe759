"""``slidewin query``: windowed max and average from the rollups, and the SQL behind them."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from client.cli.context import AppContext, emit_json, pass_app
from client.cli.options import json_option
from client.cli.root import SlidewinGroup
from db import windows

SECONDS = click.option(
    "--seconds",
    type=click.IntRange(1, 86400),
    default=30,
    show_default=True,
    help="Window length: this many whole seconds ending with the current one.",
)
RELATIVE = click.option(
    "--relative-to",
    type=click.Choice(["now", "stream"]),
    default="now",
    show_default=True,
    help="End the window at the wall clock, or at the newest event time (stream time).",
)


@click.group(cls=SlidewinGroup)
def query() -> None:
    """Ask windowed questions (read from the per-second rollups, never the raw rows).

    \b
    Examples:
      slidewin query avg --seconds 30
      slidewin query max --seconds 5 --relative-to stream --json
      slidewin query sql --seconds 10
    """


def _answer(app: AppContext, what: str, seconds: int, relative_to: str, as_json: bool) -> None:
    with app.connect() as conn:
        end = datetime.now(UTC) if relative_to == "now" else windows.stream_time(conn)
        result = windows.summary(conn, seconds, end)
    value = result.avg if what == "avg" else result.vmax
    if as_json:
        emit_json({"what": what, "seconds": seconds, "relative_to": relative_to,
                   "end": end.isoformat() if end else None, "value": value, "rows": result.n})
    elif value is None:
        click.echo(f"{what} over the last {seconds} s: no data")
    else:
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        click.echo(f"{what} over the last {seconds} s: {shown} ({result.n} rows)")


@query.command("avg")
@SECONDS
@RELATIVE
@json_option("One JSON object on stdout.")
@pass_app
def query_avg(app: AppContext, seconds: int, relative_to: str, as_json: bool) -> None:
    """Average value over the last N seconds.

    \b
    Example:
      slidewin query avg --seconds 30 --relative-to stream
    """
    _answer(app, "avg", seconds, relative_to, as_json)


@query.command("max")
@SECONDS
@RELATIVE
@json_option("One JSON object on stdout.")
@pass_app
def query_max(app: AppContext, seconds: int, relative_to: str, as_json: bool) -> None:
    """Largest value over the last N seconds.

    \b
    Example:
      slidewin query max --seconds 5
    """
    _answer(app, "max", seconds, relative_to, as_json)


@query.command("sql")
@SECONDS
def query_sql(seconds: int) -> None:
    """Print the SQL a psql user types for the same answers.

    \b
    Example:
      slidewin query sql --seconds 30 | psql "$(slidewin db url)"
    """
    click.echo(windows.sql_for_psql(seconds), nl=False)
