"""The server's JSON: what the CLI's ``--json`` prints (``json.dumps(..., default=str)``: times
and decimals as text), with one rule more for browsers: an integer a JavaScript number cannot
hold exactly (beyond +-(2**53 - 1)) goes out as a string, so no client rounds a count or a sum
without knowing it."""

from __future__ import annotations

import json
from typing import Any

SAFE_INT = 2**53 - 1


def browser_safe(value: Any) -> Any:
    """``value`` (plain JSON types) with every integer beyond SAFE_INT as its decimal text."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if -SAFE_INT <= value <= SAFE_INT else str(value)
    if isinstance(value, dict):
        return {k: browser_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [browser_safe(v) for v in value]
    return value


def plain(obj: Any) -> Any:
    """``obj`` as the CLI's ``--json`` shows it, read back: plain JSON types only."""
    return json.loads(json.dumps(obj, default=str))


def dumps(obj: Any) -> str:
    """The body of a response: ``obj`` as the CLI shows it, browser-safe, keys sorted."""
    return json.dumps(browser_safe(plain(obj)), sort_keys=True, separators=(",", ":"))
