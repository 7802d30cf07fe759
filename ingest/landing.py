"""The landing directory as the stream needs it: every file read once, nothing in it that can
stop, hang or slow the stream, and nothing left behind.

A producer's directory is hostile. The sweep runs before the queries start (so ``--once`` sees
its work) and then every ``SWEEP_EVERY_S`` in a thread of its own; each pass:

1. **Moves aside what nothing may open.** Spark's file source lists a named pipe (FIFO) as an
   empty file, and whatever opens one blocks until a writer comes; a socket or a device is no
   file either; a symbolic link that loops or leads nowhere is skipped by Spark without a word,
   forever; a file this process may not read fails every read. Such an entry, under a name a
   stream reads, is renamed into ``<landing>-rejected/`` (beside the landing directory, like the
   archive) with one ``landing:`` line saying why -- before Spark lists it, or never: an entry
   Spark listed first (between two sweeps) belongs to its batch, which reads it file by file
   and dead-letters it as ``unreadable_file`` without opening it (``ingest.stream``).
2. **Hands back files Spark would silently never read.** Spark remembers every path it has
   read (its source log) and skips that path for good, and it skips files whose modification
   time is more than ``maxFileAge`` (7 days) older than the newest file it has seen. A file at a
   path Spark read, but not the file it read -- another modification time (sent again, or
   appended to in place), or, with ``--processed archive``, the one it read is in the archive --
   is renamed ``<stem>.resent-<ms><ext>``, which Spark reads as a new file (events already stored
   count as duplicates). Only once the batch that read it has committed: renaming a file
   from under the batch reading it would fail that read. ``after_batch`` does the same for a
   batch's own files as soon as it commits, before Spark's clean-up (when it plans the next
   batch) could archive a file appended to since it was read. A file Spark has not read and
   would think too old gets its modification time set to now.
3. **Tidies what a killed run left** (the first pass only): files a committed batch read,
   unchanged and still in the landing directory, are archived or deleted as a clean stop would
   have (Spark moves a batch's files when it plans the next batch, ``ingest.tidy`` the last
   batch's at a clean stop; a SIGKILL in between leaves them).
4. **Prunes the archive** to ``--archive-for`` (``ingest.archive``), in bounded steps.

Its work grows with the entries of the landing directory and the new entries of the source
log, never with the whole history: the index holds the paths of the last ``MAX_FILE_AGE`` (what
Spark itself keeps in memory). Renames happen under one lock shared with ``after_batch``, which
runs in a batch's thread.

What it cannot tell apart: a file sent again under the same name *and* modification time
(``cp -p``) while the ingest was stopped, once the copy read before has left the archive, looks
like a file left behind, and is archived unread.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote, urlparse

from slidewin.db.clock import Clock, utc_now
from slidewin.ingest import archive
from slidewin.ingest.backlog import Folder
from slidewin.ingest.config import IngestConfig
from slidewin.ingest.parse import TEXT_EXTENSIONS
from slidewin.ingest.tidy import batch_entries, dispose, last_committed_batch

MAX_FILE_AGE = timedelta(days=7)  # Spark's default maxFileAge (not set by slidewin)
SWEEP_EVERY_S = 5.0
UNREADABLE = "a file this process may not read"
_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO), not a file",
    stat.S_IFSOCK: "a socket, not a file",
    stat.S_IFCHR: "a character device, not a file",
    stat.S_IFBLK: "a block device, not a file",
}


@dataclass
class SourceLog:
    """What one stream's source log (``<checkpoint>/sources/0``) says: path -> (modification
    time in ms of the file read, the batch that read it)."""

    folder: Path
    seen: dict[str, tuple[int, int]] = field(default_factory=dict)
    newest_ms: int = 0
    read_up_to: int = -1  # the last batch id whose log entry was read

    def refresh(self) -> None:
        ids = _log_ids(self.folder)
        compact = [i for i, is_compact in ids.items() if is_compact and i > self.read_up_to]
        start = max(compact) if compact else self.read_up_to + 1
        for batch_id in sorted(i for i in ids if i >= start):
            name = f"{batch_id}.compact" if ids[batch_id] else str(batch_id)
            self._read(self.folder / name, batch_id)
            self.read_up_to = batch_id
        self._forget_old()

    def _read(self, entry: Path, batch_id: int) -> None:
        try:
            lines = entry.read_text(encoding="utf-8").splitlines()[1:]  # first: version
        except OSError:
            return
        for text in lines:
            record = json.loads(text)
            path = unquote(urlparse(record["path"]).path)
            stamp = int(record["timestamp"])
            self.seen[path] = (stamp, int(record.get("batchId", batch_id)))
            self.newest_ms = max(self.newest_ms, stamp)

    def lists(self, path: str, mtime_ms: int) -> bool:
        """Did a batch pick up this file -- this path with this modification time?"""
        logged = self.seen.get(path)
        return logged is not None and logged[0] == mtime_ms

    def _forget_old(self) -> None:
        horizon = self.newest_ms - _ms(MAX_FILE_AGE)
        if any(ts < horizon for ts, _batch in self.seen.values()):
            self.seen = {p: v for p, v in self.seen.items() if v[0] >= horizon}


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


def hazard(entry: os.DirEntry[str]) -> str | None:
    """Why nothing may open this landing entry, or None for a readable file (or a directory,
    which is not the sweep's business)."""
    try:
        if entry.is_file(follow_symlinks=False):  # the common case: no system call
            return None if os.access(entry.path, os.R_OK) else UNREADABLE
        mode = os.stat(entry.path).st_mode  # through a symbolic link
    except OSError as exc:
        if exc.errno == errno.ENOENT and not os.path.lexists(entry.path):
            return None  # gone meanwhile (Spark archived it)
        if entry.is_symlink():
            return f"a symbolic link that loops or leads nowhere ({exc.strerror})"
        return f"an entry that cannot be examined ({exc.strerror})"
    if stat.S_ISREG(mode):
        return None if os.access(entry.path, os.R_OK) else UNREADABLE
    if stat.S_ISDIR(mode):
        return None
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def not_a_file(path: str) -> str | None:
    """Why a path Spark listed must not be opened (a named pipe, socket or device), or None.
    A batch reading it would block (a FIFO) or fail; ``ingest.stream`` dead-letters it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # missing or unreadable: the read itself says why
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


class LandingSweep:
    """Keeps the landing directory in the state the streams need (see the module docstring)."""

    def __init__(
        self, config: IngestConfig, progress: Callable[[str], None], clock: Clock = utc_now
    ) -> None:
        self.config, self.progress, self.clock = config, progress, clock
        self.indexes = {
            stream: SourceLog(config.checkpoint_for(stream) / "sources" / "0")
            for stream in config.stream_names
        }
        self.suffixes = {stream: _suffixes(config, stream) for stream in config.stream_names}
        self._lock = threading.Lock()
        self._said: set[str] = set()  # entries that could not be moved aside: said once
        self._logs: dict[Path, SourceLog] = {}  # declared streams' source logs, by checkpoint

    def sweep(self, *, leftovers: bool = False) -> int:
        """One pass; ``leftovers`` (the first pass) also tidies files a killed run left.
        Returns how many landing entries were moved, renamed or touched."""
        with self._lock:
            renamed = rename_undecodable(self.config, self.progress)
            for index in self.indexes.values():
                index.refresh()
            entries = self._entries()
            done = renamed + self._set_aside(entries)
            tidied = 0
            for stream, index in self.indexes.items():
                committed = self._committed(stream)
                for path in self._of(stream, entries):
                    outcome = self._hand_back(path, index, committed, leftovers)
                    done += outcome == "handed"
                    tidied += outcome == "tidied"
        if tidied:
            what = "archived" if self.config.processed == "archive" else "deleted"
            self.progress(
                f"landing: {what} {tidied} file(s) already stored by a run that ended before "
                "tidying them"
            )
        self.prune()
        return done + tidied

    def after_batch(self, stream: str, batch_id: int) -> int:
        """Right after ``batch_id`` committed: hand back its files changed since it read them
        (appended to in place), before Spark's clean-up archives them with the change unread."""
        index = self.indexes.get(stream)
        if index is None:
            return 0
        done = 0
        with self._lock:
            for path, read_ms in batch_entries(self.config.checkpoint_for(stream), batch_id):
                if path.parent != self.config.landing:
                    continue
                try:
                    changed = int(path.stat().st_mtime * 1000) != read_ms
                except OSError:
                    continue
                if changed:
                    done += self._rename(path)
        return done

    def _entries(self) -> list[os.DirEntry[str]]:
        """The landing directory's entries under a name some stream reads (hidden names
        ``.x`` / ``_x`` are ignored by Spark, and so here)."""
        wanted = tuple(s for suffixes in self.suffixes.values() for s in suffixes)
        try:
            with os.scandir(self.config.landing) as found:
                return [
                    e for e in found
                    if not e.name.startswith((".", "_")) and e.name.lower().endswith(wanted)
                ]
        except OSError:
            return []

    def _of(self, stream: str, entries: list[os.DirEntry[str]]) -> list[Path]:
        suffixes = self.suffixes[stream]
        return [Path(e.path) for e in entries if e.name.lower().endswith(suffixes)]

    def _committed(self, stream: str) -> int:
        last = last_committed_batch(self.config.checkpoint_for(stream))
        return -1 if last is None else last

    def _listed(self, path: str) -> bool:
        return any(path in index.seen for index in self.indexes.values())

    # --- 1. moving aside ------------------------------------------------------------------------

    def _set_aside(self, entries: list[os.DirEntry[str]]) -> int:
        moved = 0
        for entry in entries:
            if self._listed(entry.path):  # its batch dead-letters it (see the module docstring)
                continue
            why = hazard(entry)
            if why is not None:
                moved += self._move_aside(Path(entry.path), why)
        return moved

    def set_aside_declared(self, declared: Iterable[tuple[Path, Path, tuple[str, ...]]]) -> int:
        """Step 1 in each declared stream's folder (``(folder, checkpoint, suffixes)``): what
        nothing may open, under a name the stream reads, is moved aside -- unless a batch of
        the stream listed it already (that batch dead-letters it)."""
        moved = 0
        with self._lock:
            for folder, checkpoint, suffixes in declared:
                log = self._log(checkpoint)
                try:
                    with os.scandir(folder) as found:
                        entries = [e for e in found if not e.name.startswith((".", "_"))
                                   and e.name.lower().endswith(suffixes)]
                except OSError:
                    continue
                for entry in entries:
                    why = None if entry.path in log.seen else hazard(entry)
                    if why is not None:
                        moved += self._move_aside(Path(entry.path), why)
        return moved

    def _log(self, checkpoint: Path) -> SourceLog:
        """A declared stream's source log, read up to now."""
        log = self._logs.get(checkpoint)
        if log is None:
            log = self._logs[checkpoint] = SourceLog(checkpoint / "sources" / "0")
        log.refresh()
        return log

    def _move_aside(self, path: Path, why: str) -> int:
        folder = self.config.rejected_dir
        target = folder / path.name
        n = 1
        while os.path.lexists(target):
            target = folder / f"{path.name}.{n}"
            n += 1
        try:
            folder.mkdir(parents=True, exist_ok=True)
            os.rename(path, target)  # never a copy: copying would open it
        except OSError as exc:
            if path.name not in self._said:
                self._said.add(path.name)
                self.progress(
                    f"landing: {path.name} is {why}; could not move it to {folder} "
                    f"({exc.strerror}) -- remove it; the stream ignores it meanwhile"
                )
            return 0
        self.progress(f"landing: {path.name} is {why}; moved to {target} so that nothing opens it")
        return 1

    # --- 2. handing back, 3. left behind --------------------------------------------------------

    def _hand_back(self, path: Path, index: SourceLog, committed: int, leftovers: bool) -> str:
        try:
            mtime_ms = int(path.stat().st_mtime * 1000)
        except OSError:  # gone meanwhile (Spark archived it), or moved aside just now
            return ""
        logged = index.seen.get(str(path))
        if logged is not None:
            read_ms, batch = logged
            if batch > committed:  # its batch is reading it now
                return ""
            if read_ms != mtime_ms or self._archived(path):
                return "handed" if self._rename(path) else ""
            if leftovers and self.config.processed != "keep":
                dispose(path, self.config)
                return "tidied"
            return ""
        if index.newest_ms and mtime_ms < index.newest_ms - _ms(MAX_FILE_AGE):
            os.utime(path)  # Spark skips files this much older than the newest it has seen
            self.progress(f"landing: {path.name} is older than Spark reads; its time set to now")
            return "handed"
        return ""

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
            f"landing: {path.name} was read before under that name and sent again (or "
            f"appended to); renamed to {target.name} so it is read (events already stored "
            "count as duplicates)"
        )
        return 1

    # --- what is waiting (``ingest.backlog``) -----------------------------------------------------

    def folders(self, declared: Iterable[tuple[Path, Path, tuple[str, ...]]] = ()) -> list[Folder]:
        """The folders whose waiting files ``ingest.backlog`` counts: the landing directory,
        with the built-in streams' files (those their source logs list are picked up), and
        each declared stream's ``(folder, checkpoint, suffixes)``, its source log read here."""
        suffixes = tuple(s for of_stream in self.suffixes.values() for s in of_stream)
        found = [Folder(self.config.landing, suffixes, self._picked_up)]
        for folder, checkpoint, its_suffixes in declared:
            found.append(Folder(folder, its_suffixes, self._log(checkpoint).lists))
        return found

    def _picked_up(self, path: str, mtime_ms: int) -> bool:
        return any(index.lists(path, mtime_ms) for index in self.indexes.values())

    # --- 4. the archive -------------------------------------------------------------------------

    def prune(self) -> int:
        """Delete archived files older than ``--archive-for`` (bounded; see ``ingest.archive``)."""
        keep_for = self.config.archive_for
        if self.config.processed != "archive" or keep_for is None:
            return 0
        return archive.prune(archive.folder_of(self.config), keep_for, self.clock())


def _suffixes(config: IngestConfig, stream: str) -> tuple[str, ...]:
    if stream == "parquet":
        return (".parquet",)
    extensions = TEXT_EXTENSIONS.get(config.format, TEXT_EXTENSIONS["auto"])
    return tuple(f".{ext}" for ext in extensions)


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
        try:
            name.decode("utf-8")
            continue
        except UnicodeDecodeError:
            pass
        if _regular_file(entry):  # links, pipes and the like are the hazards' (set aside)
            done += _rename_to_utf8(Path(os.fsdecode(entry.path)), name, progress)
    return done


def _regular_file(entry: os.DirEntry[bytes]) -> bool:
    try:
        return entry.is_file(follow_symlinks=False)
    except OSError:
        return False


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
