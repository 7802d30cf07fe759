"""The store's limits and naming rules, owned here for every layer of slidewin.

The SQL keeps its own copy where a CHECK or PL/pgSQL needs one: ``slidewin.check_chunk`` holds
the chunk cap (the retention_settings CHECK repeats it), ``slidewin.partition_name`` the
partition naming rule, ``slidewin.ensure_partitions`` and the slidewin.config CHECK the most
partitions, ``slidewin.check_duration`` the longest duration, ``slidewin.check_count_windows``
the most events of a count window. tests/test_limits.py and tests/test_definition_bounds.py check
that both sides agree.

The longest duration any option or definition takes (a stream's history and grace, a join's
within / before / after / grace / idle, a session's gap, grace and retention, a retention
policy's history, --last) is 100 years. The ingest stores event times of years 0001 to 9999,
and PostgreSQL's timestamptz reaches from 4713 BC to 294276 AD: an event time plus or minus a
few such durations (a join adds before + after + grace) stays far inside it, so no insert,
watermark or cutoff can fail with "timestamp out of range". A datetime in Python (years 1 to
9999) is the narrower bound: a reference time minus --last can fall before year 1, and is
refused where it is computed.
"""

from __future__ import annotations

from datetime import timedelta

from slidewin.db.errors import ConfigError

MAX_DURATION = timedelta(days=36_500)  # 100 years: see the module's docstring
MAX_DURATION_TEXT = "100 years (36500d)"
MAX_WINDOW_EVENTS = 1_000_000  # the most events a count window's size, advance or rows may be
MAX_CHUNK = 1_000_000  # most rows one nibble (one delete call) may remove
MAX_PARTITIONS = 1000  # partition names have three digits: events_p000 .. events_p999
MAX_NAMED_PART = MAX_PARTITIONS - 1
SCHEMA = "slidewin"
PARTITION_PREFIX = "events_p"


def partition_name(part: int) -> str:
    """``events_p003``: the table of partition ``part`` in schema slidewin (as SQL
    ``slidewin.partition_name``). ValueError outside 0 .. MAX_NAMED_PART: no such name."""
    if not 0 <= part <= MAX_NAMED_PART:
        raise ValueError(f"partition {part} has no table: parts are 0 to {MAX_NAMED_PART}")
    return f"{PARTITION_PREFIX}{part:03d}"


def partition_table(part: int) -> str:
    """``slidewin.events_p003``: the schema-qualified table of partition ``part``."""
    return f"{SCHEMA}.{partition_name(part)}"


def check_duration(name: str, value: timedelta | None, *, zero: bool = True,
                   fix: str = "use a shorter duration") -> timedelta | None:
    """``value`` when it is within 0 (``zero``: allowed, else refused) .. MAX_DURATION, else
    ConfigError naming ``name`` (the option, e.g. ``--within``), the value and the limit. None
    (absent) passes. The SQL twin is ``slidewin.check_duration``."""
    if value is None:
        return None
    from slidewin.db.units import format_duration

    if value < timedelta(0) or (not zero and value == timedelta(0)):
        least = "0 or more" if zero else "more than 0"
        raise ConfigError(f"{name} {format_duration(value)} must be {least}; "
                          f"give {name} a duration such as 1s, 30s or 5m")
    if value > MAX_DURATION:
        raise ConfigError(f"{name} {format_duration(value)} is longer than the limit of "
                          f"{MAX_DURATION_TEXT}; {fix}")
    return value


def check_window_events(size: int | None, advance: int | None, rows: int | None) -> None:
    """ConfigError naming the option when a count window's ``size``, ``advance`` or ``rows``
    is above MAX_WINDOW_EVENTS (the SQL, ``slidewin.check_count_windows``, takes integers: a
    larger number would not even reach it). Below 1 is left to the SQL's own message."""
    for name, value in (("size", size), ("advance", advance), ("rows", rows)):
        if value is not None and value > MAX_WINDOW_EVENTS:
            raise ConfigError(f"--{name} {value} is more than the limit of {MAX_WINDOW_EVENTS} "
                              f"events; ask for at most {MAX_WINDOW_EVENTS} (e.g. --{name} 1M)")
