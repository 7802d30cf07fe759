"""What every command shares: the resolved store, output mode, and error display.

Imported by the root group, so it imports nothing heavy at module level: psycopg and the
database layer load on first use (``slidewin --help`` and ``--version`` never connect).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    import psycopg


@dataclass
class AppContext:
    """Options of the root ``slidewin`` command; the DSN is resolved on first use only."""

    dsn_option: str | None = None
    data_dir_option: str | None = None
    debug: bool = False
    quiet: bool = False
    _dsn: str | None = field(default=None, repr=False)
    # set by the running command: did it get --json, and its totals so far (for a failure's
    # JSON line: a --json command ends stdout with one JSON object, failing or not)
    as_json: bool = False
    error_totals: Callable[[], dict[str, Any]] | None = field(default=None, repr=False)

    @property
    def data_dir(self) -> Path:
        from slidewin.db.config import data_dir

        return data_dir(self.data_dir_option)

    @property
    def dsn(self) -> str:
        if self._dsn is None:
            from slidewin.db.connect import resolve_dsn

            self._dsn = resolve_dsn(self.dsn_option, self.data_dir_option)
        return self._dsn

    @property
    def known_dsn(self) -> str | None:
        """The DSN if it is known without starting anything (for error messages)."""
        if self._dsn is not None:
            return self._dsn
        from slidewin.db.config import configured_dsn

        try:
            return configured_dsn(self.dsn_option)
        except Exception:
            return self.dsn_option

    def connect(self, *, autocommit: bool = True) -> psycopg.Connection:
        from slidewin.db.connect import connect

        return connect(self.dsn, autocommit=autocommit)

    def check_database(self) -> None:
        """Fail now, with the fix, if the database cannot be reached (before long work)."""
        with self.connect():
            pass

    def progress(self, message: str) -> None:
        """Progress goes to stderr, never mixed with data on stdout; -q silences it."""
        if not self.quiet:
            click.echo(message, err=True)

    def human(self, text: str, as_json: bool) -> None:
        """A result in words: on stdout, unless the command was given --json -- stdout then
        holds only the JSON object, so the words are progress (stderr, silenced by -q)."""
        if as_json:
            self.progress(text)
        else:
            click.echo(text)


pass_app = click.make_pass_decorator(AppContext, ensure=True)


def emit_json(obj: Any) -> None:
    """One JSON object on one line of stdout (the last line, for --json commands)."""
    sys.stdout.write(json.dumps(obj, default=str, sort_keys=True) + "\n")
    sys.stdout.flush()


def emit_json_items(obj: dict[str, Any], key: str, items: Iterable[Any]) -> None:
    """``emit_json({**obj, key: list(items)})`` written as the items come: the same line,
    without the list in memory. ``key`` must sort after every key of ``obj`` (its list ends
    the object); otherwise the list is built first."""
    if any(k >= key for k in obj):
        emit_json({**obj, key: list(items)})
        return
    head = json.dumps({**obj, key: []}, default=str, sort_keys=True)
    out = sys.stdout
    out.write(head[:-len("]}")])
    for i, item in enumerate(items):
        if i:
            out.write(", ")
        out.write(json.dumps(item, default=str, sort_keys=True))
    out.write("]}\n")
    out.flush()


def number(value: Decimal | None) -> int | float | None:
    """A numeric sum as JSON and the tables show it: whole numbers without a fraction."""
    if value is None:
        return None
    return int(value) if value == value.to_integral_value() else float(value)
