"""Which landing folder a checkpoint directory belongs to, so two folders never share one.

Spark's file source keeps, in its checkpoint, every path it has read. Started on a checkpoint
that holds another folder's paths, it fails 30 s in with "Wrong basePath"; and a checkpoint is
shared whenever two ingests run under one ``--query-id`` (checkpoints are
``<data dir>/checkpoints/<query id>``). So each checkpoint directory records its landing
folder and archive in ``slidewin-landing.json`` the first time an ingest starts on it, and the
next start on another folder is refused at once, naming ``--query-id``. Checkpoints written
before that record existed are recognised by the first path in their source log.

``slidewin db reset`` reads the same record to find the archive of each checkpoint's folder
(``forget``): it removes the data dir's checkpoints and the files archived from their landing
folders -- only those files (``<archive dir>/<landing path>``), never the rest of an archive
directory someone chose with ``--archive-dir``; the data dir's own ``landing-archive`` goes
whole. Landing folders and their ``-rejected`` folders are left alone: what is in them was
never stored.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from slidewin.db.errors import ConfigError
from slidewin.ingest.config import IngestConfig, derived_query_id

RECORD = "slidewin-landing.json"


@dataclass(frozen=True)
class Owner:
    """The landing folder (and its archive) whose files a checkpoint directory has read."""

    landing: Path
    archive_dir: Path | None = None
    # known only from a file path in the source log: the landing folder may be an ancestor
    # (Spark lists subfolders too)
    inferred: bool = False

    def holds(self, landing: Path) -> bool:
        """``landing`` is this checkpoint's folder."""
        return self.landing == landing or (self.inferred and landing in self.landing.parents)


def owner_of(checkpoint_dir: Path) -> Owner | None:
    """What ``checkpoint_dir`` records (or its source logs show); None for a new one."""
    try:
        record = json.loads((checkpoint_dir / RECORD).read_text(encoding="utf-8"))
        archive = record.get("archive_dir")
        return Owner(Path(record["landing"]), Path(archive) if archive else None)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    for stream in sorted(checkpoint_dir.glob("*/sources/0")):
        path = _first_logged_path(stream)
        if path is not None:
            return Owner(path.parent, inferred=True)
    return None


def claim(config: IngestConfig) -> None:
    """Refuse a checkpoint directory that belongs to another landing folder; record ours on
    first use. Raises ConfigError naming ``--query-id`` and ``--checkpoint-dir``."""
    folder, landing = config.checkpoint_dir, config.landing
    archive = config.archive_dir if config.processed == "archive" else None
    found = owner_of(folder)
    if found is not None and not found.holds(landing):
        raise ConfigError(
            f"the checkpoints in {folder} belong to the ingest of {found.landing}, not "
            f"{landing}: each landing folder needs its own --query-id (e.g. --query-id "
            f"{derived_query_id(landing)}) or --checkpoint-dir"
        )
    if found is not None and archive is None:
        archive = found.archive_dir  # files archived by an earlier run are still there
    if found is None or found.inferred or found.archive_dir != archive:
        _write(folder, landing, archive)


def _write(checkpoint_dir: Path, landing: Path, archive_dir: Path | None) -> None:
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    record = {"landing": str(landing), "archive_dir": str(archive_dir) if archive_dir else None}
    tmp = checkpoint_dir / f".{RECORD}.{os.getpid()}"
    tmp.write_text(json.dumps(record), encoding="utf-8")
    os.replace(tmp, checkpoint_dir / RECORD)


def _first_logged_path(log: Path) -> Path | None:
    """The first file path in a file-source log folder (``<id>`` or ``<id>.compact`` files)."""
    entries = sorted(
        (int(p.name.partition(".")[0]), p) for p in log.iterdir()
        if p.name.partition(".")[0].isdigit() and p.name.partition(".")[2] in ("", "compact")
    )
    for _batch, entry in entries:
        try:
            lines = entry.read_text(encoding="utf-8").splitlines()[1:]  # first line: version
        except OSError:
            continue
        for line in lines:
            try:
                return Path(unquote(urlparse(json.loads(line)["path"]).path))
            except (ValueError, KeyError, TypeError):
                continue
    return None


def forget(data_dir: Path) -> list[Path]:
    """Remove the checkpoints under ``data_dir`` and what was archived from their landing
    folders (see the module docstring); returns the paths removed."""
    removed = []
    folders = sorted(p for p in (data_dir / "checkpoints").glob("*") if p.is_dir())
    for folder in folders:
        found = owner_of(folder)
        if found is not None and found.archive_dir is not None:
            removed += _remove(found.archive_dir / str(found.landing).lstrip("/"))
        removed += _remove(folder)
    removed += _remove(data_dir / "landing-archive")  # the default landing folder's archive
    return removed


def _remove(path: Path) -> list[Path]:
    if not os.path.lexists(path):
        return []
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    return [path]
