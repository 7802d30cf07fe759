"""``slidewin query``: windowed max and average from the rollups, and the SQL behind them."""

from __future__ import annotations

from typing import Any

import click

from slidewin.client.answers import windows as answers
from slidewin.client.cli.context import AppContext, emit_json, pass_app
from slidewin.client.cli.options import json_option
from slidewin.client.cli.root import SlidewinGroup
from slidewin.db import windows
from slidewin.db.streams import BUILTIN

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

STREAM = click.option("--stream", default=BUILTIN, show_default=True,
                      help="The stream: events (built in) or a declared one.")
MEASURE = click.option("--measure", default=None,
                       help="The declared stream's measure (needed when it has more than one).")


def _options(f: Any) -> Any:
    for option in reversed([SECONDS, RELATIVE, STREAM, MEASURE,
                            json_option("One JSON object on stdout.")]):
        f = option(f)
    return f


@click.group(cls=SlidewinGroup)
def query() -> None:
    """Ask windowed questions (read from the per-second rollups, never the raw rows).

    \b
    Examples:
      slidewin query avg --seconds 30
      slidewin query max --seconds 5 --relative-to stream --json
      slidewin query sql --seconds 10
      slidewin query avg --stream sensors --measure temp --seconds 60
    """


def _answer(app: AppContext, what: str, seconds: int, relative_to: str, as_json: bool,
            stream: str = BUILTIN, measure: str | None = None) -> None:
    with app.connect() as conn:
        answer = answers.query(conn, what, seconds, relative_to, stream, measure)
    if as_json:
        emit_json(answer.as_json())
    elif answer.value is None:
        click.echo(f"{what} over the last {seconds} s: no data")
    else:
        value = answer.value
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        click.echo(f"{what} over the last {seconds} s: {shown} ({answer.rows} rows)")


QUESTIONS = (
    ("avg", "Average value over the last N seconds.", "slidewin query avg --seconds 30 "
     "--relative-to stream"),
    ("max", "Largest value over the last N seconds.", "slidewin query max --seconds 5"),
    ("min", "Smallest value over the last N seconds.",
     "slidewin query min --seconds 60 --stream sensors"),
    ("sum", "Exact sum over the last N seconds.",
     "slidewin query sum --seconds 60 --stream orders --measure amount"),
    ("count", "How many values over the last N seconds.", "slidewin query count --seconds 60"),
)


def _question(what: str, summary: str, example: str) -> None:
    """One ``slidewin query WHAT`` command: the same options, one figure of the summary."""

    def command(app: AppContext, seconds: int, relative_to: str, stream: str,
                measure: str | None, as_json: bool) -> None:
        _answer(app, what, seconds, relative_to, as_json, stream, measure)

    command.__doc__ = f"{summary}\n\n    \b\n    Example:\n      {example}\n    "
    query.command(what)(_options(pass_app(command)))


for _what, _summary, _example in QUESTIONS:
    _question(_what, _summary, _example)


@query.command("sql")
@SECONDS
def query_sql(seconds: int) -> None:
    """Print the SQL a psql user types for the same answers.

    \b
    Example:
      slidewin query sql --seconds 30 | psql "$(slidewin db url)"
    """
    click.echo(windows.sql_for_psql(seconds), nl=False)
