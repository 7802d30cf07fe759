"""``slidewin bench joins``: the ingest of two declared streams with and without an interval
join, side by side; the join's exactness, reads and freshness; the same join in plain Spark
(client/bench/joins.py)."""

from __future__ import annotations

from datetime import timedelta

import click

from slidewin.client.cli.context import AppContext, emit_json, pass_app
from slidewin.client.cli.options import (
    COUNT,
    DURATION,
    DurationType,
    bench_stream_option,
    json_option,
)
from slidewin.client.cli.root import SlidewinCommand
from slidewin.ingest.config import DEFAULT_MAX_FILES, DEFAULT_TRIGGER_TEXT


@click.command("joins", cls=SlidewinCommand)
@click.option("--events", type=COUNT, default="1M", show_default=True,
              help="Records per stream (orders, and as many shipments).")
@click.option("--keys", type=COUNT, default="10k", show_default=True,
              help="Customers: the join's on-column.")
@click.option("--rate", type=COUNT, default="1k", show_default=True,
              help="Records per second of event time, per stream (with 10k keys and --within "
              "5s: one shipment per order on average).")
@click.option("--within", type=DurationType(minimum=timedelta(milliseconds=1)), default="5s",
              show_default=True, help="The join's window: shipments within this of the order.")
@click.option("--grace", type=DURATION, default="30s", show_default=True,
              help="The join's and the streams' grace; more than --disorder.")
@click.option("--type", "join_type", type=click.Choice(["inner", "left", "right", "full"]),
              default="left", show_default=True, help="The join's type.")
@click.option("--disorder", type=DURATION, default="10s", show_default=True,
              help="How late a late shipment may arrive (uniform up to this).")
@click.option("--disorder-share", type=click.FloatRange(0, 1), default=0.3, show_default=True,
              help="The share of shipments that arrive late.")
@click.option("--runs", type=click.IntRange(1, 9), default=3, show_default=True,
              help="Runs of each variant (without the join, with it, plain Spark), in "
              "alternating order; medians are reported.")
@click.option("--rows-per-file", type=COUNT, default="5k", show_default=True,
              help="Records per file (5 s of event time at the default rate).")
@click.option("--max-files-per-trigger", type=click.IntRange(1), default=DEFAULT_MAX_FILES,
              show_default=True, help="Files per micro-batch (as `slidewin ingest`).")
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
@click.option("--shows", type=click.IntRange(1, 100_000), default=200, show_default=True,
              help="Timed calls of slidewin.join_show over one minute.")
@click.option("--freshness-seconds", type=click.IntRange(0, 600), default=30,
              show_default=True,
              help="Length of the live run that measures pair freshness (0 skips it).")
@click.option("--freshness-rate", type=COUNT, default="1k", show_default=True,
              help="Records per file (= per second) per stream in the live run.")
@click.option("--trigger", type=DURATION, default=DEFAULT_TRIGGER_TEXT, show_default=True,
              help="Micro-batch interval of the live run.")
@click.option("--plain-spark/--no-plain-spark", default=True, show_default=True,
              help="Also run the same join written by hand in plain Spark.")
@bench_stream_option("The left stream: that benchmark stream's rows (events: the built-in "
                     "one; wide: 8 typed columns), keyed by the customers and joined on its key, "
                     "which the shipments hold too. Without it: the bench's own orders, as "
                     "always.", default=None)
@json_option("End with one JSON object on stdout.")
@pass_app
def bench_joins(
    app: AppContext, events: int, keys: int, rate: int, within: timedelta, grace: timedelta,
    join_type: str, disorder: timedelta, disorder_share: float, runs: int, rows_per_file: int,
    max_files_per_trigger: int, master: str, shows: int, freshness_seconds: int,
    freshness_rate: int, trigger: timedelta, plain_spark: bool, stream: str | None,
    as_json: bool,
) -> None:
    """Measure an interval join of two declared streams (orders and shipments, joined on the
    customer): the `slidewin ingest --once` path with and without the join over the same files
    (join_cost_pct), its stored results against the exact answer (results_match),
    slidewin.join_show over one minute, pair freshness on a live ingest, and the same join
    written by hand in plain Spark. Uses throw-away databases on the configured server.
    --stream joins a benchmark stream's rows (the built-in events, or wide) with the shipments
    instead of the orders.

    \b
    Examples:
      slidewin bench joins --events 50k --runs 1
      slidewin bench joins --json
      slidewin bench joins --type full --within 2s --json
      slidewin bench joins --stream wide --json
    """
    from slidewin.client.bench.joins import JoinBenchOptions, run_bench

    if keys > events:
        raise click.BadParameter(f"{keys:,} keys for {events:,} events; use at most as many "
                                 "keys as events", param_hint="--keys")
    if rate < 1 or rows_per_file < 1 or events < 1:
        raise click.BadParameter("--events, --rate and --rows-per-file must be 1 or more",
                                 param_hint="--rate")
    if disorder >= grace:
        raise click.BadParameter(
            f"--disorder {disorder} is not below --grace {grace}: late shipments would be late "
            "for the join; give a longer --grace or a shorter --disorder",
            param_hint="--disorder")
    app.check_database()
    opts = JoinBenchOptions(
        events=events, keys=keys, rate=rate, within=within, grace=grace, join_type=join_type,
        disorder_share=disorder_share, disorder=disorder, runs=runs, rows_per_file=rows_per_file,
        max_files_per_trigger=max_files_per_trigger, master=master, shows=shows,
        freshness_seconds=freshness_seconds, freshness_rate=freshness_rate, trigger=trigger,
        plain_spark=plain_spark, stream=stream,
    )
    report = run_bench(app.dsn, opts, app.progress)
    if as_json:
        emit_json(report)
    else:
        for key, value in sorted(report.items()):
            click.echo(f"{key:>34}: {value}")
