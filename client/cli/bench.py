"""``slidewin bench``: the benchmarks; each ``client/cli/bench_*.py`` holds one subcommand,
imported when it runs (``slidewin bench --help`` loads none of them)."""

from __future__ import annotations

import click

from slidewin.client.cli.root import LazyGroup

COMMANDS: dict[str, tuple[str, str]] = {
    "client": ("slidewin.client.cli.bench_client:bench_client",
               "The simulator's event rate and its watchers' cost to the ingest."),
    "ingest": ("slidewin.client.cli.bench_ingest:bench_ingest",
               "COPY limit, end-to-end ingest, freshness and driver memory."),
    "joins": ("slidewin.client.cli.bench_joins:bench_joins",
              "Two streams ingested with and without a join; its exactness."),
    "peers": ("slidewin.client.cli.bench_peers:bench_peers",
              "The ingest against the same job written by hand in plain Spark."),
    "queries": ("slidewin.client.cli.bench_queries:bench_queries",
                "Window queries, max, nibbles and COPY against raw scans."),
    "retention": ("slidewin.client.cli.bench_retention:bench_retention",
                  "Retention under a steady insert load: lag, delete time, bloat."),
    "serve": ("slidewin.client.cli.bench_serve:bench_serve",
              "What slidewin serve costs a live ingest; API latency and memory."),
    "sessions": ("slidewin.client.cli.bench_sessions:bench_sessions",
                 "The ingest with and without a session window; key lookups."),
    "windows": ("slidewin.client.cli.bench_windows:bench_windows",
                "Every window kind against scanning the raw rows."),
}


@click.group(cls=LazyGroup, lazy_commands=COMMANDS)
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
      slidewin bench joins --json
      slidewin bench peers --json
    """
