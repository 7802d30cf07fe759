"""The store's limits and naming rules, owned here for every layer of slidewin.

The SQL keeps its own copy where a CHECK or PL/pgSQL needs one: ``slidewin.check_chunk`` holds
the chunk cap (the retention_settings CHECK repeats it), ``slidewin.partition_name`` the
partition naming rule, ``slidewin.ensure_partitions`` and the slidewin.config CHECK the most
partitions. tests/test_limits.py checks that both sides agree.
"""

from __future__ import annotations

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
