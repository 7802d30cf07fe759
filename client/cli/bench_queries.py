"""``slidewin bench queries``: window queries from the rollups against the naive raw scan."""

from __future__ import annotations

import signal
from types import FrameType

import click

from slidewin.client.bench.queries import QueryBenchSpec, format_table, run_query_bench
from slidewin.client.cli.context import AppContext, emit_json, pass_app
from slidewin.client.cli.options import COUNT, bench_stream_option, json_option, keep_option
from slidewin.client.cli.root import SlidewinCommand
from slidewin.db.limits import MAX_CHUNK, MAX_PARTITIONS
from slidewin.db.signals import handling


@click.command("queries", cls=SlidewinCommand)
@click.option("--rows", type=COUNT, default="2M", show_default=True,
              help="Rows to load (e.g. 2M, 500k).")
@click.option("--seconds", type=click.IntRange(1, 86400), default=40, show_default=True,
              help="Event-time span the rows are spread over, evenly.")
@click.option("--partitions", type=click.IntRange(1, MAX_PARTITIONS), default=8, show_default=True,
              help="Partitions of the benchmark store.")
@click.option("--repeat", type=click.IntRange(1), default=200, show_default=True,
              help="Timed calls per rollup query and window.")
@click.option("--naive-repeat", type=click.IntRange(1), default=15, show_default=True,
              help="Timed raw-table scans per window (each reads up to every row).")
@click.option("--nibbles", type=click.IntRange(0), default=200, show_default=True,
              help="Timed nibbles, round-robin over the partitions, none reset in between.")
@click.option("--nibble-chunk", type=click.IntRange(1, MAX_CHUNK), default=1000,
              show_default=True, help="Rows each nibble deletes.")
@click.option("--copy-rows", type=COUNT, default="500k", show_default=True,
              help="Rows per COPY in the index-cost comparison (0 skips it).")
@click.option("--copy-rounds", type=click.IntRange(1), default=3, show_default=True,
              help="Rounds of the index-cost comparison (the median is reported).")
@bench_stream_option("wide: the same over the declared stream of 8 typed columns (its COPY, its "
                     "table's primary key and an index on its measure temp, its rollups and "
                     "nibbles) instead of the built-in stream.")
@keep_option()
@json_option()
@pass_app
def bench_queries(app: AppContext, as_json: bool, **options: object) -> None:
    """Load a fresh benchmark database and time window queries, max, nibbles and COPY.

    The data goes into a new database slidewin_bench_<random> on the same server (dropped at the
    end unless --keep); the store's own data is never touched. It needs a role that may create
    databases. Figures are client-side p50/p99 over one warm connection. --stream wide measures
    the same over a declared stream.

    \b
    Examples:
      slidewin bench queries --json
      slidewin bench queries --stream wide --json
      slidewin --dsn postgresql://postgres@127.0.0.1/postgres bench queries --rows 500k
      slidewin bench queries --rows 20k --seconds 4 --copy-rows 0 --repeat 20
    """
    app.check_database()
    spec = QueryBenchSpec(**options)  # type: ignore[arg-type]
    # SIGTERM unwinds like Ctrl-C, so the benchmark database is dropped either way
    with handling(_interrupt, (signal.SIGTERM,)):
        result = run_query_bench(app.dsn, spec, app.progress)
    app.human(format_table(result), as_json)
    if as_json:
        emit_json(result)


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt
