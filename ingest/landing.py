"""Files in the landing directory that Spark's file source would silently never read.

Spark remembers every path it has read (its source log) and skips that path for good, and it
skips files whose modification time is more than ``maxFileAge`` (7 days) older than the newest
file it has seen. So a producer that sends a file again under a name used before (``cp``,
a retried upload, a rotated log reusing names), or drops an old file, would see it sit in the
landing directory forever, ingested by nobody. The sweep finds such files and hands them back:

* a file at a path Spark has read, but not the file it read (another modification time; or,
  with ``--processed archive``, the one it read is already in the archive) is renamed to a new
  name, ``<stem>.resent-<ms><ext>``, which Spark reads as a new file -- its events are
  stored, or counted as duplicates of stored ones, like any other file's;
* a file Spark has not read and would think too old gets its modification time set to now.

It runs before the queries start (so ``--once`` ingests such files in the same run) and then
every few seconds. Its work grows with the files in the landing directory and the new entries
of the source log, never with the whole history: the index holds the paths of the last
``MAX_FILE_AGE`` (what Spark itself keeps in memory).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote, urlparse

from ingest.config import IngestConfig
from ingest.parse import TEXT_EXTENSIONS

MAX_FILE_AGE = timedelta(days=7)  # Spark's default maxFileAge (not set by slidewin)
SWEEP_EVERY_S = 5.0


@dataclass
class _Index:
    """What one stream's source log says: path -> modification time (ms) of the file read."""

    folder: Path
    seen: dict[str, int] = field(default_factory=dict)
    newest_ms: int = 0
    read_up_to: int = -1  # the last batch id whose log entry was read

    def refresh(self) -> None:
        ids = _log_ids(self.folder)
        compact = [i for i, is_compact in ids.items() if is_compact and i > self.read_up_to]
        start = max(compact) if compact else self.read_up_to + 1
        for batch_id in sorted(i for i in ids if i >= start):
            name = f"{batch_id}.compact" if ids[batch_id] else str(batch_id)
            self._read(self.folder / name)
            self.read_up_to = batch_id
        self._forget_old()

    def _read(self, entry: Path) -> None:
        try:
            lines = entry.read_text(encoding="utf-8").splitlines()[1:]  # first: version
        except OSError:
            return
        for text in lines:
            record = json.loads(text)
            path = unquote(urlparse(record["path"]).path)
            self.seen[path] = int(record["timestamp"])
            self.newest_ms = max(self.newest_ms, int(record["timestamp"]))

    def _forget_old(self) -> None:
        horizon = self.newest_ms - _ms(MAX_FILE_AGE)
        if any(ts < horizon for ts in self.seen.values()):
            self.seen = {p: ts for p, ts in self.seen.items() if ts >= horizon}


def _log_ids(folder: Path) -> dict[int, bool]:
    """Batch id -> whether its log entry is a compact file."""
    ids: dict[int, bool] = {}
    if folder.is_dir():
        for entry in folder.iterdir():
            stem, _, suffix = entry.name.partition(".")
            if stem.isdigit() and suffix in ("", "compact"):
                ids[int(stem)] = ids.get(int(stem), False) or suffix == "compact"
    return ids


def _ms(span: timedelta) -> int:
    return int(span.total_seconds() * 1000)


