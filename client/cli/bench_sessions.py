"""``slidewin bench sessions``: the ingest with and without a session window definition, side
by side, and the per-key lookups, over the built-in stream or a declared one
(client/bench/sessions.py)."""

from __future__ import annotations

import click

from slidewin.client.cli.context import AppContext, emit_json, pass_app
from slidewin.client.cli.options import COUNT, bench_stream_option, json_option
from slidewin.client.cli.root import SlidewinCommand


@click.command("sessions", cls=SlidewinCommand)
@click.option("--events", type=COUNT, default="1M", show_default=True,
              help="Events over the last hour, in time order.")
@click.option("--keys", type=COUNT, default="10k", show_default=True,
              help="Distinct keys; each is active in a few bursts, so sessions form.")
@click.option("--rounds", type=click.IntRange(1, 9), default=3, show_default=True,
              help="Pairs (without, with the definition) per measure; medians are reported.")
@click.option("--lookups", type=click.IntRange(1, 10_000), default=200, show_default=True,
              help="Random keys whose sessions and 1 h key window are timed.")
@click.option("--master", default="local[*]", show_default=True,
              help="Spark master URL for the end-to-end runs.")
@bench_stream_option("wide: the same over the declared stream of 8 typed columns (the same keys "
                     "and times), its sessions counting events only; its own key index.")
@json_option("End with one JSON object on stdout.")
@pass_app
def bench_sessions(
    app: AppContext, events: int, keys: int, rounds: int, lookups: int, master: str,
    stream: str, as_json: bool,
) -> None:
    """Measure what session windows cost the ingest (the sink's COPY alone, and the whole
    `slidewin ingest --once` path, each without and with one definition: gap 30s, grace 5s),
    then a key's sessions and a tumbling 10 s series over one key's last hour. Uses throw-away
    databases on the configured server. --stream wide measures the same over a declared stream.

    \b
    Examples:
      slidewin bench sessions --events 200k --rounds 1
      slidewin bench sessions --json
      slidewin bench sessions --stream wide --json
    """
    from slidewin.client.bench.sessions import SessionBenchOptions, run_bench

    if keys > events:
        raise click.BadParameter(f"{keys:,} keys for {events:,} events; use at most as many "
                                 "keys as events", param_hint="--keys")
    if lookups > keys:
        raise click.BadParameter(f"{lookups:,} lookups among {keys:,} keys; use at most "
                                 "--keys", param_hint="--lookups")
    app.check_database()
    opts = SessionBenchOptions(events=events, keys=keys, rounds=rounds, lookups=lookups,
                               master=master, stream=stream)
    report = run_bench(app.dsn, opts, app.progress)
    if as_json:
        emit_json(report)
    else:
        for key, value in sorted(report.items()):
            click.echo(f"{key:>30}: {value}")
