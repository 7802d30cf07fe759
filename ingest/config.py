"""The ingest's settings as one frozen, validated object.

Every check that can fail runs here, before Spark starts: a bad value raises ConfigError naming
the option, the value and the fix. ``resolve_retention`` fills the history / row limits from the
store's ``default`` retention_settings row when the options leave them out, then re-validates
(grace must not exceed history -- the same rule as Kafka's window store, KIP-428); the archive
keeps files as long as the store keeps events (``--archive-for``, default: that history, else
``DEFAULT_ARCHIVE_FOR``).

An ingest's name (``--query-id``) keys its checkpoints, batch markers and stream state, so two
landing folders need two names: ``query_id_for`` keeps ``ingest`` for the data dir's own landing
folder and derives a name from any other folder's path (``ingest-<folder>-<hash of the path>``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

import psycopg

from slidewin.db.errors import ConfigError
from slidewin.db.limits import MAX_CHUNK
from slidewin.db.reconnect import DEFAULT_TIMEOUT, ReconnectPolicy
from slidewin.db.retention_settings import DEFAULT_NAME, read_settings

FORMATS = ("auto", "json", "csv", "parquet")
PROCESSED = ("archive", "delete", "keep")
# who sums the rollups of ingested rows: the driver from the partitions it pulled (Arrow), a
# second Spark job over the scan, or PostgreSQL's statement triggers (``ingest.stream``)
ROLLUPS = ("driver", "spark", "database")
# the unit of a ts that is a number: by magnitude, or one for all (``ingest.eventtime``)
EPOCH_UNITS = ("auto", "s", "ms", "us", "ns")
DEFAULT_GRACE = timedelta(seconds=5)
DEFAULT_MAX_FUTURE = timedelta(minutes=1)
# a tenth of a second: a file waits for the next trigger, half the interval on average, before
# its batch starts. `slidewin bench ingest` (one 5,000-event file a second, 3 alternating pairs,
# 2026-11-26): freshness p95 0.349 / 0.362 / 0.408 s against 0.473 / 0.620 / 0.581 s at 250 ms,
# throughput unchanged; an idle ingest lists its landing directory ten times a second for about
# 3-6 % of a core (3-4 % at 250 ms). Busy streams run batch after batch whatever the interval.
DEFAULT_TRIGGER = timedelta(milliseconds=100)
DEFAULT_TRIGGER_TEXT = f"{DEFAULT_TRIGGER // timedelta(milliseconds=1)}ms"  # CLI defaults
DEFAULT_CHUNK = 100
DEFAULT_MAX_FILES = 64
DEFAULT_QUERY_ID = "ingest"  # the data dir's own landing folder
# how long archived files are kept when the store has no history to match
DEFAULT_ARCHIVE_FOR = timedelta(hours=1)
FOREVER = timedelta.max  # --archive-for forever
_QUERY_ID = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
_NOT_IN_QUERY_ID = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class IngestConfig:
    """What ``slidewin ingest`` runs with. Paths are absolute; durations are timedeltas."""

    landing: Path
    checkpoint_dir: Path
    archive_dir: Path
    processed: str = "archive"
    format: str = "auto"
    once: bool = False
    trigger: timedelta = DEFAULT_TRIGGER
    # the declared streams' micro-batch interval (None: ``trigger``): a batch costs about 0.25 s
    # of planning and Spark however few its records, so several slow streams polled often take
    # the cores the busy one needs
    streams_trigger: timedelta | None = None
    grace: timedelta = DEFAULT_GRACE
    history: timedelta | None = None
    max_rows: int | None = None
    max_future: timedelta = DEFAULT_MAX_FUTURE
    inline: bool = False
    chunk: int | None = None
    max_files_per_trigger: int = DEFAULT_MAX_FILES
    master: str = "local[*]"
    spark_ui: bool = False
    query_id: str = "ingest"
    reconnect_timeout: timedelta = DEFAULT_TIMEOUT
    rollups: str = "driver"
    # how long archived files are kept (by modification time); None: the history, see module doc
    archive_for: timedelta | None = None
    epoch_unit: str = "auto"
    verbose: bool = False  # -v: Spark's own warnings and errors on stderr (``ingest.spark``)

    def __post_init__(self) -> None:
        self._check_choices()
        self._check_durations()
        self._check_counts()
        self._check_paths()

    def _check_choices(self) -> None:
        if self.format not in FORMATS:
            raise ConfigError(f"--format {self.format!r} is not one of {', '.join(FORMATS)}")
        if self.processed not in PROCESSED:
            raise ConfigError(
                f"--processed {self.processed!r} is not one of {', '.join(PROCESSED)}"
            )
        if self.rollups not in ROLLUPS:
            raise ConfigError(f"--rollups {self.rollups!r} is not one of {', '.join(ROLLUPS)}")
        if self.epoch_unit not in EPOCH_UNITS:
            raise ConfigError(
                f"--epoch-unit {self.epoch_unit!r} is not one of {', '.join(EPOCH_UNITS)}"
            )
        if not _QUERY_ID.match(self.query_id):
            raise ConfigError(
                f"--query-id {self.query_id!r} must be 1-100 letters, digits, '_', '.' or '-'"
            )
        if not self.master.strip():
            raise ConfigError("--master is empty; use e.g. local[*] or spark://host:7077")

    def _check_durations(self) -> None:
        if self.grace < timedelta(0):
            raise ConfigError(f"--grace {_fmt(self.grace)} is negative; use 0s or more, e.g. 5s")
        if self.max_future < timedelta(0):
            raise ConfigError(f"--max-future {_fmt(self.max_future)} is negative; use e.g. 1m")
        if self.trigger <= timedelta(0):
            raise ConfigError(f"--trigger {_fmt(self.trigger)} must be positive, e.g. 1s")
        if self.streams_trigger is not None and self.streams_trigger <= timedelta(0):
            raise ConfigError(
                f"--streams-trigger {_fmt(self.streams_trigger)} must be positive, e.g. 1s"
            )
        if self.reconnect_timeout < timedelta(0):
            raise ConfigError(
                f"--reconnect-timeout {_fmt(self.reconnect_timeout)} is negative; use e.g. 3m, "
                "or 0 to fail at once"
            )
        if self.archive_for is not None and self.archive_for < timedelta(0):
            raise ConfigError(
                f"--archive-for {_fmt(self.archive_for)} is negative; use e.g. 1h, 0 to delete "
                "archived files at once, or forever"
            )
        if self.history is not None and self.history <= timedelta(0):
            raise ConfigError(f"--history {_fmt(self.history)} must be positive, e.g. 10m")
        if self.history is not None and self.grace > self.history:
            raise ConfigError(
                f"--grace {_fmt(self.grace)} is larger than --history {_fmt(self.history)}: an "
                "event could be accepted after its second was already retired; use a grace no "
                "larger than the history (e.g. --grace 5s) or a longer --history"
            )

    def _check_counts(self) -> None:
        if self.max_rows is not None and self.max_rows <= 0:
            raise ConfigError(f"--max-rows {self.max_rows} must be positive, e.g. 10k")
        if self.chunk is not None and not 1 <= self.chunk <= MAX_CHUNK:
            raise ConfigError(f"--chunk {self.chunk} must be between 1 and {MAX_CHUNK}, e.g. 100")
        if self.max_files_per_trigger < 1:
            raise ConfigError(
                f"--max-files-per-trigger {self.max_files_per_trigger} must be at least 1"
            )

    def _check_paths(self) -> None:
        if not self.landing.is_dir():
            what = "is not a directory" if self.landing.exists() else "does not exist"
            raise ConfigError(
                f"landing directory {self.landing} {what}; create it with "
                f"`mkdir -p {self.landing}` or pass --landing DIR"
            )
        if self.processed == "archive" and _inside(self.archive_dir, self.landing):
            raise ConfigError(
                f"archive directory {self.archive_dir} is inside the landing directory "
                f"{self.landing}; archived files would be ingested again -- put it elsewhere"
            )

    @property
    def rejected_dir(self) -> Path:
        """Where the landing sweep moves entries nothing may open (``ingest.landing``)."""
        return self.landing.parent / f"{self.landing.name}-rejected"

    @property
    def stream_names(self) -> tuple[str, ...]:
        """One file-source stream per reader: ``text`` (JSON Lines + CSV) and ``parquet``."""
        if self.format == "parquet":
            return ("parquet",)
        if self.format in ("json", "csv"):
            return ("text",)
        return ("text", "parquet")

    def marker_id(self, stream: str, checkpoint_id: str) -> str:
        """The ingest_batches.query_id of one stream: ``<query-id>/<stream>/<checkpoint id>``.

        Spark numbers batches per checkpoint, so the marker carries the checkpoint's query id
        (a UUID kept in the checkpoint): a restart from the same checkpoint replays the same
        keys (and skips what committed), while a new checkpoint on the same database cannot
        mistake its batch 0 for an old one and skip it."""
        return f"{self.query_id}/{stream}/{checkpoint_id}"

    def checkpoint_for(self, stream: str) -> Path:
        return self.checkpoint_dir / stream

    @property
    def reconnect(self) -> ReconnectPolicy:
        """How long a batch waits for a database that went away (``--reconnect-timeout``)."""
        return ReconnectPolicy(timeout=self.reconnect_timeout)



def _inside(child: Path, parent: Path) -> bool:
    try:
        child.resolve().relative_to(parent.resolve())
    except ValueError:
        return False
    return True


def _fmt(value: timedelta) -> str:
    seconds = value.total_seconds()
    return f"{seconds:g}s"


def query_id_for(data_dir: Path, landing: Path, given: str | None) -> str:
    """``--query-id`` if given; else ``ingest`` for the data dir's own landing folder, and for
    a folder whose checkpoints already run under that name (as before names were derived);
    else a name of the folder's own, so that a second landing folder never meets the first
    one's checkpoints (Spark fails that with "Wrong basePath")."""
    if given is not None:
        return given
    land = landing.expanduser().resolve()
    if land == (data_dir / "landing").resolve():
        return DEFAULT_QUERY_ID
    from slidewin.ingest.checkpoints import owner_of  # the checkpoint's own record of its folder

    found = owner_of(data_dir / "checkpoints" / DEFAULT_QUERY_ID)
    if found is not None and found.holds(land):
        return DEFAULT_QUERY_ID
    return derived_query_id(land)


