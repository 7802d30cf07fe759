"""How far behind the ingest is: the files waiting in the landing directory, and the oldest one's
age.

A file is *waiting* from the moment it lands until a micro-batch picks it up (Spark's file-source
log lists it; ``ingest.landing`` reads that log). A machine short of CPU, or producers faster
than Spark, make the files pile up while every batch still looks fine, so the ingest and the demo
measure the pile itself: ``measure`` scans the landing folders -- the built-in streams' files in
the landing directory, each declared stream's in its own folder -- and ``BehindAlarm`` turns a
measurement into at most one warning line per ``WARN_EVERY`` while the oldest waiting file is
older than ``behind_after`` (a number of triggers, and never less than some seconds), and one
line when the ingest has caught up again.

The scan is bounded: at most ``SCAN_LIMIT`` entries in all, one ``stat`` each (a ``DirEntry``'s,
cached by the system call that listed it where the platform allows). Past the limit the counts
are lower bounds and say so ("at least").
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from slidewin.db.reconnect import fmt_duration

SCAN_LIMIT = 10_000  # landing entries examined per measurement
BEHIND_TRIGGERS = 20  # the oldest waiting file is this many triggers old: behind ...
BEHIND_AT_LEAST = timedelta(seconds=10)  # ... but never for less than this
WARN_EVERY = timedelta(seconds=30)
# (path, modification time in ms) -> a batch has picked this file up
Listed = Callable[[str, int], bool]


def never_listed(_path: str, _mtime_ms: int) -> bool:
    return False


@dataclass(frozen=True)
class Folder:
    """A folder some stream reads: its files with one of ``suffixes`` (lower case, ``.jsonl``;
    None: every file), hidden names (``.x``, ``_x``, as Spark skips them) left out, and
    ``listed`` telling the files a batch picked up already."""

    path: Path
    suffixes: tuple[str, ...] | None = None
    listed: Listed = never_listed


@dataclass(frozen=True)
class Backlog:
    """Files waiting for a batch, and how old the oldest one is (None: none waiting).
    ``capped``: the scan stopped at its limit, so both are lower bounds."""

    files: int = 0
    oldest_age: timedelta | None = None
    capped: bool = False

    def describe(self) -> str:
        """``12 files waiting, the oldest 41s old`` (``at least ...`` when capped)."""
        if self.files == 0:
            return "no file waiting"
        least = "at least " if self.capped else ""
        noun = "file" if self.files == 1 else "files"
        age = fmt_duration(_whole(self.oldest_age)) if self.oldest_age is not None else "?"
        return f"{least}{self.files} {noun} waiting, the oldest {least}{age} old"


def measure(folders: Iterable[Folder], now: datetime, limit: int = SCAN_LIMIT) -> Backlog:
    """The files of ``folders`` no batch has picked up, and the age of the oldest (by its
    modification time, against ``now``); a folder that is missing counts nothing."""
    files, oldest_ms, seen = 0, None, 0
    for folder in folders:
        for entry in _entries(folder.path):
            seen += 1
            if seen > limit:
                return _backlog(files, oldest_ms, now, capped=True)
            mtime_ms = _waiting(entry, folder)
            if mtime_ms is not None:
                files += 1
                oldest_ms = mtime_ms if oldest_ms is None else min(oldest_ms, mtime_ms)
    return _backlog(files, oldest_ms, now, capped=False)


def folders_under(landing: Path) -> list[Folder]:
    """A landing directory whose reader deletes or archives what it read (``slidewin demo``'s
    ingest, ``--processed delete``): every file in it, and in each folder in it (the declared
    streams'), is waiting."""
    subfolders = [Path(e.path) for e in _entries(landing) if _is_dir(e)]
    return [Folder(landing), *(Folder(p) for p in sorted(subfolders))]


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False) and not entry.name.startswith((".", "_"))
    except OSError:
        return False


def _entries(path: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as found:
            return list(found)
    except OSError:
        return []


def _waiting(entry: os.DirEntry[str], folder: Folder) -> int | None:
    """The entry's modification time in ms when it is a file waiting for a batch, else None."""
    name = entry.name
    if name.startswith((".", "_")):
        return None
    if folder.suffixes is not None and not name.lower().endswith(folder.suffixes):
        return None
    try:
        if not entry.is_file(follow_symlinks=False):
            return None
        mtime_ms = int(entry.stat(follow_symlinks=False).st_mtime * 1000)
    except OSError:  # gone meanwhile: a batch took it
        return None
    return None if folder.listed(entry.path, mtime_ms) else mtime_ms


def _backlog(files: int, oldest_ms: int | None, now: datetime, *, capped: bool) -> Backlog:
    if oldest_ms is None:
        return Backlog(files, None, capped)
    age = now - datetime.fromtimestamp(oldest_ms / 1000, tz=now.tzinfo)
    return Backlog(files, max(age, timedelta(0)), capped)


def _whole(span: timedelta) -> timedelta:
    return timedelta(seconds=round(span.total_seconds()))


def behind_after(*triggers: timedelta) -> timedelta:
    """When the ingest counts as behind: its oldest waiting file is ``BEHIND_TRIGGERS`` of its
    slowest trigger old, and at least ``BEHIND_AT_LEAST``."""
    slowest = max(triggers, default=timedelta(0))
    return max(slowest * BEHIND_TRIGGERS, BEHIND_AT_LEAST)


class BehindAlarm:
    """A warning line while the ingest is behind -- at most one per ``every`` -- and one line
    when it has caught up; ``now`` is passed in (tests pin it)."""

    def __init__(self, threshold: timedelta, every: timedelta = WARN_EVERY) -> None:
        self.threshold, self.every = threshold, every
        self._said_at: datetime | None = None

    def check(self, backlog: Backlog, now: datetime) -> str | None:
        """The line to print for this measurement, or None."""
        behind = backlog.oldest_age is not None and backlog.oldest_age >= self.threshold
        if behind:
            if self._said_at is not None and now - self._said_at < self.every:
                return None
            self._said_at = now
            return behind_line(backlog, self.threshold)
        if self._said_at is None:
            return None
        self._said_at = None
        return f"ingest caught up: {backlog.describe()}"


def behind_line(backlog: Backlog, threshold: timedelta) -> str:
    """The warning: how far behind, and what to do about it."""
    return (
        f"warning: ingest falling behind: {backlog.describe()} in the landing directory (behind "
        f"from {fmt_duration(threshold)}); the machine is short of CPU for this rate -- slow the "
        "producers or give the ingest more cores"
    )
