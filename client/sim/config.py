"""The client simulator's settings: VoltDB's windowing-client options, validated in one place.

Defaults are VoltDB's (displayinterval 5 s, duration 120 s, warmup 5 s, ratelimit 15000/s,
maxrows 0, historyseconds 30, deletechunksize 100, deleteyieldtime 100 ms) except ``inline``:
VoltDB defaulted to inline deletes; here the default is a separate deleter (no-inline), as the
issue asks. Unlike VoltDB, both limits may be set (both hold) and neither may be omitted: VoltDB
with both at 0 deletes everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from slidewin.client.sim.generator import FORMATS, check_keys
from slidewin.db.errors import ConfigError
from slidewin.db.limits import MAX_CHUNK

DELETERS = ("client", "jobs")


@dataclass(frozen=True)
class ClientConfig:
    """One run of the simulator. Every error names the option, the bad value and the fix."""

    landing: Path
    displayinterval: float = 5.0
    duration: float = 120.0
    warmup: float = 5.0
    ratelimit: float = 15000.0
    maxrows: int = 0
    historyseconds: float = 30.0
    inline: bool = False
    deletechunksize: int = 100
    deleteyieldtime_ms: float = 100.0
    seed: int | None = None
    fmt: str = "csv"
    deleter: str = "client"
    maxinterval_ms: float = 10.0
    reconnect_timeout: float = 180.0  # seconds to wait for a database that went away
    keys: int | None = None  # a pool of keys with bursts and pauses (None: a fresh uuid each)
    # store the options' policy as the store's `default` (False: keep a stored one -- with
    # --deleter jobs the scheduler's policy is the user's, unless they gave retention options)
    record_policy: bool = True
    burst: float = 5.0
    pause: float = 20.0

    def __post_init__(self) -> None:
        _positive("--displayinterval", self.displayinterval, "5")
        _positive("--duration", self.duration, "120")
        _at_least_zero("--warmup", self.warmup, "5")
        if self.warmup >= self.duration:
            raise ConfigError(
                f"--warmup {self.warmup:g} must be shorter than --duration {self.duration:g}, "
                "or nothing is left to measure; use e.g. --warmup 5 --duration 120"
            )
        _positive("--ratelimit", self.ratelimit, "15000")
        _at_least_zero("--maxrows", self.maxrows, "1000000 (0 = no row limit)")
        _at_least_zero("--historyseconds", self.historyseconds, "30 (0 = no age limit)")
        if not self.maxrows and not self.historyseconds:
            raise ConfigError(
                "--maxrows and --historyseconds are both 0, so retention has no limit to keep; "
                "set at least one, e.g. --historyseconds 30 or --maxrows 1000000"
            )
        if not 1 <= self.deletechunksize <= MAX_CHUNK:
            raise ConfigError(
                f"--deletechunksize {self.deletechunksize} must be from 1 to {MAX_CHUNK} rows; "
                "use e.g. 100"
            )
        _at_least_zero("--deleteyieldtime", self.deleteyieldtime_ms, "100 (milliseconds)")
        if not 1 <= self.maxinterval_ms <= 60_000:
            raise ConfigError(
                f"--maxinterval {self.maxinterval_ms:g} must be from 1 to 60000 ms; "
                "use e.g. --maxinterval 10 (VoltDB's)"
            )
        _at_least_zero("--reconnect-timeout", self.reconnect_timeout, "3m (0 = fail at once)")
        if self.fmt not in FORMATS:
            raise ConfigError(f"--format {self.fmt!r} is not one of {', '.join(FORMATS)}")
        check_keys(self.keys, self.burst, self.pause)
        if self.deleter not in DELETERS:
            raise ConfigError(f"--deleter {self.deleter!r} is not one of {', '.join(DELETERS)}")

    @property
    def history_s(self) -> float | None:
        return self.historyseconds or None

    @property
    def max_rows(self) -> int | None:
        return self.maxrows or None

    @property
    def max_window_s(self) -> int:
        """The window the max tracker watches: the retained history (30 s with a row limit)."""
        return max(1, min(86400, int(self.historyseconds) or 30))

    @property
    def runs_deleter(self) -> bool:
        """Whether this process deletes: not when inline (ingest does) or the scheduler does."""
        return not self.inline and self.deleter == "client"


def _positive(option: str, value: float, example: str) -> None:
    if not value > 0:
        raise ConfigError(f"{option} {value:g} must be > 0; use e.g. {option} {example}")


def _at_least_zero(option: str, value: float, example: str) -> None:
    if value < 0:
        raise ConfigError(f"{option} {value:g} must be >= 0; use e.g. {option} {example}")
