"""docs/cli.md is every command's ``--help``, generated from the click tree: it cannot drift.

Regenerate it after changing a command's help:

    python -m tests.test_cli_reference
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from slidewin.client.cli import cli
from tests.test_cli_help import _walk

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "cli.md"
WIDTH = 100  # a fixed width, so the text does not depend on the terminal that generates it
HEADER = """# slidewin command reference

Every command's `--help`, generated from the commands themselves (`python -m
tests.test_cli_reference` rewrites this file; `tests/test_cli_reference.py` fails when it is out
of date). The same text is one `slidewin <command> --help` (or `-h`) away.
"""


def _help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(cli, [*path, "--help"], prog_name="slidewin",
                                terminal_width=WIDTH, env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.output
    return result.output.rstrip() + "\n"


def render() -> str:
    paths = _walk(cli)
    parts = [HEADER, "## Commands\n"]
    for path in paths:
        name = " ".join(("slidewin", *path))
        anchor = "-".join(("slidewin", *path))
        parts.append(f"{'  ' * len(path)}- [`{name}`](#{anchor})")
    parts.append("")
    for path in paths:
        parts.append(f"## {' '.join(('slidewin', *path))}\n\n```text\n{_help(path)}```\n")
    return "\n".join(parts)


def test_docs_cli_md_is_every_commands_help() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == render(), (
        "docs/cli.md is out of date: run `python -m tests.test_cli_reference`")


if __name__ == "__main__":
    REFERENCE.write_text(render(), encoding="utf-8")
    print(f"wrote {REFERENCE.relative_to(ROOT)}")
