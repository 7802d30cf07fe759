"""Parsing the units people type: durations ("30s", "100ms", "5m", "1h", "2.5s") and row counts
("1000", "10k", "2M"). Errors name the bad text and show what is accepted."""

from __future__ import annotations

import re
from datetime import timedelta

from slidewin.db.errors import ConfigError
from slidewin.db.limits import MAX_DURATION, MAX_DURATION_TEXT

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_COUNT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*$")
_COUNT_UNITS = {"": 1, "k": 1_000, "m": 1_000_000, "g": 1_000_000_000}


def parse_duration(text: str, *, name: str = "duration", default_unit: str = "s") -> timedelta:
    """``"30s"`` -> 30 s; a bare number is in ``default_unit``. Negative values are refused, and
    so is anything longer than db.limits.MAX_DURATION (100 years: no option means more, and a
    time plus or minus it stays a time), before it can overflow a timedelta or a timestamp."""
    match = _DURATION.match(str(text))
    if not match:
        raise ConfigError(
            f"{name} {text!r} is not a duration; use a number with a unit, e.g. 500ms, 30s, 5m, 1h"
        )
    seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2) or default_unit]
    if seconds > MAX_DURATION.total_seconds():  # inf too: 400 nines are a float's infinity
        shown = str(text).strip()
        shown = shown if len(shown) <= 40 else f"{shown[:20]}...{shown[-8:]}"
        raise ConfigError(f"{name} {shown} is longer than the limit of {MAX_DURATION_TEXT}; "
                          "use a shorter duration")
    return timedelta(seconds=seconds)


def parse_count(text: str, *, name: str = "count") -> int:
    """``"10k"`` -> 10000; ``"2M"`` -> 2000000. Must be a whole number of rows, >= 0."""
    match = _COUNT.match(str(text))
    if not match:
        raise ConfigError(f"{name} {text!r} is not a row count; use e.g. 5000, 10k or 2M")
    value = float(match.group(1)) * _COUNT_UNITS[match.group(2).lower()]
    if value != int(value):
        raise ConfigError(f"{name} {text!r} is not a whole number of rows; use e.g. 1500 or 1.5k")
    return int(value)


def format_duration(d: timedelta) -> str:
    """A duration as people type it and ``parse_duration`` reads it back: 0s, 1500ms, 90s, 2m,
    1h, 7d (the largest unit that divides it; a fraction of a millisecond in seconds)."""
    micros = round(d / timedelta(microseconds=1))
    if micros == 0:
        return "0s"
    for unit, size in (("d", 86_400_000_000), ("h", 3_600_000_000), ("m", 60_000_000),
                       ("s", 1_000_000), ("ms", 1_000)):
        if micros % size == 0:
            return f"{micros // size}{unit}"
    return f"{micros / 1_000_000:.6f}".rstrip("0") + "s"
