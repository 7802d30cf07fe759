"""What several commands share: duration, row-count and time types (see db.units) and
``--json``. A bad value fails in click's parser, so the one-line usage error names the option."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from slidewin.db.errors import ConfigError
from slidewin.db.units import parse_count, parse_duration


class DurationType(click.ParamType):
    """A duration option: ``30s``, ``100ms``, ``5m``; a bare number is in ``default_unit``."""

    name = "duration"

    def __init__(self, default_unit: str = "s", minimum: timedelta = timedelta(0)) -> None:
        self.default_unit = default_unit
        self.minimum = minimum

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None):
        if isinstance(value, timedelta):
            return value
        label = _label(param, "duration")
        try:
            result = parse_duration(str(value), name=label, default_unit=self.default_unit)
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)
        if result < self.minimum:
            self.fail(f"{label} {value!r} is below the minimum {self.minimum}", param, ctx)
        return result


class CountType(click.ParamType):
    """A row-count option: ``5000``, ``10k``, ``2M``."""

    name = "rows"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None):
        if isinstance(value, int):
            return value
        label = _label(param, "count")
        try:
            return parse_count(str(value), name=label)
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)


class TimeType(click.ParamType):
    """An ISO-8601 time; without a zone it is UTC (as the ingest reads ``ts``)."""

    name = "time"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None):
        if isinstance(value, datetime):
            return value
        try:
            parsed = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            self.fail(f"{value!r} is not an ISO-8601 time; use e.g. 2026-01-01T12:00:00Z",
                      param, ctx)
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class RelativeToType(click.ParamType):
    """``--relative-to``: ``now``, ``stream`` or an ISO-8601 time, kept as the text given (the
    command resolves it against the store)."""

    name = "now|stream|time"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None):
        text = str(value)
        if text not in ("now", "stream"):
            try:
                TIME.convert(text, param, ctx)
            except click.BadParameter:
                self.fail(f"{text!r} is neither now, stream nor an ISO-8601 time; use e.g. "
                          "stream or 2026-01-01T12:00:00Z", param, ctx)
        return text


def _label(param: click.Parameter | None, fallback: str) -> str:
    """The option as the user typed it (its longest spelling), e.g. ``--yield``."""
    if param is None or not param.opts:
        return fallback
    return max(param.opts, key=len)


TIME = TimeType()
RELATIVE_TO = RelativeToType()
DURATION = DurationType()
DURATION_MS = DurationType(default_unit="ms")
COUNT = CountType()


def json_option(help: str = "End with one JSON object on stdout.") -> Callable[[Any], Any]:
    """``--json`` (parameter ``as_json``): the command ends stdout with one JSON object, which
    the error display also honours (see ``client.cli.root.SlidewinCommand``)."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def reconnect_timeout_option(then: str = "0 fails at once.") -> Callable[[Any], Any]:
    """``--reconnect-timeout`` (see ``db.reconnect``); ``then`` says what the command does once
    the database is back."""
    return click.option(
        "--reconnect-timeout", type=DURATION, default="3m", show_default=True,
        help="How long to wait for a database that went away (restart, dropped connection) "
        f"before giving up; {then}",
    )


# the streams a benchmark runs over, each defined in client/bench/streams.py (BENCH_STREAMS; named
# here too so that a benchmark's --help loads no data code); tests/test_bench_streams.py checks
# that the two agree
BENCH_STREAMS = ("events", "wide")


def bench_stream_option(help: str, default: str | None = "events") -> Callable[[Any], Any]:
    """``--stream`` of a benchmark: the built-in ``events`` (the default: the run as it always
    was) or a declared benchmark stream; any other name is a usage error listing the choices.
    ``default`` None: a benchmark whose run as it always was is over streams of its own."""
    return click.option("--stream", type=click.Choice(BENCH_STREAMS), default=default,
                        show_default=default is not None, help=help)


def keep_option() -> Callable[[Any], Any]:
    """``--keep``: a benchmark keeps its scratch database for a look afterwards."""
    return click.option(
        "--keep", is_flag=True, help="Keep the benchmark database instead of dropping it."
    )
