"""``slidewin bench serve``: what the web server costs a live ingest; its API latency and
memory (``client.bench.serve``)."""

from __future__ import annotations

from datetime import timedelta

import click

from slidewin.client.bench.serve import ServeSettings, run
from slidewin.client.cli.context import AppContext, emit_json, pass_app
from slidewin.client.cli.options import COUNT, DURATION, bench_stream_option, json_option
from slidewin.client.cli.root import SlidewinCommand


@click.command("serve", cls=SlidewinCommand)
@click.option("--rate", type=COUNT, default="15k", show_default=True,
              help="Events per second the generator offers the live ingest.")
@click.option("--duration", type=DURATION, default="60s", show_default=True,
              help="The measured window of each phase (after the ingest's first batches).")
@click.option("--clients", type=click.IntRange(0, 1000), default=50, show_default=True,
              help="Browsers following the live updates (server-sent events).")
@click.option("--requests", type=click.FloatRange(0, 5000), default=200, show_default=True,
              help="API requests per second, over a mix of routes.")
@click.option("--repeats", type=click.IntRange(1, 10), default=1, show_default=True,
              help="Pairs of phases (without / with the server), the order alternating.")
@bench_stream_option("wide: the declared stream of 8 typed columns, written by the generator of "
                     "`slidewin client --stream`; the browsers and API requests ask for it.")
@json_option()
@pass_app
def bench_serve(app: AppContext, rate: int, duration: timedelta, clients: int, requests: float,
                repeats: int, stream: str, as_json: bool) -> None:
    """What `slidewin serve` costs a live ingest (target <= 5%), and how it answers: the
    generator offers --rate events/s to `slidewin ingest` on a fresh database, once alone and
    once with the server followed by --clients browsers and asked --requests API requests per
    second; reports the ingest's events/s both ways, the server's CPU beside the ingest's, API
    p50/p99 latency, events sent to the browsers and the server's peak RSS. Needs Java 17+
    (the real ingest runs); each database is created on the --dsn server and dropped after.

    \b
    Examples:
      slidewin bench serve --json
      slidewin bench serve --rate 2k --duration 10s --clients 5 --requests 20
      slidewin bench serve --stream wide --rate 2k --duration 10s --json
    """
    app.check_database()
    settings = ServeSettings(rate=rate, duration_s=duration.total_seconds(), clients=clients,
                             requests=requests, repeats=repeats, stream=stream)
    result = run(app.dsn, settings, app.progress)
    if as_json:
        emit_json(result)
        return
    e = result["ingest_events_per_s"]
    click.echo(f"ingest at {rate:,} events/s offered: {e['without']:,} events/s alone, "
               f"{e['with']:,} with the server (cost {result['cost_pct']}%); the server used "
               f"{result['server_cpu_share_of_ingest_pct']}% of the ingest's CPU")
    api = result["api"]
    click.echo(f"API: {api['requests']:,} requests, p50 {api['p50_ms']} ms, p99 "
               f"{api['p99_ms']} ms, {api['failed']} failed; {result['sse']['events']:,} events "
               f"to {clients} browsers; server peak RSS {result['server_rss_mb']} MB")
