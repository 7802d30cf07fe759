"""The one clock type: event-time decisions (what is expired, late, in the future) read "now"
through an injected ``Clock``, so tests pin it instead of waiting on the wall clock.

Durations, timeouts and sleeps are not event time: they use ``time.monotonic`` directly.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The wall clock, UTC-aware: every ``Clock`` parameter's default."""
    return datetime.now(UTC)
