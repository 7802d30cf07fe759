"""``slidewin bench ingest``: COPY limit vs end-to-end Spark ingest, freshness, driver memory."""

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
from slidewin.ingest.config import DEFAULT_MAX_FILES, DEFAULT_TRIGGER_TEXT, ROLLUPS


@click.command("ingest", cls=SlidewinCommand)
@click.option("--events", type=COUNT, default="4M", show_default=True,
              help="Events to generate for the throughput phases.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "json", "csv"]),
              default="parquet", show_default=True,
              help="Input file format (Parquet: no text parsing, the fastest).")
@click.option("--rows-per-file", type=COUNT, default="200k", show_default=True,
              help="Events per generated file.")
@click.option("--max-files-per-trigger", type=click.IntRange(1), default=DEFAULT_MAX_FILES,
              show_default=True,
              help="Files per micro-batch in the end-to-end run (as `slidewin ingest`).")
@click.option("--master", default="local[*]", show_default=True,
              help="Spark master URL, e.g. spark://127.0.0.1:7077 for a standalone cluster.")
@click.option("--rollups", type=click.Choice(ROLLUPS), default="driver", show_default=True,
              help="Who sums the rollups in the end-to-end and freshness runs (as "
              "`slidewin ingest --rollups`).")
@click.option("--freshness-seconds", type=DurationType(minimum=timedelta(seconds=5)),
              default="30s", show_default=True,
              help="Length of the rate-limited freshness run (one file per second), 5s to 10m.")
@click.option("--freshness-rate", type=COUNT, default="5k", show_default=True,
              help="Events per file (= per second) in the freshness run.")
@click.option("--trigger", type=DURATION, default=DEFAULT_TRIGGER_TEXT, show_default=True,
              help="Micro-batch interval of the freshness run.")
@bench_stream_option("wide: a declared stream of 8 typed columns against the built-in stream in "
                     "the same run, and three such streams at once against one at a time.")
@click.option("--baselines/--no-baselines", default=True, show_default=True,
              help="With --stream wide: also the COPY limits, the built-in stream and three "
              "streams at once; --no-baselines measures the wide stream's ingest alone (and its "
              "driver's peak memory), for a large input such as one 2 GB CSV file.")
@json_option()
@pass_app
def bench_ingest(
    app: AppContext,
    events: int,
    fmt: str,
    rows_per_file: int,
    max_files_per_trigger: int,
    master: str,
    rollups: str,
    freshness_seconds: timedelta,
    freshness_rate: int,
    trigger: timedelta,
    stream: str,
    baselines: bool,
    as_json: bool,
) -> None:
    """Measure the ingest: (a) raw COPY limit, (b) end-to-end events/s through the
    `slidewin ingest --once` code path, (c) freshness p95 (file appears -> its second in the
    rollups), (d) peak driver memory. Uses throw-away databases on the configured server.

    \b
    Examples:
      slidewin bench ingest --events 400k
      slidewin --dsn postgresql://postgres@127.0.0.1/postgres bench ingest --json
      slidewin bench ingest --stream wide --events 1M --json
      slidewin bench ingest --stream wide --format csv --events 20M --rows-per-file 20M \\
          --no-baselines --json
    """
    from slidewin.client.bench.ingest import BenchOptions, run_bench

    if not baselines and stream != "wide":
        raise click.BadParameter("only with --stream wide (the built-in stream's run always "
                                 "has its COPY limit)", param_hint="--no-baselines")
    if freshness_seconds > timedelta(minutes=10):
        raise click.BadParameter(
            f"{freshness_seconds} is over the maximum 10m; use a shorter run",
            param_hint="--freshness-seconds",
        )

    opts = BenchOptions(
        events=events, format=fmt, rows_per_file=rows_per_file,
        max_files_per_trigger=max_files_per_trigger, master=master, rollups=rollups,
        freshness_seconds=freshness_seconds.total_seconds(), freshness_rate=freshness_rate,
        trigger=trigger,
    )
    app.check_database()
    if stream == "wide":
        from slidewin.client.bench.streams import run_wide_bench

        report = run_wide_bench(app.dsn, opts, app.progress, baselines=baselines)
    else:
        report = run_bench(app.dsn, opts, app.progress)
    if as_json:
        emit_json(report)
    else:
        for key, value in sorted(report.items()):
            click.echo(f"{key:>24}: {value}")
