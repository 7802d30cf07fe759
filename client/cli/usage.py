"""Usage errors as one line: ``error: <what>; see `<command> -h```, exit code 2.

Click shows a usage error in four lines (the usage, a "Try ... --help" line, a blank line,
"Error: ..."); slidewin promises one ``error:`` line naming the option and the fix for every
failure. ``one_line`` rewords any ``click.UsageError`` -- a bad option value, an unknown option,
a missing option or argument, an unknown command, an extra argument -- and the root group raises
the result, which click shows and exits with (its exit code stays 2). When the failing command
has ``--json`` and was given it, stdout still ends with one JSON object saying the error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO, Any

import click

from slidewin.client.cli.context import emit_json

ARGS_KEY = "slidewin.args"  # ctx.meta: the command line as given, for the --json check


class UsageLine(click.UsageError):
    """A usage error already worded as one line."""

    def __init__(self, message: str, ctx: click.Context | None, as_json: bool) -> None:
        super().__init__(message, ctx)
        self.as_json = as_json

    def show(self, file: IO[Any] | None = None) -> None:
        if self.as_json:
            emit_json({"error": self.message, "exit_code": self.exit_code})
        click.echo(f"error: {self.message}", file=file, err=file is None)


def one_line(
    exc: click.UsageError, args: Sequence[str], command: click.Command | None = None,
    path: str = "slidewin",
) -> UsageLine:
    """``exc`` as one line naming what was wrong and where the help is. ``command`` and
    ``path`` stand in when click raised it without a context (an option missing its value)."""
    if isinstance(exc, UsageLine):
        return exc
    ctx = exc.ctx
    if ctx is not None:
        command, path = ctx.command, ctx.command_path
    return UsageLine(f"{_what(exc)}; see `{path} -h`", ctx, _wants_json(command, args))


def _what(exc: click.UsageError) -> str:
    if isinstance(exc, click.NoSuchOption):
        maybe = f" (did you mean {' or '.join(exc.possibilities)}?)" if exc.possibilities else ""
        return f"no such option {exc.option_name}{maybe}"
    if isinstance(exc, click.BadParameter) and not isinstance(exc, click.MissingParameter):
        name, message = _name(exc), _sentence(exc.message)
        return message if name is None or message.startswith(name) else f"{name}: {message}"
    return _sentence(exc.format_message())


def _name(exc: click.BadParameter) -> str | None:
    """The option as the user would type it (its longest spelling), or the argument's name."""
    hint = exc.param_hint
    if hint is not None:
        return hint if isinstance(hint, str) else " / ".join(hint)
    param = exc.param
    if param is None:
        return None
    if isinstance(param, click.Option) and param.opts:
        return max(param.opts, key=len)
    return param.human_readable_name


def _sentence(text: str) -> str:
    """One line, no closing period, lowercase first word (unless it is an acronym)."""
    text = " ".join(text.split()).rstrip(".")
    if text[:1].isupper() and not text[1:2].isupper():
        text = text[0].lower() + text[1:]
    return text


def _wants_json(command: click.Command | None, args: Sequence[str]) -> bool:
    if command is None or "--json" not in args:
        return False
    return any("--json" in param.opts for param in command.params)


def command_path(info_name: str | None, parent: click.Context | None) -> str:
    """The path click would give the context being made (``slidewin windows tumbling``)."""
    name = info_name or ""
    return f"{parent.command_path} {name}".strip() if parent is not None else name
