"""Windowed answers: ``query`` (one figure over the last N seconds) and the time, count and
current windows of ``windows``, over the built-in stream or a declared one, of every key or one.

"now" is read through ``db.clock.utc_now`` at call time (tests pin it there for both the CLI and
the server).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg

from slidewin.db import clock, key_windows, streams, window_follow, windows
from slidewin.db.errors import ConfigError, ProcedureError
from slidewin.db.streams import BUILTIN
from slidewin.db.units import format_duration

QUESTIONS = ("avg", "max", "min", "sum", "count")
TIME_KINDS = ("tumbling", "hopping", "sliding")


def number(value: Decimal | None) -> int | float | None:
    """A numeric sum as JSON and the tables show it: whole numbers without a fraction."""
    if value is None:
        return None
    return int(value) if value == value.to_integral_value() else float(value)


def num(value: int | Decimal | None) -> int | float | None:
    return number(value) if isinstance(value, Decimal) else value


def iso(t: datetime | None) -> str | None:
    return t.isoformat() if t else None


def declared(stream: str, measure: str | None) -> bool:
    """True for a declared stream; the built-in one has one measure, val."""
    if stream == BUILTIN:
        if measure not in (None, "val"):
            raise ConfigError(f"--measure {measure}: the events stream has one measure, val")
        return False
    return True


# -- query ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryAnswer:
    """``slidewin query WHAT``: one figure of the last ``seconds`` whole seconds."""

    what: str
    seconds: int
    relative_to: str
    end: datetime | None
    value: Any
    rows: int
    stream: str = BUILTIN

    def as_json(self) -> dict[str, Any]:
        shown = number(self.value) if isinstance(self.value, Decimal) else self.value
        return {"what": self.what, "seconds": self.seconds, "relative_to": self.relative_to,
                "end": iso(self.end), "value": shown, "rows": self.rows,
                **({} if self.stream == BUILTIN else {"stream": self.stream})}


def query(conn: psycopg.Connection, what: str, seconds: int, relative_to: str = "now",
          stream: str = BUILTIN, measure: str | None = None) -> QueryAnswer:
    """avg, max, min, sum or count over the last ``seconds`` ending at the wall clock (now) or
    at the newest event time (stream)."""
    if what not in QUESTIONS:
        raise ConfigError(f"{what!r} is not a question; ask one of {', '.join(QUESTIONS)}")
    if not declared(stream, measure):
        end = clock.utc_now() if relative_to == "now" else windows.stream_time(conn)
        result = windows.summary(conn, seconds, end)
        values = {"avg": result.avg, "max": result.vmax, "min": result.vmin,
                  "sum": result.total, "count": result.n}
        return QueryAnswer(what, seconds, relative_to, end, values[what], result.n, stream)
    newest = clock.utc_now() if relative_to == "now" else streams.newest_second(conn, stream)
    if newest is None:  # no events: as for events, a count of 0 and no other figure
        return QueryAnswer(what, seconds, relative_to, None, 0 if what == "count" else None, 0,
                           stream)
    last = newest.replace(microsecond=0)
    found = streams.summary(conn, stream, last - timedelta(seconds=seconds - 1),
                            last + timedelta(seconds=1), measure)
    values = {"avg": found["avg"], "max": found["vmax"], "min": found["vmin"],
              "sum": found["total"], "count": found["cnt"]}
    return QueryAnswer(what, seconds, relative_to, newest, values[what], found["n"], stream)


# -- time windows -----------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowSpec:
    """Which windows: ``kind`` with ``params`` (as the JSON names them), read by ``series``;
    ``settled`` and ``place`` are what following them needs (``db.window_follow``)."""

    kind: str
    params: dict[str, Any]
    series: window_follow.Series
    settled: timedelta
    place: Callable[[windows.Window], datetime]
    stream: str = BUILTIN

    @property
    def declared(self) -> bool:
        return self.stream != BUILTIN

    @property
    def shown_params(self) -> dict[str, Any]:
        """The parameters an answer repeats: a declared stream's name first."""
        return {"stream": self.stream, **self.params} if self.declared else self.params


def _keyed(params: dict[str, Any], key: str | None) -> dict[str, Any]:
    return {**params, "key": key} if key is not None else params


