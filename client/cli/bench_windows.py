"""``slidewin bench windows``: every window kind from slidewin against scanning the raw rows."""

from __future__ import annotations

import signal
from types import FrameType

import click

from slidewin.client.bench.windows import WindowBenchSpec, format_table, run_window_bench
from slidewin.client.cli.context import AppContext, emit_json, pass_app
from slidewin.client.cli.options import COUNT, bench_stream_option, json_option, keep_option
from slidewin.client.cli.root import SlidewinCommand
from slidewin.db.limits import MAX_PARTITIONS
from slidewin.db.signals import handling


@click.command("windows", cls=SlidewinCommand)
@click.option("--events", type=COUNT, default="5M", show_default=True,
              help="Events to load, spread over one hour of event time.")
@click.option("--partitions", type=click.IntRange(1, MAX_PARTITIONS), default=8, show_default=True,
              help="Partitions of the benchmark store.")
@click.option("--repeat", type=click.IntRange(1), default=30, show_default=True,
              help="Timed calls per window kind from slidewin.")
@click.option("--naive-repeat", type=click.IntRange(1), default=3, show_default=True,
              help="Timed raw-row scans per window kind (each reads the whole hour).")
@click.option("--chunk", type=COUNT, default="500k", show_default=True,
              help="Events per load transaction.")
@bench_stream_option("wide: every window kind over the declared stream of 8 typed columns (its "
                     "first double measure, one key's windows too) against its raw rows, "
                     "instead of the built-in stream.")
@keep_option()
@json_option()
@pass_app
def bench_windows(app: AppContext, as_json: bool, **options: object) -> None:
    """Load an hour of events and time each window kind against the raw-row answer.

    Tumbling 10 s, hopping 1 min every 10 s and sliding 30 s series over the hour, the last
    10,000 events, and the 1 h average and max -- each checked equal to the same answer computed
    from the raw rows, then timed side by side with it. Then the long series: hopping windows of
    7 days every second over a day (86,400 windows) and 99,001 count windows of 1,000 events
    every one -- each window checked against itself aggregated alone from the raw rows, then
    timed -- and the peak memory of `slidewin windows hopping --json` writing the 86,400
    windows (max_rss_mb). The data goes into a new database slidewin_bench_<random> on the same
    server (dropped at the end unless --keep). --stream wide runs the same over a declared
    stream, written through its COPY.

    \b
    Examples:
      slidewin bench windows --json
      slidewin bench windows --events 200k --repeat 10
      slidewin bench windows --stream wide --json
    """
    app.check_database()
    spec = WindowBenchSpec(**options)  # type: ignore[arg-type]
    with handling(_interrupt, (signal.SIGTERM,)):
        result = run_window_bench(app.dsn, spec, app.progress)
    app.human(format_table(result), as_json)
    if as_json:
        emit_json(result)


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt
