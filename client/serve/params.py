"""The API's parameters, checked before any reaches the store: every refusal is a 400 with the
CLI's error object naming the parameter, the value and what is accepted -- never a 500.

Three layers, each catching what the one before cannot know about:

- ``guard`` (a dependency of every route) refuses a path or query value holding a NUL byte
  (PostgreSQL's text cannot hold one) or longer than ``MAX_CHARS`` (no name, key, time or
  duration is that long);
- ``validation_message`` words FastAPI's own refusals (an integer that is not one, or out of
  its ``Query(ge=, le=)`` range) as the CLI does, naming the range read from the route;
- ``duration`` and ``count`` wrap ``db.units``' parsers so a value too large for Python's
  ``timedelta`` or ``float`` is refused by name, and ``beyond_int4`` names a count too large for
  the procedures' ``integer`` parameters.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError

from slidewin.db.errors import ConfigError
from slidewin.db.units import parse_count, parse_duration

MAX_CHARS = 1000  # the longest value a path or query parameter may hold
INT4_MAX = 2**31 - 1  # the procedures take counts as integer
INT8_MAX = 2**63 - 1  # ids are bigint
SHOWN = 40  # characters of a refused value the message repeats


class ParameterError(ConfigError):
    """A path or query parameter refused before the question was asked."""


def shown(value: object) -> str:
    """``value`` as a message repeats it: quoted, escaped, and cut when long."""
    text = str(value)
    return repr(text if len(text) <= SHOWN else text[:SHOWN] + "...")


def guard(request: Request) -> None:
    """Refuse a path or query value no question can use: a NUL byte, or overlong."""
    for name, value in [*request.path_params.items(), *request.query_params.multi_items()]:
        text = str(value)
        if "\x00" in text:
            raise ParameterError(f"{name} {shown(text)} holds a NUL byte (\\x00); no name, key, "
                                 "time or duration has one: remove it")
        if len(text) > MAX_CHARS:
            raise ParameterError(f"{name} is {len(text)} characters long; use at most "
                                 f"{MAX_CHARS}")


def _bounds(request: Request, name: str) -> tuple[Any, Any]:
    """The ``ge`` and ``le`` the route declares for parameter ``name`` (None when it has none)."""
    dependant = getattr(request.scope.get("route"), "dependant", None)
    fields = [] if dependant is None else [
        *dependant.query_params, *dependant.path_params, *dependant.header_params]
    ge = le = None
    for field in fields:
        if field.alias == name:
            for rule in field.field_info.metadata:
                ge, le = getattr(rule, "ge", ge), getattr(rule, "le", le)
    return ge, le


def validation_message(request: Request, exc: RequestValidationError) -> str:
    """FastAPI's refusal of a parameter, as one line naming it, its value and what is accepted."""
    error = exc.errors()[0]
    name = str(error.get("loc", ("", "parameter"))[-1])
    kind, value = error.get("type", ""), error.get("input")
    ge, le = _bounds(request, name)
    accepted = (f"use a whole number from {ge} to {le}" if ge is not None and le is not None
                else f"use a whole number of at least {ge}" if ge is not None
                else f"use a whole number of at most {le}" if le is not None
                else "use a whole number, e.g. 20")
    if kind == "missing":
        return f"{name} is needed"
    if kind in ("greater_than_equal", "less_than_equal"):
        return f"{name} {shown(value)} is out of range; {accepted}"
    if kind.startswith("int"):
        return f"{name} {shown(value)} is not a whole number; {accepted}"
    if kind.startswith("bool"):
        return f"{name} {shown(value)} is not a yes or no; use true or false"
    return f"{name} {shown(value)}: {str(error.get('msg', 'refused')).lower()}"


def duration(text: str, name: str) -> timedelta:
    """``db.units.parse_duration``, with a value too large for a ``timedelta`` refused by name."""
    try:
        return parse_duration(text, name=name)
    except (OverflowError, ValueError):
        raise ParameterError(f"{name} {shown(text)} is out of range; use a duration of at most "
                             f"{timedelta.max.days} days, e.g. 30s, 5m or 7d") from None


def count(text: str, name: str) -> int:
    """``db.units.parse_count``, with a value too large for a float refused by name."""
    try:
        return parse_count(text, name=name)
    except (OverflowError, ValueError):
        raise ParameterError(f"{name} {shown(text)} is out of range; use a count of at most "
                             f"{INT4_MAX}") from None


def beyond_int4(counts: dict[str, int | None]) -> ParameterError | None:
    """The refusal of a count the procedures' ``integer`` parameters cannot take (None: all
    fit). Asked only once the store has failed on it, so the answers' own limits, where they
    have them, speak first."""
    for name, value in counts.items():
        if value is not None and value > INT4_MAX:
            return ParameterError(f"{name} {value} is out of range; use a count of at most "
                                  f"{INT4_MAX}")
    return None


def refusals_are_400(doc: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document ``doc`` saying what the routes answer to a refused parameter: 400
    with the error object, not FastAPI's 422 (which ``validation_message`` replaces)."""
    for item in doc.get("paths", {}).values():
        for operation in item.values():
            responses = operation.get("responses", {})
            if responses.pop("422", None) is not None:
                responses["400"] = {"description": "a parameter or question refused: "
                                                   "{\"error\": ..., \"exit_code\": 2}"}
    for name in ("HTTPValidationError", "ValidationError"):
        doc.get("components", {}).get("schemas", {}).pop(name, None)
    return doc