def window_spec(kind: str, size: timedelta, advance: timedelta | None = None,
                key: str | None = None, stream: str = BUILTIN,
                measure: str | None = None) -> WindowSpec:
    """tumbling, hopping (needs ``advance``) or sliding windows of ``size``."""
    if kind not in TIME_KINDS:
        raise ConfigError(f"window kind {kind!r}: use one of {', '.join(TIME_KINDS)}")
    if kind == "hopping" and advance is None:
        raise ConfigError("hopping windows need --advance")
    declared(stream, measure)  # the built-in stream's one measure
    params = {"size_s": size.total_seconds()}
    if kind == "hopping":
        assert advance is not None
        params["advance_s"] = advance.total_seconds()
    settled, place = size, _start
    if kind == "sliding":
        settled, place = timedelta(seconds=1), _end
    step = advance if kind == "hopping" else None

    def series(c: psycopg.Connection, s: datetime, e: datetime) -> list[windows.Window]:
        found = streams.windows(c, stream, kind, size=size, advance=step, start=s, end=e,
                                measure=measure, key=key)
        return [streams.as_window(w) for w in found]

    return WindowSpec(kind, _keyed(params, key), series, settled, place, stream)


def _start(w: windows.Window) -> datetime:
    return w.start


def _end(w: windows.Window) -> datetime:
    return w.end


def reference_time(conn: psycopg.Connection, relative_to: str, stream: str = BUILTIN) -> datetime:
    """The end of a --last range: the wall clock, the end of the newest second holding events,
    or a given time."""
    if relative_to == "now":
        return clock.utc_now()
    if relative_to == "stream":
        if stream == BUILTIN:
            newest = windows.stream_time(conn)
        else:
            newest = streams.newest_second(conn, stream)
        if newest is None:
            raise ConfigError("--relative-to stream: the store holds no events yet; use "
                              "--relative-to now or a time, or ingest some events first")
        return newest + timedelta(seconds=1)
    return parse_time(relative_to, "--relative-to")


def parse_time(text: str, option: str) -> datetime:
    """An ISO-8601 time; without a zone it is UTC (as the ingest reads ``ts``)."""
    try:
        parsed = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{option} {text!r} is not an ISO-8601 time; use e.g. "
                          "2026-01-01T12:00:00Z") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def resolve_range(
    conn: psycopg.Connection,
    last: timedelta | None,
    from_: datetime | None,
    to: datetime | None,
    relative_to: str,
    stream: str = BUILTIN,
) -> tuple[datetime, datetime]:
    if (from_ is None) != (to is None):
        raise ConfigError("--from and --to go together; give both, or --last instead")
    if from_ is not None and to is not None:
        if last is not None:
            raise ConfigError("--last and --from/--to both given; use one of them")
        return from_, to
    end = reference_time(conn, relative_to, stream)
    span = last if last is not None else timedelta(hours=1)
    try:
        return end - span, end
    except OverflowError:  # before year 1: no time holds it
        raise ConfigError(f"--last {format_duration(span)} before {end.isoformat()} falls "
                          "before year 1; use a shorter --last or a later --relative-to") from None


_PARAM = re.compile(r"(?<![-\w])(size|advance|rows)\b|^(from|to|key)\b")


def named(exc: ProcedureError) -> ProcedureError:
    """The SQL names its parameters (``size must be ...``); the user typed options."""
    return ProcedureError(_PARAM.sub(lambda m: f"--{m.group(0)}", str(exc)))


def window_json(w: windows.Window) -> dict[str, Any]:
    return {"start": w.start.isoformat(), "end": w.end.isoformat(), "n": w.n,
            "sum": number(w.total), "min": num(w.vmin), "max": num(w.vmax), "avg": w.avg,
            "final": w.final, "partial": w.partial}


def status_json(state: windows.Completeness) -> dict[str, Any]:
    return {"stream_time": iso(state.stream_time), "complete_up_to": iso(state.complete_up_to),
            "retired_through": iso(state.retired_through), "late": state.late}


def completeness(conn: psycopg.Connection, stream: str, start: datetime,
                 end: datetime) -> windows.Completeness:
    if stream == BUILTIN:
        return windows.status(conn, start, end)
    return streams.status(conn, stream, start, end)


@dataclass(frozen=True)
class TimeWindows:
    """``windows tumbling|hopping|sliding``: the windows in ``[start, end)`` and how complete
    they are."""

    spec: WindowSpec
    start: datetime
    end: datetime
    relative_to: str
    state: windows.Completeness
    windows: list[windows.Window]

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.spec.kind, **self.spec.shown_params, "from": self.start.isoformat(),
                "to": self.end.isoformat(), "relative_to": self.relative_to,
                **status_json(self.state), "windows": [window_json(w) for w in self.windows]}


def time_windows(conn: psycopg.Connection, spec: WindowSpec, *, last: timedelta | None = None,
                 from_: datetime | None = None, to: datetime | None = None,
                 relative_to: str = "now") -> TimeWindows:
    """The windows of ``spec`` over the --last range ending at ``relative_to`` (default the
    last hour) or over [from_, to)."""
    try:
        start, end = resolve_range(conn, last, from_, to, relative_to, spec.stream)
        found = spec.series(conn, start, end)
    except ProcedureError as exc:
        raise named(exc) from None
    return TimeWindows(spec, start, end, relative_to, completeness(conn, spec.stream, start, end),
                       found)


