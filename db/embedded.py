"""The embedded PostgreSQL (the ``pgserver`` package): the default store, no install needed.

The server runs from ``<data dir>/pgdata`` and listens only on a Unix socket. A process that needs
it calls ``embedded_dsn``; the server starts on first use and is shared by every slidewin process
using the same directory. pgserver counts the processes attached to it and stops the server when
the last one exits, so a command leaves nothing behind -- unless ``slidewin db start`` has left a
``keep`` marker, in which case it stays up for psql users until ``slidewin db stop``.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from db.errors import DatabaseUnavailable

# pgserver asks platformdirs for a runtime dir at import; without XDG_RUNTIME_DIR that warns on
# every command, though the /tmp fallback it takes works fine.
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")

_servers: dict[Path, Any] = {}


def pgdata(data_dir: Path) -> Path:
    return data_dir / "pgdata"


def keep_marker(data_dir: Path) -> Path:
    return data_dir / "keep-embedded-server"


def embedded_dsn(data_dir: Path, database: str = "postgres", *, keep: bool = False) -> str:
    """Start (or join) the embedded server in ``data_dir`` and return a DSN for ``database``."""
    data_dir.mkdir(parents=True, exist_ok=True)
    if keep:
        keep_marker(data_dir).touch()
    server = _server(data_dir, keep or keep_marker(data_dir).exists())
    return str(server.get_uri(database))


def is_running(data_dir: Path) -> bool:
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata(data_dir))
    return bool(info is not None and info.is_running())


def stop_embedded(data_dir: Path) -> bool:
    """Stop the embedded server in ``data_dir`` now; False when none was running there."""
    keep_marker(data_dir).unlink(missing_ok=True)
    if not is_running(data_dir):
        return False
    from pgserver._commands import pg_ctl

    user = "pgserver" if hasattr(os, "geteuid") and os.geteuid() == 0 else None
    pg_ctl(["-w", "stop", "-m", "fast"], pgdata=pgdata(data_dir), user=user)
    _servers.pop(data_dir, None)
    return True


def _server(data_dir: Path, keep: bool) -> Any:
    if data_dir in _servers:
        return _servers[data_dir]
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
            server = pgserver.get_server(pgdata(data_dir), cleanup_mode=None if keep else "stop")
    except Exception as exc:
        raise DatabaseUnavailable(
            f"could not start the embedded PostgreSQL in {pgdata(data_dir)} ({exc}); "
            "check the directory is writable, or pass --dsn to use another server"
        ) from None
    _servers[data_dir] = server
    return server
