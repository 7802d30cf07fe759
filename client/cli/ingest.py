"""``slidewin ingest``: the Spark Structured Streaming ingest from a landing directory."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import click

from slidewin.client.cli.context import AppContext, emit_json, pass_app
from slidewin.client.cli.interrupts import stopped_by
from slidewin.client.cli.options import (
    COUNT,
    DURATION,
    DurationType,
    json_option,
    reconnect_timeout_option,
)
from slidewin.client.cli.root import SlidewinCommand
from slidewin.db.limits import MAX_CHUNK
from slidewin.db.signals import Stop, stop_on_signals
from slidewin.ingest.config import (
    DEFAULT_MAX_FILES,
    DEFAULT_TRIGGER_TEXT,
    EPOCH_UNITS,
    FOREVER,
    FORMATS,
    PROCESSED,
    ROLLUPS,
    IngestConfig,
    default_paths,
    query_id_for,
)
from slidewin.ingest.progress import Totals


class ArchiveFor(DurationType):
    """``--archive-for``: a duration (``0`` deletes archived files at the next sweep) or
    ``forever``."""

    name = "duration|forever"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None):
        if isinstance(value, str) and value.strip().lower() == "forever":
            return FOREVER
        return super().convert(value, param, ctx)


def _warn(line: str) -> None:
    """A warning (the ingest falling behind) is printed even with -q."""
    click.echo(line, err=True)


@click.command("ingest", cls=SlidewinCommand)
@click.option("--landing", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory producers drop files into (default: <data dir>/landing).")
@click.option("--once", is_flag=True, help="Process the files there now, then exit.")
@click.option("--trigger", type=DURATION, default=DEFAULT_TRIGGER_TEXT, show_default=True,
              help="Micro-batch interval when streaming.")
@click.option("--streams-trigger", type=DURATION, default=None,
              help="Micro-batch interval of the declared streams (`slidewin streams add`) "
              "when streaming (default: --trigger). Every batch costs about a quarter second "
              "of Spark however few its records: a longer interval for slow streams leaves the "
              "cores to the busy one.")
@click.option("--grace", type=DURATION, default="5s", show_default=True,
              help="Allowed lateness behind the newest event time; later -> dead letter 'late'.")
@click.option("--history", type=DURATION, default=None,
              help="Retention horizon; older events -> dead letter 'expired' "
              "(default: the 'default' retention_settings row, else none).")
@click.option("--max-rows", type=COUNT, default=None,
              help="Rows to keep in the whole store for --inline, split over the partitions "
              "as the retention jobs do (default: the 'default' row).")
@click.option("--max-future", type=DURATION, default="1m", show_default=True,
              help="How far ahead of the clock an event may be; further -> 'future'.")
@click.option("--inline", is_flag=True,
              help="Nibble the written partitions to --history/--max-rows in each batch's "
              "transaction.")
@click.option("--chunk", type=click.IntRange(1, MAX_CHUNK), default=None,
              help="Rows per nibble call for --inline (default: the 'default' row, else 100).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="auto", show_default=True,
              help="auto: JSON Lines + CSV (one text stream) and Parquet (another stream).")
@click.option("--checkpoint-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Spark checkpoints (default: <data dir>/checkpoints/<query id>).")
@click.option("--processed", type=click.Choice(PROCESSED), default="archive", show_default=True,
              help="What happens to ingested files: moved to --archive-dir, deleted, or kept.")
@click.option("--archive-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where --processed archive moves files (default: <landing>-archive).")
@click.option("--archive-for", type=ArchiveFor(), default=None,
              help="How long archived files are kept, by modification time: a duration, 0 "
              "(deleted at the next sweep, within 5 s) or forever (default: the store's "
              "--history, else 1h).")
@click.option("--max-files-per-trigger", type=click.IntRange(1), default=DEFAULT_MAX_FILES,
              show_default=True, help="Cap on files per micro-batch (bounds memory).")
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
@click.option("--rollups", type=click.Choice(ROLLUPS), default="driver", show_default=True,
              help="Who sums the per-second rollups of ingested rows: driver (this process sums "
              "each partition Spark hands it, one upsert per batch), spark (a second Spark job "
              "over the batch's files) or database (PostgreSQL's statement triggers).")
@click.option("--epoch-unit", type=click.Choice(EPOCH_UNITS), default="auto", show_default=True,
              help="Unit of a ts given as a number. auto: by magnitude -- below 1e11 seconds, "
              "below 1e14 ms, below 1e17 us, else ns (a fraction is allowed: 1767268800.25).")
@click.option("--spark-ui", is_flag=True, help="Start the Spark web UI (off by default).")
@click.option("-v", "--verbose", is_flag=True,
              help="Show Spark's own log on stderr: its warnings and errors, Java stack traces "
              "included (by default only slidewin's lines, and its one-line errors).")
@click.option("--query-id", default=None,
              help="Name of this ingest: batch markers, stream state and checkpoints use it "
              "(default: 'ingest' for <data dir>/landing, else ingest-<folder>-<hash of its "
              "path>, so each landing folder has its own).")
@reconnect_timeout_option("the batch is then written again, exactly once. 0 fails at once.")
@json_option("Print the run's totals as one JSON line.")
@pass_app
def ingest_command(
    app: AppContext,
    landing: Path | None,
    once: bool,
    trigger: timedelta,
    streams_trigger: timedelta | None,
    grace: timedelta,
    history: timedelta | None,
    max_rows: int | None,
    max_future: timedelta,
    inline: bool,
    chunk: int | None,
    fmt: str,
    checkpoint_dir: Path | None,
    processed: str,
    archive_dir: Path | None,
    archive_for: timedelta | None,
    max_files_per_trigger: int,
    master: str,
    rollups: str,
    epoch_unit: str,
    spark_ui: bool,
    verbose: bool,
    query_id: str | None,
    reconnect_timeout: timedelta,
    as_json: bool,
) -> None:
    """Stream files from a landing directory into the store, exactly once.

    Files (JSON Lines *.jsonl, CSV *.csv with columns uuid,val,ts, Parquet *.parquet) must be
    written under a temporary or dot name and renamed into place. Each micro-batch is one
    PostgreSQL transaction: raw rows, rollups, dead letters and a batch marker.
    Bad, late, expired and future events go to slidewin.dead_letters with a reason.
    Archived files are deleted after --archive-for. Entries nothing may open (named pipes,
    sockets, symbolic-link loops, unreadable files) are moved to <landing>-rejected.
    Stop with Ctrl-C or SIGTERM: the query and Spark stop cleanly. If PostgreSQL restarts or
    the connection drops, the ingest waits for it (--reconnect-timeout) and carries on; it
    checks the database every 5 s while no file arrives, too. While files wait longer than 20
    triggers (at least 10 s) for a batch, a warning says how many and how old, every 30 s.
    Spark's own log stays out of the terminal unless -v.

    \b
    Examples:
      slidewin ingest --landing /data/landing --grace 5s --history 10m
      slidewin ingest --landing /data/landing --once --json
      slidewin ingest --landing /data/other --archive-for 1d   # query id ingest-other-<hash>
      slidewin ingest --inline --history 1m --max-rows 100k --chunk 500
      slidewin ingest --epoch-unit ms     # ts numbers are milliseconds, even small ones
    """
    from slidewin.ingest.runner import preflight, run

    so_far = Totals()  # the batches committed before a failure, for its --json line
    app.error_totals = so_far.as_json
    query_id = query_id_for(app.data_dir, landing or app.data_dir / "landing", query_id)
    land, checkpoints, archive = default_paths(app.data_dir, landing, query_id)
    config = IngestConfig(
        landing=land,
        checkpoint_dir=(checkpoint_dir.expanduser().resolve() if checkpoint_dir else checkpoints),
        archive_dir=(archive_dir.expanduser().resolve() if archive_dir else archive),
        processed=processed, format=fmt, once=once, trigger=trigger,
        streams_trigger=streams_trigger, grace=grace, history=history, max_rows=max_rows,
        max_future=max_future, inline=inline, chunk=chunk,
        max_files_per_trigger=max_files_per_trigger, master=master, spark_ui=spark_ui,
        query_id=query_id, reconnect_timeout=reconnect_timeout, rollups=rollups,
        archive_for=archive_for,
        epoch_unit=epoch_unit, verbose=verbose,
    )
    prepared = preflight(config, app.dsn)
    stop = Stop()
    with stop_on_signals(stop):
        totals = run(prepared, app.dsn, app.progress, stop,
                     on_batch=lambda _stream, result: so_far.add(result), warn=_warn)
    app.progress(
        f"ingest stopped: {totals.batches} batches, in {totals.rows_in}, accepted "
        f"{totals.accepted}, dup {totals.duplicates}, rejected {totals.rejected}"
    )
    if as_json:
        emit_json(totals.as_json())
    stopped_by(stop)