class LandingSweep:
    """Finds and hands back the landing files Spark would skip (see the module docstring)."""

    def __init__(self, config: IngestConfig, progress: Callable[[str], None]) -> None:
        self.config, self.progress = config, progress
        self.indexes = {
            stream: _Index(config.checkpoint_for(stream) / "sources" / "0")
            for stream in config.stream_names
        }

    def sweep(self) -> int:
        """One pass over the landing directory; returns how many files were handed back."""
        done = rename_undecodable(self.config, self.progress)
        for stream, index in self.indexes.items():
            index.refresh()
            for path in self._files(stream):
                done += self._hand_back(path, index)
        return done

    def _files(self, stream: str) -> list[Path]:
        if stream == "parquet":
            extensions: tuple[str, ...] = ("parquet",)
        else:
            extensions = TEXT_EXTENSIONS.get(self.config.format, TEXT_EXTENSIONS["auto"])
        suffixes = tuple(f".{ext}" for ext in extensions)
        try:
            entries = list(os.scandir(self.config.landing))
        except OSError:
            return []
        return [
            Path(e.path) for e in entries
            if e.is_file() and not e.name.startswith((".", "_"))
            and e.name.lower().endswith(suffixes)
        ]

    def _hand_back(self, path: Path, index: _Index) -> int:
        try:
            mtime_ms = int(path.stat().st_mtime * 1000)
        except OSError:  # gone meanwhile (Spark archived it)
            return 0
        read_ms = index.seen.get(str(path))
        if read_ms is not None and (read_ms != mtime_ms or self._archived(path)):
            return self._rename(path)
        if read_ms is None and index.newest_ms and mtime_ms < index.newest_ms - _ms(MAX_FILE_AGE):
            os.utime(path)  # Spark skips files this much older than the newest it has seen
            self.progress(f"landing: {path.name} is older than Spark reads; its time set to now")
            return 1
        return 0

    def _archived(self, path: Path) -> bool:
        if self.config.processed != "archive":
            return False
        return (self.config.archive_dir / str(path).lstrip("/")).exists()

    def _rename(self, path: Path) -> int:
        stem, suffix = _split(path.name)
        target = path.with_name(f"{stem}.resent-{int(time.time() * 1000)}{suffix}")
        n = 1
        while target.exists():
            target = path.with_name(f"{stem}.resent-{int(time.time() * 1000)}-{n}{suffix}")
            n += 1
        try:
            os.rename(path, target)
        except OSError:
            return 0
        self.progress(
            f"landing: {path.name} was read before under that name and sent again; renamed to "
            f"{target.name} so it is read (events already stored count as duplicates)"
        )
        return 1


def _split(name: str) -> tuple[str, str]:
    stem, dot, ext = name.rpartition(".")
    return (stem, f"{dot}{ext}") if dot else (name, "")


def rename_undecodable(config: IngestConfig, progress: Callable[[str], None]) -> int:
    """Give each landing file whose name is not valid UTF-8 a name that is; returns how many.

    Spark's file source lists such a file under a mangled name, cannot open that, and skips it
    without a word, forever. The new name is the old one with each byte that is not UTF-8 as
    ``%XX`` (``caf\\xe9.csv`` -> ``caf%E9.csv``: the extension stays, so the file keeps its
    reader), never over an existing file; one ``landing:`` line says so. Hidden and temporary
    names (a producer's file still being written) are left alone."""
    suffixes = tuple(
        f".{ext}".encode()
        for ext in ("parquet", *TEXT_EXTENSIONS.get(config.format, TEXT_EXTENSIONS["auto"]))
    )
    try:
        entries = list(os.scandir(os.fsencode(config.landing)))
    except OSError:
        return 0
    done = 0
    for entry in entries:
        name = entry.name
        if name.startswith((b".", b"_")) or not name.lower().endswith(suffixes):
            continue
        if not entry.is_file():
            continue
        try:
            name.decode("utf-8")
            continue
        except UnicodeDecodeError:
            pass
        done += _rename_to_utf8(Path(os.fsdecode(entry.path)), name, progress)
    return done


def _rename_to_utf8(path: Path, name: bytes, progress: Callable[[str], None]) -> int:
    stem, suffix = _split(_escaped(name))
    target, n = path.with_name(stem + suffix), 1
    while target.exists():
        target, n = path.with_name(f"{stem}-{n}{suffix}"), n + 1
    try:
        os.rename(path, target)
    except OSError:  # gone meanwhile, or not ours to rename: tried again at the next sweep
        return 0
    shown = name.decode("utf-8", "backslashreplace")
    progress(
        f"landing: {shown} has a name that is not UTF-8, which Spark cannot read; "
        f"renamed to {target.name}"
    )
    return 1


def _escaped(name: bytes) -> str:
    """``name`` with each byte that is not part of valid UTF-8 as ``%XX``."""
    text = name.decode("utf-8", "surrogateescape")  # such bytes become U+DC80..U+DCFF
    return "".join(f"%{ord(c) - 0xDC00:02X}" if "\udc80" <= c <= "\udcff" else c for c in text)
