"""Where the store lives: DSN resolution and the per-user data directory.

Order for the DSN: an explicit ``--dsn``, then ``SLIDEWIN_DSN``, then ``DATABASE_URL``; with none,
the embedded PostgreSQL in the data directory (``--data-dir``, else ``SLIDEWIN_DATA_DIR``, else
the per-user data folder).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import platformdirs
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from slidewin.db.errors import ConfigError

DSN_VARIABLES = ("SLIDEWIN_DSN", "DATABASE_URL")


def configured_dsn(explicit: str | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """The DSN the user asked for, or None when the embedded server should be used."""
    env = os.environ if env is None else env
    # click fills --dsn from SLIDEWIN_DSN too: name the variable when that is where it came from
    from_env = bool(explicit) and explicit == env.get("SLIDEWIN_DSN")
    explicit_source = "SLIDEWIN_DSN" if from_env else "--dsn"
    sources = ((explicit_source, explicit), *((name, env.get(name)) for name in DSN_VARIABLES))
    for source, candidate in sources:
        if candidate:
            check_dsn(candidate, source)
            return candidate
    return None


def check_dsn(dsn: str, source: str = "--dsn") -> None:
    """Raise ConfigError, naming ``source``, unless libpq can parse ``dsn``."""
    try:
        conninfo_to_dict(dsn)
    except Exception as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ConfigError(
            f"{source} {redact(dsn)!r} is not a PostgreSQL connection string ({reason}); "
            "use e.g. postgresql://user@127.0.0.1:5432/dbname"
        ) from None


def data_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The directory for the embedded server's data and Spark checkpoints."""
    chosen = explicit or os.environ.get("SLIDEWIN_DATA_DIR")
    path = Path(chosen) if chosen else platformdirs.user_data_path("slidewin")
    return path.expanduser().resolve()


def redact(dsn: str) -> str:
    """``dsn`` with any password replaced by ``***``, safe to print or log."""
    try:
        params = conninfo_to_dict(dsn)
    except Exception:
        return "<unparseable dsn>"
    if "password" in params:
        params["password"] = "***"  # noqa: S105 - a mask, not a secret
    return make_conninfo(**{k: str(v) for k, v in params.items()})
