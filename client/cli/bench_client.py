"""``slidewin bench client``: the generator's unthrottled rate, and the watchers' cost on ingest."""

from __future__ import annotations

from typing import Any

import click

from slidewin.client.bench.client import BenchSettings, generator_rate, reporter_overhead, summarize
from slidewin.client.bench.stats import median
from slidewin.client.cli.context import AppContext, emit_json, pass_app
from slidewin.client.cli.options import COUNT, DURATION_MS, bench_stream_option, json_option
from slidewin.client.cli.root import SlidewinCommand
from slidewin.client.sim.generator import FORMATS


@click.command("client", cls=SlidewinCommand)
@click.option("--seconds", type=click.FloatRange(0.5, 60), default=3.0, show_default=True,
              help="How long each unthrottled generator run writes.")
@click.option("--repeats", type=click.IntRange(1, 20), default=3, show_default=True,
              help="Generator runs per format (the median is reported).")
@click.option("--events", type=COUNT, default="200k", show_default=True,
              help="Events ingested in each overhead run (the same files every run).")
@click.option("--ingest-repeats", type=click.IntRange(1, 10), default=3, show_default=True,
              help="Pairs of ingest runs (without / with the watchers).")
@click.option("--max-interval", type=DURATION_MS, default="10", show_default=True,
              help="The max tracker's poll interval while measuring (ms; the client's default).")
@click.option("--skip-ingest", is_flag=True,
              help="Only measure the generator (no Spark, no database needed).")
@bench_stream_option("wide: the generator of `slidewin client --stream` for the declared stream "
                     "of 8 typed columns, its files ingested into a store declaring it, and "
                     "that client's watchers for it (its reporter).")
@json_option()
@pass_app
def bench_client(app: AppContext, seconds: float, repeats: int, events: int,
                 ingest_repeats: int, max_interval: Any, skip_ingest: bool, stream: str,
                 as_json: bool) -> None:
    """The simulator's unthrottled event rate into a landing directory (target >= 500,000/s),
    and what the reporter, max tracker and freshness poller cost the ingest (target <= 5%):
    the same files ingested by `slidewin ingest --once` into a fresh database, with and
    without them. Each database is created on the --dsn server and dropped afterwards.

    \b
    Examples:
      slidewin bench client --json
      slidewin bench client --skip-ingest --seconds 5
      slidewin bench client --events 500k --ingest-repeats 3
      slidewin bench client --stream wide --json
    """
    if not skip_ingest:
        app.check_database()
    gen = {}
    for fmt in FORMATS:
        gen[fmt] = generator_rate(fmt, seconds, repeats, stream)
        app.progress(f"generator {fmt}: {', '.join(f'{r:,.0f}' for r in gen[fmt])} events/s")
    if skip_ingest:
        result = {"generator_events_per_s": round(median(gen["csv"])),
                  "generator_events_per_s_by_format": {
                      k: round(median(v)) for k, v in gen.items()}}
    else:
        settings = BenchSettings(seconds=seconds, repeats=repeats, events=events,
                                 ingest_repeats=ingest_repeats,
                                 max_interval_s=max_interval.total_seconds(), stream=stream)
        app.progress(f"ingesting {events} events {2 * ingest_repeats} times...")
        result = summarize(gen, reporter_overhead(app.dsn, settings, app.progress))
        result["max_interval_ms"] = round(settings.max_interval_s * 1000, 3)
    result["stream"] = stream
    if as_json:
        emit_json(result)
    else:
        for key, value in result.items():
            click.echo(f"{key}: {value}")