def derived_query_id(landing: Path) -> str:
    """``ingest-<folder name>-<8 hex digits of the folder's absolute path>``: readable, and
    distinct for two folders of the same name."""
    name = _NOT_IN_QUERY_ID.sub("_", landing.name).strip("_.-")[:40] or "root"
    digest = hashlib.sha256(str(landing).encode()).hexdigest()[:8]
    return f"{DEFAULT_QUERY_ID}-{name}-{digest}"


def default_paths(data_dir: Path, landing: Path | None, query_id: str) -> tuple[Path, Path, Path]:
    """(landing, checkpoint dir, archive dir) with the data-directory defaults filled in.

    The default landing directory is slidewin's own, so it is created; a directory the user
    names must exist (a typo should fail, not start an ingest of an empty new folder).
    """
    if landing is None:
        (data_dir / "landing").mkdir(parents=True, exist_ok=True)
    land = (landing or data_dir / "landing").expanduser().resolve()
    checkpoints = (data_dir / "checkpoints" / query_id).resolve()
    archive = (land.parent / f"{land.name}-archive").resolve()
    return land, checkpoints, archive


def resolve_retention(conn: psycopg.Connection, config: IngestConfig) -> IngestConfig:
    """Fill history / max_rows / chunk from the ``default`` retention_settings row when unset,
    and the archive's retention from the history (else ``DEFAULT_ARCHIVE_FOR``).

    Options win over the row. Re-validates, so ``grace > history`` from the row is refused too.
    """
    settings = read_settings(conn, DEFAULT_NAME)
    if settings is None:
        history, max_rows, chunk = config.history, config.max_rows, config.chunk
    else:
        history = config.history or settings.history
        max_rows = config.max_rows or settings.max_rows
        chunk = config.chunk or settings.chunk
    if config.inline and history is None and max_rows is None:
        raise ConfigError(
            "--inline needs a retention limit: pass --history DURATION and/or --max-rows N, or "
            "store a 'default' row in slidewin.retention_settings"
        )
    archive_for = config.archive_for
    if archive_for is None:
        archive_for = history if history is not None else DEFAULT_ARCHIVE_FOR
    return replace(
        config, history=history, max_rows=max_rows, chunk=chunk or DEFAULT_CHUNK,
        archive_for=archive_for,
    )
