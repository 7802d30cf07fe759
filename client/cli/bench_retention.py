"""``slidewin bench retention``: retention under a steady insert load (client.bench.retention)."""

from __future__ import annotations

from datetime import timedelta

import click

from slidewin.client.bench.retention import RetentionBenchSpec, run_retention_bench
from slidewin.client.cli.context import AppContext, emit_json, pass_app
from slidewin.client.cli.options import (
    COUNT,
    DURATION,
    DURATION_MS,
    bench_stream_option,
    json_option,
    keep_option,
)
from slidewin.client.cli.root import SlidewinCommand
from slidewin.db.limits import MAX_PARTITIONS


@click.command("retention", cls=SlidewinCommand)
@click.option("--rate", type=COUNT, default="50k", show_default=True,
              help="Rows inserted per second (COPY in small batches, wall-clock stamps).")
@click.option("--seconds", type=DURATION, default="60s", show_default=True,
              help="How long to insert.")
@click.option("--history", type=DURATION, default="10s", show_default=True,
              help="Retention history (0 for none: then give --max-rows).")
@click.option("--max-rows", type=COUNT, default=None, help="Global row target (e.g. 300k).")
@click.option("--chunk", type=COUNT, default="2000", show_default=True,
              help="Rows per nibble (per partition per round).")
@click.option("--yield", "yield_", type=DURATION_MS, default="100ms", show_default=True,
              help="Pause after a round that filled no chunk.")
@click.option("--partitions", type=click.IntRange(1, MAX_PARTITIONS), default=8, show_default=True,
              help="Partitions of the benchmark store.")
@click.option("--workers", type=click.IntRange(1, 16), default=2, show_default=True,
              help="Partitions the retention job nibbles at once.")
@click.option("--batch-ms", type=click.IntRange(1, 1000), default=20, show_default=True,
              help="One COPY every this many milliseconds.")
@bench_stream_option("wide: the declared stream of 8 typed columns, with --history and "
                     "--max-rows as its own retention (one row target for the stream).")
@keep_option()
@json_option()
@pass_app
def bench_retention(
    app: AppContext, rate: int, seconds: timedelta, history: timedelta, max_rows: int | None,
    chunk: int, yield_: timedelta, partitions: int, workers: int, batch_ms: int, stream: str,
    keep: bool, as_json: bool,
) -> None:
    """Insert at a steady rate while the retention job runs; report lag, delete time, bloat.

    Runs in a new database slidewin_bench_<random> on the same server (dropped at the end unless
    --keep); needs a role that may create databases. Samples every 100 ms.

    \b
    Examples:
      slidewin bench retention --json
      slidewin bench retention --rate 20k --seconds 20 --history 5s
      slidewin bench retention --history 0 --max-rows 300k --json
      slidewin bench retention --stream wide --rate 20k --json
    """
    spec = RetentionBenchSpec(
        rate=rate, seconds=seconds.total_seconds(), history=history or None, max_rows=max_rows,
        chunk=chunk, yield_=yield_, partitions=partitions, workers=workers, batch_ms=batch_ms,
        keep=keep, stream=stream,
    )
    app.check_database()
    result = run_retention_bench(app.dsn, spec, app.progress)
    app.human(
        f"inserted {result['rows_inserted']} rows ({result['rate_achieved']}/s of "
        f"{result['rate_target']}/s), deleted {result['rows_deleted']}; oldest age over history "
        f"{result['oldest_age_over_s']} s; max rows over target {result['max_overshoot_rows']}; "
        f"nibble p50 {result['delete_ms_p50']} ms p99 {result['delete_ms_p99']} ms; "
        f"size growth {result['size_growth_pct']}%",
        as_json,
    )
    if as_json:
        emit_json(result)
