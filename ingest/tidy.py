"""Archiving or deleting the files of the last committed batch when a query stops.

Spark's ``cleanSource`` moves a batch's files only when it plans the *next* batch, so the files
of the last batch before a stop (every ``--once`` run) would stay in the landing directory and
the directory would keep one batch's worth of files forever. When the query has stopped, this
does the same thing for that last batch: it reads the stream's file-source log entry for the
last committed batch (one small file, not the whole log) and moves each file still in the
landing directory to ``<archive dir>/<its absolute path>`` (Spark's own archive layout) or
deletes it -- unless it changed since the batch read it (another modification time: appended
to in place), which the landing sweep hands back to be read again instead.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
from pathlib import Path
from urllib.parse import unquote, urlparse

from slidewin.ingest.config import IngestConfig


def last_committed_batch(checkpoint: Path) -> int | None:
    """The newest batch id with a commit record, or None before the first commit."""
    commits = checkpoint / "commits"
    ids = [int(p.name) for p in commits.glob("*") if p.name.isdigit()] if commits.is_dir() else []
    return max(ids) if ids else None


def batch_files(checkpoint: Path, batch_id: int) -> list[Path]:
    """Files the file source assigned to ``batch_id`` (from ``sources/0/<id>[.compact]``)."""
    return [path for path, _ms in batch_entries(checkpoint, batch_id)]


def batch_entries(checkpoint: Path, batch_id: int) -> list[tuple[Path, int]]:
    """(path, modification time in ms when listed) of each file of ``batch_id``."""
    log = checkpoint / "sources" / "0"
    for name in (str(batch_id), f"{batch_id}.compact"):
        entry = log / name
        if entry.is_file():
            return _entries_in(entry, batch_id)
    return []


def _entries_in(entry: Path, batch_id: int) -> list[tuple[Path, int]]:
    found = []
    for line in entry.read_text(encoding="utf-8").splitlines()[1:]:  # first line: version
        record = json.loads(line)
        if record.get("batchId") == batch_id:
            path = Path(unquote(urlparse(record["path"]).path))
            found.append((path, int(record.get("timestamp", -1))))
    return found


def tidy_last_batch(config: IngestConfig, stream: str) -> int:
    """Archive or delete the last committed batch's files still in the landing dir; count."""
    if config.processed == "keep":
        return 0
    checkpoint = config.checkpoint_for(stream)
    batch = last_committed_batch(checkpoint)
    if batch is None:
        return 0
    done = 0
    for path, read_ms in batch_entries(checkpoint, batch):
        if path.parent == config.landing and _unchanged(path, read_ms):
            dispose(path, config)
            done += 1
    return done


def _unchanged(path: Path, read_ms: int) -> bool:
    """``path`` is still the file the batch read (its modification time, as Spark logged it)."""
    try:
        return int(os.stat(path).st_mtime * 1000) == read_ms
    except OSError:
        return False


def dispose(path: Path, config: IngestConfig) -> None:
    """Archive (``<archive dir>/<its absolute path>``) or delete a file the store has read."""
    if config.processed == "delete":
        path.unlink(missing_ok=True)
        return
    target = config.archive_dir / str(path).lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(path, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV or not stat.S_ISREG(os.lstat(path).st_mode):
            raise
        shutil.move(str(path), str(target))  # another file system: a copy (regular files only)
