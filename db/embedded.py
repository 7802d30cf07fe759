"""The embedded PostgreSQL (the ``pgserver`` package): the default store, no install needed.

The server runs from ``<data dir>/pgdata``, listens only on a Unix socket, and is shared by every
slidewin process using the same data dir.

Holders. A process that calls ``embedded_dsn`` becomes a *holder*: it is listed in
``<data dir>/embedded-holders.json`` as (pid, process start time) and takes itself off at exit.
The holder that leaves the list empty stops the server -- unless ``slidewin db start`` left the
``keep-embedded-server`` marker, then the server stays up for psql until ``slidewin db stop``.
A holder killed by SIGKILL (or an unhandled SIGTERM, or the OOM killer) never runs its exit
handler, so every attach and every detach first prunes the entries whose process is gone, is a
zombie, or whose pid now names a process started at another time (pid reuse). After such a kill
the next command to run (and end) stops the server if no live holder is left; nothing stops it
before a next command runs.

A dead server. A postmaster killed with SIGKILL leaves ``postmaster.pid`` behind, and its pid
may since have been reused. The postmaster counts as running only if that pid is a ``postgres``
process whose working directory is pgdata and whose start time matches the file. Otherwise the
next attach kills any orphaned backends (``postgres`` processes working in pgdata), removes the
stale lock files and starts a fresh server; PostgreSQL's crash recovery replays the WAL.

A child handed the server's DSN by its parent (the demo's ingest and scheduler) does not call
``embedded_dsn``; it calls ``hold`` instead, which enters it in the holder list without starting
anything, so that a parent killed outright does not leave the children without a server: the
next command sees them, and the last of them to end stops the server (``data_dir_serving``
tells the parent which data dir a DSN it was handed belongs to).

Invariant: the holder list, starting and stopping all happen under an exclusive ``flock`` on
``<data dir>/embedded.lock`` (released by the kernel if its owner is killed), so a command that
attaches while the last holder detaches either joins the running server or starts a new one
after the stop -- it never gets the DSN of a server being stopped.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from slidewin.db import pgserver_internals
from slidewin.db.errors import DatabaseUnavailable

# pgserver asks platformdirs for a runtime dir at import; without XDG_RUNTIME_DIR that warns on
# every command, though the /tmp fallback it takes works fine.
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")

# What this module relies on in pgserver 0.1.4, and what breaks if pgserver changes it:
# - ``pgserver.get_server(pgdata, cleanup_mode=None)`` runs initdb when needed, starts the server
#   on a Unix socket (as a ``pgserver`` user when we are root, chowning pgdata to it) and returns
#   an object whose ``get_uri(database)`` is the DSN; with cleanup_mode=None it never stops it.
# - pgserver tracks holders itself and caches servers per process; its private names (that
#   bookkeeping, and the bundled pg_ctl that stops the server) are used only through
#   ``db.pgserver_internals``, which says what breaks if they change and what happens then.
# The ``postmaster.pid`` layout (pid, pgdata, start time, port, socket dir, ...) is PostgreSQL's.

HOLDERS_FILE = "embedded-holders.json"
LOCK_FILE = "embedded.lock"
# psutil derives a start time from clock ticks since boot: the same process always reads the
# same value; a reused pid belongs to a process started long after the pid space wrapped.
_SAME_PROCESS_S = 1.0
# postmaster.pid holds the start time in whole seconds, written just after pg_ctl forked it.
_SAME_POSTMASTER_S = 5.0
_EXIT_WAIT_S = 10.0
_STOP_WAIT_S = 60.0  # what ``pg_ctl -w`` waits for a stop by default

_servers: dict[Path, Any] = {}
_registered: set[Path] = set()
_handed_out: dict[str, Path] = {}  # DSN -> the data dir of the server it names


@dataclass(frozen=True)
class Holder:
    """A process attached to the embedded server, named by pid and start time (pids get reused)."""

    pid: int
    started: float

    @classmethod
    def me(cls) -> Holder:
        return cls(os.getpid(), _started(os.getpid()) or 0.0)

    def alive(self) -> bool:
        started = _started(self.pid)
        return started is not None and abs(started - self.started) < _SAME_PROCESS_S


def pgdata(data_dir: Path) -> Path:
    return data_dir / "pgdata"


def keep_marker(data_dir: Path) -> Path:
    return data_dir / "keep-embedded-server"


def embedded_dsn(data_dir: Path, database: str = "postgres", *, keep: bool = False) -> str:
    """Start (or join) the embedded server in ``data_dir`` and return a DSN for ``database``."""
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    if keep:
        keep_marker(data_dir).touch()
    if data_dir not in _servers or not is_running(data_dir):  # stopped or killed since: restart
        _servers[data_dir] = _attach(data_dir)
    dsn = str(_servers[data_dir].get_uri(database))
    _handed_out[dsn] = data_dir
    return dsn


def data_dir_serving(dsn: str) -> Path | None:
    """The data dir whose embedded server ``dsn`` (as ``embedded_dsn`` returned it in this
    process) names; None for any other DSN."""
    return _handed_out.get(dsn)


def hold(data_dir: Path) -> None:
    """Enter this process in the holder list of the server in ``data_dir`` without starting it
    (a child given the server's DSN); it leaves at exit, stopping the server if it is last."""
    data_dir = data_dir.resolve()
    if not data_dir.is_dir():
        return
    _register_detach(data_dir)
    with _locked(data_dir):
        holders = [h for h in _read_holders(data_dir) if h.alive() and h.pid != os.getpid()]
        _write_holders(data_dir, [*holders, Holder.me()])


def is_running(data_dir: Path) -> bool:
    return server_pid(data_dir) is not None


def server_pid(data_dir: Path) -> int | None:
    """The pid of the embedded server's postmaster, None when it is not running."""
    proc = _postmaster(pgdata(data_dir.resolve()))
    return proc.pid if proc is not None else None


def live_holders(data_dir: Path) -> list[Holder]:
    """The processes attached to the embedded server now (dead entries are left out)."""
    return [h for h in _read_holders(data_dir.resolve()) if h.alive()]


def describe(data_dir: Path) -> dict[str, Any]:
    """What ``slidewin db status`` shows of the embedded server: pid, holders, keep marker."""
    data_dir = data_dir.resolve()
    return {
        "pgdata": str(pgdata(data_dir)),
        "server_pid": server_pid(data_dir),
        "holders": [h.pid for h in live_holders(data_dir)],
        "kept": keep_marker(data_dir).exists(),
    }


def stop_embedded(data_dir: Path) -> bool:
    """Stop the embedded server in ``data_dir`` now; False when none was running there."""
    data_dir = data_dir.resolve()
    keep_marker(data_dir).unlink(missing_ok=True)
    _servers.pop(data_dir, None)
    if not data_dir.is_dir():
        return False
    with _locked(data_dir):
        return _stop_if_running(pgdata(data_dir))


# --- attach and detach ---------------------------------------------------------------------------


def _attach(data_dir: Path) -> Any:
    """Join (starting it if needed) the server and enter this process in the holder list."""
    # Registered first: should the start fail half-way, the exit still stops what nobody holds.
    _register_detach(data_dir)
    with _locked(data_dir):
        holders = [h for h in _read_holders(data_dir) if h.alive() and h.pid != os.getpid()]
        _clear_dead_server(pgdata(data_dir))
        server = _start(pgdata(data_dir))
        _write_holders(data_dir, [*holders, Holder.me()])
    return server


def _register_detach(data_dir: Path) -> None:
    if data_dir not in _registered:
        atexit.register(_detach, data_dir, os.getpid())
        _registered.add(data_dir)


def _detach(data_dir: Path, pid: int) -> None:
    """At exit: leave the holder list; the last live holder stops the server (unless kept)."""
    if os.getpid() != pid or not data_dir.is_dir():  # a forked child inherited the handler
        return
    try:
        with _locked(data_dir):
            holders = [h for h in _read_holders(data_dir) if h.alive() and h.pid != pid]
            _write_holders(data_dir, holders)
            if not holders and not keep_marker(data_dir).exists():
                _stop_if_running(pgdata(data_dir))
    except Exception as exc:  # at exit there is no caller left to handle it
        sys.stderr.write(
            f"slidewin: could not stop the embedded PostgreSQL in {pgdata(data_dir)} ({exc}); "
            "stop it with: slidewin db stop\n"
        )


@contextlib.contextmanager
def _locked(data_dir: Path) -> Iterator[None]:
    with open(data_dir / LOCK_FILE, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield  # closing the file releases the lock


def _read_holders(data_dir: Path) -> list[Holder]:
    try:
        rows = json.loads((data_dir / HOLDERS_FILE).read_text())
        return [Holder(int(row["pid"]), float(row["started"])) for row in rows]
    except (OSError, ValueError, TypeError, KeyError):
        return []  # missing or torn: the live holders are written back on their next detach


def _write_holders(data_dir: Path, holders: list[Holder]) -> None:
    """Replace the list atomically, so that a reader never sees half a file."""
    tmp = data_dir / f".{HOLDERS_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps([asdict(h) for h in holders]))
    os.replace(tmp, data_dir / HOLDERS_FILE)


def _started(pid: int) -> float | None:
    """When process ``pid`` started; None if there is none (a zombie counts as none)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc.create_time()
    except psutil.Error:
        return None


# --- the server ----------------------------------------------------------------------------------


def _start(pg: Path) -> Any:
    try:
        import pgserver
    except ImportError as exc:  # pragma: no cover - pgserver is a hard dependency
        raise DatabaseUnavailable(
            f"the embedded PostgreSQL needs the pgserver package ({exc}); "
            "pip install pgserver, or pass --dsn"
        ) from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = pgserver.get_server(pg, cleanup_mode=None)
        pgserver_internals.switch_off_bookkeeping(server)
    except Exception as exc:
        raise DatabaseUnavailable(
            f"could not start the embedded PostgreSQL in {pg} ({exc}); "
            "check the directory is writable, or pass --dsn to use another server"
        ) from None
    return server


def _stop_if_running(pg: Path) -> bool:
    """Stop the server in ``pg`` (clearing up after a dead one); True when one was running."""
    postmaster = _postmaster(pg)
    if postmaster is None:
        _clear_dead_server(pg)
        return False
    try:
        pgserver_internals.pg_ctl(["-w", "stop", "-m", "fast"], pgdata=pg, user=_system_user())
    except pgserver_internals.PgCtlUnavailable:
        _fast_shutdown(postmaster)
        _clear_dead_server(pg)
    except subprocess.CalledProcessError:
        postmaster.kill()  # it would not stop cleanly; the WAL makes a kill safe
        _wait_gone([postmaster])
        _clear_dead_server(pg)
    return True


def _fast_shutdown(postmaster: psutil.Process) -> None:
    """What ``pg_ctl -w stop -m fast`` does, without pg_ctl: SIGINT (PostgreSQL's fast
    shutdown) and wait for the postmaster to exit; kill it if it will not."""
    with contextlib.suppress(psutil.Error):
        postmaster.send_signal(signal.SIGINT)
    _wait_gone([postmaster], _STOP_WAIT_S)
    if _started(postmaster.pid) is not None:
        with contextlib.suppress(psutil.Error):
            postmaster.kill()  # the WAL makes a kill safe
        _wait_gone([postmaster])


def _system_user() -> str | None:
    """pgserver runs postgres as ``pgserver`` when we are root (postgres refuses root)."""
    return "pgserver" if hasattr(os, "geteuid") and os.geteuid() == 0 else None


def _pidfile_lines(pg: Path) -> list[str]:
    try:
        return (pg / "postmaster.pid").read_text().splitlines()
    except OSError:
        return []


def _postmaster(pg: Path) -> psutil.Process | None:
    """The live postmaster named by ``pg/postmaster.pid``; None if absent, dead or pid reused."""
    lines = _pidfile_lines(pg)
    try:
        proc = psutil.Process(int(lines[0]))
        file_started = int(lines[2]) if len(lines) > 2 else None
        if proc.status() == psutil.STATUS_ZOMBIE or not _works_in(proc, pg):
            return None
        if file_started is not None and abs(proc.create_time() - file_started) > _SAME_POSTMASTER_S:
            return None
    except (IndexError, ValueError, psutil.Error):
        return None
    return proc


def _works_in(proc: psutil.Process, pg: Path) -> bool:
    """``proc`` is a postgres process of the cluster in ``pg`` (postgres chdirs to its pgdata)."""
    try:
        return proc.name() == "postgres" and Path(proc.cwd()) == pg.resolve()
    except psutil.Error:
        return False


def _clear_dead_server(pg: Path) -> None:
    """With no live postmaster: end its orphaned backends and drop the stale lock files."""
    lines = _pidfile_lines(pg)
    if not lines or _postmaster(pg) is not None:
        return
    orphans = [p for p in psutil.process_iter(["name"]) if _works_in(p, pg)]
    for proc in orphans:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    _wait_gone(orphans)
    for stale in _socket_files(lines):
        stale.unlink(missing_ok=True)
    (pg / "postmaster.pid").unlink(missing_ok=True)


def _wait_gone(procs: list[psutil.Process], timeout_s: float = _EXIT_WAIT_S) -> None:
    """Poll until ``procs`` exited, at most ``timeout_s``. Not psutil.wait_procs: killed processes
    that are not our children stay zombies when init does not reap them (containers), and
    psutil waits on zombies until the timeout although they hold nothing any more."""
    deadline = time.monotonic() + timeout_s
    while any(_started(p.pid) is not None for p in procs) and time.monotonic() < deadline:
        time.sleep(0.05)


def _socket_files(pidfile_lines: list[str]) -> list[Path]:
    """The socket and its lock file named by postmaster.pid (line 4: port, line 5: directory)."""
    if len(pidfile_lines) < 5 or not pidfile_lines[4].strip():
        return []
    socket = Path(pidfile_lines[4].strip()) / f".s.PGSQL.{pidfile_lines[3].strip()}"
    return [socket, socket.with_name(socket.name + ".lock")]
