"""The ``slidewin`` command line: the root group, and one module per command group.

``root`` holds the group, its error display and the table of commands (imported on first use,
so ``slidewin --help`` stays fast); ``options`` holds the shared options.
"""

from __future__ import annotations

from slidewin.client.cli.root import SlidewinGroup, cli


def main() -> None:
    cli(prog_name="slidewin")


__all__ = ["SlidewinGroup", "cli", "main"]


if __name__ == "__main__":  # pragma: no cover
    main()
