"""``slidewin bench``: the benchmarks. Each ``client/cli_bench_*.py`` adds one subcommand."""

from __future__ import annotations

from client.cli import cli


@cli.group()
def bench() -> None:
    """Measure slidewin on this machine (benchmarks, not tests: they report, never assert).

    Every benchmark measures its comparisons side by side in one run and, with --json, ends with
    one JSON object on its last line.

    \b
    Examples:
      slidewin bench queries --json
      slidewin bench ingest --events 1M
    """
