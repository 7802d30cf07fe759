"""Keeping the archive of processed files to ``--archive-for``, so the disk does not fill.

``--processed archive`` moves each ingested file to ``<archive dir>/<its absolute path>``
(Spark's ``cleanSource`` layout, which ``ingest.tidy`` follows), so one landing folder's archive
is the folder ``<archive dir>/<landing path>``. The landing sweep calls ``prune`` on it every
few seconds: files whose modification time is older than ``now - archive_for`` are deleted --
the time the producer wrote them, which a move keeps; by default the store's history, so the
archive holds the files of the events the store still holds. At most ``MAX_DELETES`` files go
per call, so a large backlog is worked off over several sweeps without holding up the
sweep's other work. Only that folder is touched: an archive directory shared by several
landing folders keeps each one's files for that ingest's own retention.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from slidewin.ingest.config import FOREVER, IngestConfig

MAX_DELETES = 2000  # per call: bounded work per sweep


def folder_of(config: IngestConfig) -> Path:
    """Where the files archived from ``config.landing`` are."""
    return config.archive_dir / str(config.landing).lstrip("/")


def prune(folder: Path, keep_for: timedelta, now: datetime, limit: int = MAX_DELETES) -> int:
    """Delete up to ``limit`` files in ``folder`` modified before ``now - keep_for``; return
    how many were deleted. ``keep_for`` FOREVER keeps everything."""
    if keep_for >= FOREVER:
        return 0
    cutoff = now.timestamp() - keep_for.total_seconds()
    deleted = 0
    try:
        found = os.scandir(folder)
    except OSError:  # nothing archived yet
        return 0
    with found:
        for entry in found:
            if deleted >= limit:
                break
            try:
                if entry.is_dir(follow_symlinks=False):
                    continue
                if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)
                    deleted += 1
            except OSError:  # gone meanwhile, or not ours to delete: the next pass tries again
                continue
    return deleted
