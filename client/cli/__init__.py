"""The ``slidewin`` command line: the root group, and one module per command group, registered
here in one list (``root`` holds the group and its error display, ``options`` the shared options).
"""

from __future__ import annotations

from client.cli import bench, client, db, demo, ingest, jobs, query, windows, windows_sessions
from client.cli.root import SlidewinGroup, cli

COMMANDS = (
    db.db,
    ingest.ingest_command,
    jobs.jobs,
    query.query,
    windows.windows_group,
    client.client_command,
    demo.demo_command,
    bench.bench,
)
for _command in COMMANDS:
    cli.add_command(_command)
for _command in windows_sessions.COMMANDS:  # session windows live in the windows group
    windows.windows_group.add_command(_command)


def main() -> None:
    cli(prog_name="slidewin")


__all__ = ["SlidewinGroup", "cli", "main"]


if __name__ == "__main__":  # pragma: no cover
    main()