# -- count windows ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CountWindows:
    """``windows rows``: windows of ``size`` events every ``advance`` over the newest ``rows``
    (of ``key``'s events alone when given)."""

    size: int
    advance: int | None
    rows: int | None
    stream: str
    windows: list[windows.CountWindow]
    key: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"kind": "rows", "size": self.size, "advance": self.advance or self.size,
                "rows": self.rows or self.size, "windows": [
                    {"number": w.number, "start": w.start.isoformat(), "end": w.end.isoformat(),
                     "n": w.n, "sum": number(w.total), "min": num(w.vmin), "max": num(w.vmax),
                     "avg": w.avg}
                    for w in self.windows],
                **({"stream": self.stream} if self.stream != BUILTIN else {}),
                **({"key": self.key} if self.key is not None else {})}


def count_windows(conn: psycopg.Connection, size: int, advance: int | None = None,
                  rows: int | None = None, *, key: str | None = None, stream: str = BUILTIN,
                  measure: str | None = None) -> CountWindows:
    is_declared = declared(stream, measure)
    try:
        found = (streams.count_windows(conn, stream, size, advance, rows, measure=measure,
                                       key=key)
                 if is_declared else windows.count_windows(conn, size, advance, rows, key=key))
    except ProcedureError as exc:
        raise named(exc) from None
    return CountWindows(size, advance, rows, stream, found, key)


# -- current windows (Faust's lookups) --------------------------------------------------------


@dataclass(frozen=True)
class CurrentWindows:
    """``windows current``: the window holding a time, delta(d) before it, or all of them."""

    size: timedelta
    step: timedelta
    at: datetime
    delta: timedelta | None
    key: str | None
    stream: str
    state: windows.Completeness
    found: list[windows.Window]
    all_: bool

    @property
    def picked(self) -> list[windows.Window]:
        return self.found if self.all_ else self.found[-1:]

    def as_json(self) -> dict[str, Any]:
        return {"kind": "current", "size_s": self.size.total_seconds(),
                "advance_s": self.step.total_seconds(), "at": self.at.isoformat(),
                "delta_s": (self.delta or timedelta(0)).total_seconds(),
                **_keyed({}, self.key),
                **({"stream": self.stream} if self.stream != BUILTIN else {}),
                **status_json(self.state), "windows": [window_json(w) for w in self.picked]}


def current_windows(conn: psycopg.Connection, size: timedelta, advance: timedelta | None = None,
                    delta: timedelta | None = None, all_: bool = False,
                    relative_to: str = "now", *, key: str | None = None,
                    stream: str = BUILTIN, measure: str | None = None) -> CurrentWindows:
    step = advance or size
    declared(stream, measure)  # the built-in stream's one measure
    ref = reference_time(conn, relative_to, stream)
    if relative_to == "stream":
        ref -= timedelta(microseconds=1)  # inside the newest second, not after it
    try:
        at = ref - (delta or timedelta(0))
    except OverflowError:  # before year 1: no time holds it
        raise ConfigError(f"--delta {format_duration(delta or timedelta(0))} before "
                          f"{ref.isoformat()} falls before year 1; use a shorter --delta or a "
                          "later --relative-to") from None
    try:
        found = streams.windows_at(conn, stream, size, step, at, measure=measure, key=key)
    except ProcedureError as exc:
        raise named(exc) from None
    state = completeness(conn, stream, at, at)
    return CurrentWindows(size, step, at, delta, key, stream, state, found, all_)


def key_index(conn: psycopg.Connection, on: bool | None = None,
              stream: str | None = None) -> dict[str, Any]:
    """``windows key-index``: turn ``stream``'s per-key access path on or off (default the
    built-in stream's); with ``on`` None, say which streams have it -- every stream (under
    ``streams``), or ``stream`` alone. ``key_index`` is always the one stream's: events' unless
    ``stream`` names another (then named as ``stream``, as the windows' answers do)."""
    name = stream or BUILTIN
    try:
        found = (key_windows.index_status(conn, stream) if on is None
                 else {name: key_windows.set_index(conn, on, name)})
    except ProcedureError as exc:
        if stream is None:
            raise
        raise ConfigError(f"--stream {stream}: {exc}") from None
    return {**({} if name == BUILTIN else {"stream": name}), "key_index": found[name],
            **({"streams": found} if on is None and stream is None else {})}
