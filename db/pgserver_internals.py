"""The private names of pgserver (0.1.4) that ``db.embedded`` uses, and nothing else.

- ``pgserver._commands.pg_ctl`` runs the bundled pg_ctl (as ``user=`` when given); the embedded
  server is stopped with ``pg_ctl -w stop -m fast``. If pgserver drops or renames it, ``pg_ctl``
  raises ``PgCtlUnavailable`` and ``db.embedded`` does what that fast stop does itself: SIGINT
  to the postmaster (PostgreSQL's fast shutdown), wait for it to exit, and kill it if it will
  not (the WAL makes a kill safe).
- pgserver's own holder bookkeeping: ``pgdata/.handle_pids.json`` (bare pids, removed only by
  its atexit handler ``PostgresServer._cleanup``, so a SIGKILLed pid stays forever and the
  server is never stopped) and its per-process cache ``PostgresServer._instances`` (which would
  hand back a stopped server). ``switch_off_bookkeeping`` removes all three after each start.
  If pgserver renames them it raises AttributeError and starting fails with DatabaseUnavailable
  naming it: no fallback, since pgserver's bookkeeping left on would stop or keep the server
  behind ``db.embedded``'s back.
"""

from __future__ import annotations

import atexit
from pathlib import Path
from typing import Any

PIDS_FILE = ".handle_pids.json"


class PgCtlUnavailable(RuntimeError):
    """This pgserver has no ``_commands.pg_ctl``."""


def pg_ctl(args: list[str], pgdata: Path, user: str | None, timeout: float | None = None) -> str:
    """Run pgserver's bundled ``pg_ctl -D pgdata args`` (``subprocess.CalledProcessError`` when
    it fails, ``PgCtlUnavailable`` when this pgserver has none); its output."""
    try:
        from pgserver._commands import pg_ctl as bundled  # type: ignore[attr-defined]
    except ImportError as exc:
        raise PgCtlUnavailable(f"pgserver has no _commands.pg_ctl ({exc})") from None
    return bundled(args, pgdata=pgdata, user=user, timeout=timeout)


def switch_off_bookkeeping(server: Any) -> None:
    """``db.embedded`` tracks holders; pgserver's own list, exit handler and cache must not
    act."""
    atexit.unregister(server._cleanup)
    type(server)._instances.pop(server.pgdata, None)
    (server.pgdata / PIDS_FILE).unlink(missing_ok=True)
