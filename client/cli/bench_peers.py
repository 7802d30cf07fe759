"""``slidewin bench peers``: slidewin's ingest against the same ingest written by hand in plain
PySpark Structured Streaming (client/bench/peers.py)."""

from __future__ import annotations

from pathlib import Path

import click

from slidewin.client.cli.context import AppContext, emit_json, pass_app
from slidewin.client.cli.options import COUNT, bench_stream_option, json_option, keep_option
from slidewin.client.cli.root import SlidewinCommand
from slidewin.ingest.config import DEFAULT_MAX_FILES


@click.command("peers", cls=SlidewinCommand)
@click.option("--events", type=COUNT, default="2M", show_default=True,
              help="Events to generate (10,000 per second of event time).")
@click.option("--runs", type=click.IntRange(1, 9), default=3, show_default=True,
              help="Timed runs of each side, alternately (slidewin first); medians reported.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "json", "csv"]),
              default="parquet", show_default=True, help="Landing file format, for both.")
@click.option("--rows-per-file", type=COUNT, default="200k", show_default=True,
              help="Events per landing file.")
@click.option("--max-files-per-trigger", type=click.IntRange(1), default=DEFAULT_MAX_FILES,
              show_default=True, help="Files per micro-batch, for both (as `slidewin ingest`).")
@click.option("--master", default="local[2]", show_default=True,
              help="Spark master URL, for both.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the generated files go (a new folder inside; default: the temp "
              "directory). It needs room for about twice the generated files.")
@bench_stream_option("wide: the declared stream of 8 typed columns, both sides storing its rows "
                     "and per-second count/sum/min/max of its measure temp (a double: its sums "
                     "match to 1e-9, slidewin's being exact).")
@keep_option()
@json_option()
@pass_app
def bench_peers(
    app: AppContext, events: int, runs: int, fmt: str, rows_per_file: int,
    max_files_per_trigger: int, master: str, work_dir: Path | None, stream: str, keep: bool,
    as_json: bool,
) -> None:
    """Measure slidewin's ingest against plain PySpark Structured Streaming doing the same job
    by hand: the same landing files read with readStream, foreachBatch COPYing the raw rows into
    PostgreSQL and upserting per-second count/sum/min/max, exactly once through a batch-id table.
    Both share one Spark session; each gets a warm-up run, then they run alternately.
    speedup_vs_plain_spark = the peer's median seconds / slidewin's; results_match: the peer's
    per-second table and row count equal slidewin's rollups and row count. Uses throw-away
    databases on the configured server (--keep keeps the last run's and the generated files).

    \b
    Examples:
      slidewin bench peers --json
      slidewin bench peers --events 500k --runs 1
      slidewin bench peers --events 1M --master local[*] --json
      slidewin bench peers --stream wide --json
    """
    from slidewin.client.bench.peers import PeersOptions, run_bench

    if work_dir is not None and not work_dir.is_dir():
        raise click.BadParameter(f"{work_dir} is not a folder; create it or give another",
                                 param_hint="--work-dir")
    app.check_database()
    opts = PeersOptions(events=events, runs=runs, format=fmt, rows_per_file=rows_per_file,
                        max_files_per_trigger=max_files_per_trigger, master=master,
                        work_dir=work_dir, keep=keep, stream=stream)
    report = run_bench(app.dsn, opts, app.progress)
    if as_json:
        emit_json(report)
    else:
        for key, value in sorted(report.items()):
            click.echo(f"{key:>24}: {value}")
