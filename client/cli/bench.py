"""``slidewin bench``: the benchmarks; each ``client/cli/bench_*.py`` holds one subcommand."""

from __future__ import annotations

import click

from client.cli import (
    bench_client,
    bench_ingest,
    bench_queries,
    bench_retention,
    bench_sessions,
    bench_windows,
)
from client.cli.root import SlidewinGroup


@click.group(cls=SlidewinGroup)
def bench() -> None:
    """Measure slidewin on this machine (benchmarks, not tests: they report, never assert).

    Every benchmark measures its comparisons side by side in one run and, with --json, ends with
    one JSON object on its last line.

    \b
    Examples:
      slidewin bench queries --json
      slidewin bench ingest --events 1M
      slidewin bench windows --json
      slidewin bench sessions --json
    """


for _command in (
    bench_client.bench_client,
    bench_ingest.bench_ingest,
    bench_queries.bench_queries,
    bench_retention.bench_retention,
    bench_sessions.bench_sessions,
    bench_windows.bench_windows,
):
    bench.add_command(_command)
