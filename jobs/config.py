"""Retention policies: what to keep (a history, a row target, or both) and how fast to nibble.

A policy is validated on construction, so a bad one never reaches the scheduler. VoltDB accepts
``history 0`` with ``max-rows 0`` and then empties the table; here a policy needs at least one
positive limit. The policy holds the *definition*; ``jobs.retention`` does the *processing*.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from slidewin.db.limits import MAX_CHUNK, MAX_DURATION, MAX_DURATION_TEXT
from slidewin.db.retention_settings import RetentionSettings
from slidewin.db.units import format_duration
from slidewin.jobs.errors import PolicyError

MAX_WORKERS = 16
MAX_YIELD = timedelta(hours=1)  # slidewin.retention_settings.yield_ms bound
SPLITS = ("global", "even")

Split = Literal["global", "even"]


@dataclass(frozen=True)
class RetentionPolicy:
    """Keep rows younger than ``history`` and/or the newest ``max_rows`` rows of the store.

    ``chunk`` caps the rows one nibble deletes (per partition per round); ``yield_`` is the pause
    after a round in which no partition filled its chunk (VoltDB's deleteyieldtime).
    ``split`` says how a global ``max_rows`` becomes per-partition targets: ``global`` keeps the
    newest ``max_rows`` rows of the whole store (to within one second, from the rollups), ``even``
    gives each partition ``max_rows / partitions`` as VoltDB does.
    ``workers`` is how many partitions a round nibbles at once (VoltDB runs a run-everywhere
    procedure on every partition in parallel); 1 nibbles them one after another.
    """

    history: timedelta | None = None
    max_rows: int | None = None
    chunk: int = 100
    yield_: timedelta = timedelta(milliseconds=100)
    split: Split = "global"
    workers: int = 1

    def __post_init__(self) -> None:
        _check_history(self.history)
        _check_max_rows(self.max_rows)
        if not self.history and not self.max_rows:
            raise PolicyError(
                "retention needs a limit: --history and --max-rows are both missing or zero "
                "(that would keep nothing, or everything); give e.g. --history 30s or --max-rows 1M"
            )
        _check_chunk(self.chunk)
        _check_yield(self.yield_)
        if self.split not in SPLITS:
            raise PolicyError(f"split {self.split!r} is not one of {', '.join(SPLITS)}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or not (
            1 <= self.workers <= MAX_WORKERS
        ):
            raise PolicyError(
                f"--workers {self.workers!r} must be from 1 to {MAX_WORKERS}: partitions "
                "nibbled at once; use 1, or 2 on a busy machine"
            )

    @property
    def history_limit(self) -> timedelta | None:
        """``history`` when it is a real limit (None or zero means "no age limit")."""
        return self.history or None

    @property
    def row_limit(self) -> int | None:
        """``max_rows`` when it is a real limit (None or zero means "no row limit")."""
        return self.max_rows or None

    def as_kwargs(self) -> dict[str, Any]:
        """Plain values (pickle- and JSON-safe) for a stored job; ``from_kwargs`` inverts it."""
        history = self.history_limit
        return {
            "history_s": history.total_seconds() if history else None,
            "max_rows": self.row_limit,
            "chunk": self.chunk,
            "yield_ms": round(self.yield_.total_seconds() * 1000, 3),
            "split": self.split,
            "workers": self.workers,
        }

    @classmethod
    def from_kwargs(cls, values: dict[str, Any]) -> RetentionPolicy:
        history_s = values.get("history_s")
        return cls(
            history=timedelta(seconds=history_s) if history_s else None,
            max_rows=values.get("max_rows"),
            chunk=int(values.get("chunk", 100)),
            yield_=timedelta(milliseconds=float(values.get("yield_ms", 100))),
            split=values.get("split", "global"),
            workers=int(values.get("workers", 1)),
        )

    @classmethod
    def from_settings(cls, settings: RetentionSettings) -> RetentionPolicy:
        """The policy a retention_settings row records (split and workers at their defaults)."""
        return cls.from_kwargs(
            {"history_s": settings.history_s, "max_rows": settings.max_rows,
             "chunk": settings.chunk, "yield_ms": settings.yield_ms}
        )

    def settings(self, name: str) -> RetentionSettings:
        """The retention_settings row recording this policy under ``name``."""
        history = self.history_limit
        return RetentionSettings(
            name,
            history.total_seconds() if history else None,
            self.row_limit,
            self.chunk,
            round(self.yield_.total_seconds() * 1000),
        )

    def describe(self) -> str:
        """One line for humans: ``history 30s, max-rows 1000000, chunk 100, yield 100ms``."""
        parts = []
        if self.history_limit:
            parts.append(f"history {self.history_limit.total_seconds():g}s")
        if self.row_limit:
            parts.append(f"max-rows {self.row_limit} ({self.split} split)")
        parts.append(f"chunk {self.chunk}")
        parts.append(f"yield {self.yield_.total_seconds() * 1000:g}ms")
        if self.workers > 1:
            parts.append(f"{self.workers} workers")
        return ", ".join(parts)


def _check_history(history: timedelta | None) -> None:
    if history is not None and not isinstance(history, timedelta):
        raise PolicyError(f"--history {history!r} is not a duration; use e.g. 30s or 5m")
    if history is not None and history < timedelta(0):
        raise PolicyError(f"--history {history} is negative; use a positive age such as 30s")
    if history is not None and history > MAX_DURATION:  # the SQL refuses it too
        raise PolicyError(f"--history {format_duration(history)} is longer than the limit of "
                          f"{MAX_DURATION_TEXT}; use a shorter history")


def _check_max_rows(max_rows: int | None) -> None:
    if max_rows is None:
        return
    if isinstance(max_rows, bool) or not isinstance(max_rows, int):
        raise PolicyError(f"--max-rows {max_rows!r} is not a whole number; use e.g. 100000 or 1M")
    if max_rows < 0:
        raise PolicyError(f"--max-rows {max_rows} is negative; use a positive count such as 1M")


def _check_chunk(chunk: int) -> None:
    if isinstance(chunk, bool) or not isinstance(chunk, int):
        raise PolicyError(f"--chunk {chunk!r} is not a whole number; use e.g. 100")
    if chunk <= 0 or chunk > MAX_CHUNK:
        raise PolicyError(
            f"--chunk {chunk} must be from 1 to {MAX_CHUNK} rows: it caps what one delete "
            "removes; use e.g. 100 (more for fast streams)"
        )


def _check_yield(yield_: timedelta) -> None:
    if not isinstance(yield_, timedelta):
        raise PolicyError(f"--yield {yield_!r} is not a duration; use e.g. 100ms")
    if yield_ < timedelta(0) or yield_ > MAX_YIELD:
        raise PolicyError(
            f"--yield {yield_} must be from 0 to 1h: it is the pause between rounds that "
            "found little to delete; use e.g. 100ms"
        )
