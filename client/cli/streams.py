"""``slidewin streams``: declare, list, show, alter and drop the user's own streams (a thin
shell over ``db.streams``)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import click

from slidewin.client.answers import store as answer_store
from slidewin.client.answers.store import stream_json as _json
from slidewin.client.cli.context import AppContext, emit_json, pass_app
from slidewin.client.cli.options import COUNT, DURATION, json_option
from slidewin.client.cli.root import SlidewinGroup
from slidewin.db import streams
from slidewin.db.errors import ConfigError
from slidewin.db.streams import Column, Stream
from slidewin.db.units import parse_count


def _pair(text: str, option: str) -> tuple[str, str]:
    """``name:type`` (the type may hold spaces and commas: ``amount:numeric(12,2)``)."""
    name, sep, type_ = text.partition(":")
    if not sep or not name or not type_:
        raise ConfigError(f"{option} {text!r}: write NAME:TYPE, e.g. {option} temp:double")
    return name.strip(), type_.strip()


def _history(value: str | None) -> timedelta | None:
    if value is None or value.strip().lower() == "forever":
        return None
    return DURATION.convert(value, None, None)


def _max_rows(value: str) -> int | None:
    """``streams alter --max-rows``: a row count (1M), or ``none`` for no row limit."""
    if value.strip().lower() == "none":
        return None
    return parse_count(value, name="--max-rows")


@click.group("streams", cls=SlidewinGroup)
def streams_group() -> None:
    """Your own streams: named, typed columns, one or more measures.

    Each declared stream is a table, slidewin_streams.<name>, hash-partitioned on its key, with
    exact per-second rollups in slidewin_rollups.<name>; its files land in <landing>/<name>/.
    The built-in stream `events` (uuid, val, ts) stays as it is.

    \b
    Examples:
      slidewin streams add sensors --key sensor:text --time ts \\
          --column temp:double --column site:text --measure temp --history 1h
      slidewin streams add orders --infer sample.jsonl --yes
      slidewin streams list
      slidewin streams show sensors
      slidewin streams alter sensors --add-column humidity:double --as-measure
      slidewin streams drop sensors --yes
    """


@streams_group.command("add")
@click.argument("name")
@click.option("--key", "key_", default=None,
              help="The key column as NAME[:TYPE] (text, bigint or integer; default text).")
@click.option("--time", "time_", default=None,
              help="The event-time column (timestamptz).")
@click.option("--column", "columns", multiple=True,
              help="A column as NAME:TYPE (text, bigint, integer, double, numeric(p,s), boolean, "
                   "timestamptz, jsonb); repeat for each.")
@click.option("--required", multiple=True,
              help="A column every record must have (key and time always are); repeatable.")
@click.option("--measure", "measures", multiple=True,
              help="A numeric column the rollups and windows aggregate; repeatable.")
@click.option("--keep-extra", is_flag=True,
              help="Keep fields the stream does not declare in an attrs jsonb column.")
@click.option("--partitions", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Hash partitions of the stream's table.")
@click.option("--history", default=None,
              help="How long retention keeps events (30m, 1h, 7d, or forever; default forever).")
@click.option("--grace", type=DURATION, default="0s", show_default=True,
              help="How late an event may arrive behind the stream's newest and still count.")
@click.option("--max-rows", type=COUNT, default=None,
              help="Row limit: retention keeps the stream's newest N rows (1M), besides "
                   "--history; both hold when both are given (default: no row limit).")
@click.option("--table", "is_table", is_flag=True,
              help="A table: versioned rows by key (each row the key's version from its time "
                   "on), every version kept -- no history (leave out --history), never expired "
                   "by retention. An as-of join with it on the right is final once its left "
                   "record is.")
@click.option("--infer", "infer_from", type=click.Path(dir_okay=False, path_type=Path),
              default=None,
              help="Guess the columns from a sample JSONL, CSV or Parquet file; prints the "
                   "declaration and asks (--yes accepts it).")
@click.option("--yes", is_flag=True, help="With --infer: create what was inferred, no question.")
@json_option("One JSON object on stdout: the stream as declared.")
@pass_app
def add_cmd(app: AppContext, name: str, key_: str | None, time_: str | None,
            columns: tuple[str, ...], required: tuple[str, ...], measures: tuple[str, ...],
            keep_extra: bool, partitions: int, history: str | None, grace: timedelta,
            max_rows: int | None, is_table: bool, infer_from: Path | None, yes: bool,
            as_json: bool) -> None:
    """Declare a stream and create its tables.

    \b
    Examples:
      slidewin streams add sensors --key sensor --time ts --column temp:double --measure temp
      slidewin streams add orders --key customer:bigint --time ordered_at \\
          --column amount:numeric(12,2) --column note:text --measure amount --keep-extra
      slidewin streams add views --infer views.jsonl --yes
      slidewin streams add prices --key product --time valid_from --column price:double --table
      slidewin streams add clicks --key user --time ts --history 1d --max-rows 10M
    SQL: SELECT slidewin.stream_define('sensors', 'sensor', 'ts',
           '[{"name": "sensor", "type": "text"}, {"name": "temp", "type": "double"}]',
           '{temp}');
    """
    key_name, key_type = (_pair(key_, "--key") if key_ and ":" in key_ else (key_, "text"))
    if infer_from is not None:
        from slidewin.db.stream_infer import infer

        if columns or measures:
            raise ConfigError("--infer guesses the columns and measures; leave out --column and "
                              "--measure (or declare without --infer)")
        guess = infer(infer_from, key_name, time_)
        cols = list(guess.columns)
        key_name, time_, measures = guess.key, guess.time, guess.measures
        app.human(_declaration(name, key_name, time_, cols, measures), as_json)
        if not yes and not click.confirm("create this stream?", default=False, err=True):
            app.progress("nothing created (run again with --yes to accept the declaration)")
            raise SystemExit(1)
    else:
        if key_name is None or time_ is None:
            raise ConfigError("streams add needs --key and --time (or --infer FILE)")
        cols = [Column(key_name, key_type)]
        cols += [Column(*_pair(c, "--column")) for c in columns]
    if required:
        known = {c.name for c in cols}
        unknown = [r for r in required if r not in known]
        if unknown:
            raise ConfigError(f"--required {unknown[0]}: not a declared column")
        cols = [Column(c.name, c.type, c.required or c.name in required) for c in cols]
    with app.connect(autocommit=False) as conn:
        stream = streams.define(
            conn, name, key=key_name, time=time_, columns=cols, measures=measures,
            keep_extra=keep_extra, partitions=partitions, history=_history(history), grace=grace,
            is_table=is_table, max_rows=max_rows,
        )
    _report(app, stream, as_json, f"stream {stream.name} declared: table slidewin_streams."
                                  f"{stream.name}, files land in <landing>/{stream.name}/")


def _declaration(name: str, key: str, time: str, cols: list[Column],
                 measures: tuple[str, ...]) -> str:
    parts = [f"slidewin streams add {name} --key {key}:{_type(cols, key)} --time {time}"]
    parts += [f"--column {c.name}:{c.type.replace('double precision', 'double')}" for c in cols
              if c.name not in (key, time)]
    parts += [f"--measure {m}" for m in measures]
    return " \\\n    ".join(parts)


def _type(cols: list[Column], name: str) -> str:
    return next(c.type for c in cols if c.name == name)


@streams_group.command("list")
@json_option("One JSON object on stdout.")
@pass_app
def list_cmd(app: AppContext, as_json: bool) -> None:
    """Every stream: key, time, measures, rows held, history.

    \b
    Example:
      slidewin streams list --json
    """
    with app.connect() as conn:
        answer = answer_store.stream_list(conn)
    found, rows = answer.found, answer.rows
    if as_json:
        emit_json(answer.as_json())
        return
    click.echo(f"{'stream':20}  {'key':16}  {'time':16}  {'measures':24}  {'rows':>10}  history")
    for s in found:
        held = "-" if rows[s.name] is None else str(rows[s.name])
        click.echo(f"{s.name:20}  {s.key:16}  {s.time:16}  {','.join(s.measures) or '-':24}  "
                   f"{held:>10}  {_hist(s)}")


@streams_group.command("show")
@click.argument("name")
@json_option("One JSON object on stdout.")
@pass_app
def show_cmd(app: AppContext, name: str, as_json: bool) -> None:
    """One declared stream: its columns, measures, tables and the SQL to read it.

    \b
    Example:
      slidewin streams show sensors
    """
    with app.connect() as conn:
        answer = answer_store.stream_show(conn, name)
    if as_json:
        emit_json(answer.as_json())
        return
    click.echo(_describe(answer.stream, answer.rows))


@streams_group.command("alter")
@click.argument("name")
@click.option("--add-column", "add_columns", multiple=True,
              help="Add a nullable column NAME:TYPE (no table rewrite); repeatable.")
@click.option("--as-measure", is_flag=True, help="The added columns are measures too.")
@click.option("--measure", "measures", multiple=True,
              help="Make an existing numeric column a measure (its seconds are aggregated again).")
@click.option("--history", default=None, help="A new history (30m, 1h, 7d or forever).")
@click.option("--grace", type=DURATION, default=None, help="A new grace.")
@click.option("--max-rows", "max_rows", default=None,
              help="A new row limit (1M), or none for no row limit.")
@json_option("One JSON object on stdout: the stream as it now is.")
@pass_app
def alter_cmd(app: AppContext, name: str, add_columns: tuple[str, ...], as_measure: bool,
              measures: tuple[str, ...], history: str | None, grace: timedelta | None,
              max_rows: str | None, as_json: bool) -> None:
    """Add columns or measures, or change the history, grace or row limit, of a declared
    stream.

    \b
    Examples:
      slidewin streams alter sensors --add-column humidity:double --as-measure
      slidewin streams alter sensors --measure pressure
      slidewin streams alter sensors --history 2h --grace 5s
      slidewin streams alter sensors --max-rows 5M
      slidewin streams alter sensors --max-rows none
    """
    if not (add_columns or measures or history or grace is not None or max_rows is not None):
        raise ConfigError("streams alter: nothing to change; give --add-column, --measure, "
                          "--history, --grace or --max-rows")
    new_rows = _max_rows(max_rows) if max_rows is not None else None
    with app.connect(autocommit=False) as conn:
        stream = streams.get_stream(conn, name)
        for text in add_columns:
            column, type_ = _pair(text, "--add-column")
            stream = streams.add_column(conn, name, column, type_, measure=as_measure)
        for measure in measures:
            stream = streams.add_measure(conn, name, measure)
        if history is not None or grace is not None or max_rows is not None:
            new_history = _history(history) if history is not None else None
            stream = streams.set_retention(
                conn, name, history=new_history, grace=grace,
                forever=history is not None and new_history is None, max_rows=new_rows,
                no_row_limit=max_rows is not None and new_rows is None)
    _report(app, stream, as_json, f"stream {stream.name} altered")


@streams_group.command("drop")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Really drop it: its rows cannot be brought back.")
@json_option("One JSON object on stdout.")
@pass_app
def drop_cmd(app: AppContext, name: str, yes: bool, as_json: bool) -> None:
    """Remove a declared stream: its table, rollups, state and dead letters, together.
    Refused while a join reads it or a session window keeps its sessions: the error names
    them; drop those first (slidewin joins drop NAME --yes, slidewin windows remove NAME).

    \b
    Example:
      slidewin streams drop sensors --yes
    """
    if not yes:
        raise ConfigError(f"streams drop {name} deletes its table and every row in it; "
                          "add --yes to go on")
    with app.connect(autocommit=False) as conn:
        rows = streams.drop(conn, name)
    if as_json:
        emit_json({"dropped": name, "rows": rows})
    else:
        click.echo(f"stream {name} dropped with its {rows} rows")


def _report(app: AppContext, stream: Stream, as_json: bool, line: str) -> None:
    if as_json:
        emit_json(_json(stream))
    else:
        click.echo(line)
        click.echo(_describe(stream, None))


def _hist(s: Stream) -> str:
    if s.is_table:
        return "forever (a table)"
    kept = "forever" if s.history is None else f"{s.history.total_seconds():g}s"
    return kept if s.max_rows is None else f"{kept}, max {s.max_rows} rows"


def _describe(s: Stream, rows: int | None) -> str:
    lines = [f"{'table' if s.is_table else 'stream'} {s.name}: key {s.key}, time {s.time}, "
             "measures "
             f"{', '.join(s.measures) or '-'}, history {_hist(s)}, grace "
             f"{s.grace.total_seconds():g}s, {s.partitions} partitions"
             + ("" if rows is None else f", {rows} rows")]
    if s.is_table:
        lines.append(f"  a table: each row is its {s.key}'s version from its {s.time} on; every "
                     "version is kept (no history, no retention)")
    for c in s.columns:
        marks = [m for m, on in (("key", c.name == s.key), ("time", c.name == s.time),
                                 ("measure", c.name in s.measures),
                                 ("required", c.required)) if on]
        lines.append(f"  {c.name:24} {c.type:20} {' '.join(marks)}")
    if s.keep_extra:
        lines.append(f"  {'attrs':24} {'jsonb':20} fields not declared")
    lines.append(f"  table slidewin_streams.{s.name}, rollups slidewin_rollups.{s.name}")
    return "\n".join(lines)
