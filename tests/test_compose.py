"""docker-compose.yml and the Dockerfile, checked without a Docker engine (none runs here): the
file parses, dependencies name real services, every Spark process mounts the landing directory
where the driver reads it, the master URL names the master, and every slidewin command line in
it is a real command with real options (parsed by the CLI itself)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from slidewin.client.cli import cli

ROOT = Path(__file__).resolve().parent.parent
SPARK = ("spark-master", "spark-worker-1", "spark-worker-2", "ingest")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))


def command_lines(service: dict[str, Any]) -> list[list[str]]:
    """The service's command as argv lists (``sh -c "a && b"`` gives two)."""
    command = service.get("command", [])
    if command[:2] == ["sh", "-c"]:
        return [shlex.split(part) for part in command[2].split("&&")]
    return [command]


def check_slidewin_argv(argv: list[str]) -> None:
    """Resolve the argv against the click tree; every ``--option`` must exist where it's used."""
    assert argv[0] == "slidewin", argv
    command: click.Command = cli
    ctx = click.Context(cli)
    args = argv[1:]
    while isinstance(command, click.Group) and args and not args[0].startswith("-"):
        sub = command.get_command(ctx, args[0])
        assert sub is not None, f"no command {args[0]!r} in {argv}"
        command, args = sub, args[1:]
    # parse as click would: unknown options or bad values raise
    command.make_context(command.name or "", list(args), resilient_parsing=False)


def test_the_compose_file_describes_the_whole_pipeline(compose):
    services = compose["services"]
    assert set(services) >= {"postgres", "init", "scheduler", *SPARK}
    for name, service in services.items():
        for dependency in service.get("depends_on", []):
            assert dependency in services, f"{name} depends on unknown {dependency}"
    assert services["postgres"]["healthcheck"]


def test_the_landing_directory_is_where_the_driver_reads_it_on_every_spark_process(compose):
    services = compose["services"]
    mounts = {name: set(services[name]["volumes"]) for name in SPARK}
    assert all("./landing:/data/landing" in volumes for volumes in mounts.values()), mounts
    ingest = services["ingest"]["command"]
    assert ingest[ingest.index("--landing") + 1] == "/data/landing"
    checkpoint = ingest[ingest.index("--checkpoint-dir") + 1]
    assert any(checkpoint.startswith(v.split(":")[1]) for v in services["ingest"]["volumes"]
               if not v.startswith("./")), "checkpoints must outlive the container"


def test_every_process_finds_the_master_and_the_driver(compose):
    services = compose["services"]
    master = services["spark-master"]["command"]
    url = f"spark://{master[master.index('--host') + 1]}:{master[master.index('--port') + 1]}"
    ingest = services["ingest"]["command"]
    assert ingest[ingest.index("--master") + 1] == url
    for name in ("spark-worker-1", "spark-worker-2"):
        worker = services[name]["command"]
        assert url in worker and worker[worker.index("--host") + 1] == name
        assert worker[worker.index("--cores") + 1] == "1"
    # executors connect back to the driver by the name it advertises
    assert services["ingest"]["environment"]["SPARK_LOCAL_HOSTNAME"] == "ingest"
    assert services["ingest"]["hostname"] == "ingest"
    for name in SPARK:
        env = services[name]["environment"]
        assert env["SLIDEWIN_DSN"].startswith("postgresql://slidewin:slidewin@postgres:5432/")


def test_every_slidewin_command_line_is_real(compose):
    lines = [argv for service in compose["services"].values() for argv in command_lines(service)
             if argv and argv[0] == "slidewin"]
    assert len(lines) >= 4  # db init, jobs add, ingest, jobs run
    for argv in lines:
        check_slidewin_argv(argv)


def test_a_wrong_option_is_caught():
    with pytest.raises(click.UsageError):
        check_slidewin_argv(["slidewin", "ingest", "--no-such-option"])


def test_the_image_has_java_17_spark_and_the_project():
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert "openjdk-17-jre-headless" in text
    assert "pip install --no-cache-dir ." in text
    import pyspark

    home = next(line.split("=", 1)[1] for line in text.splitlines()
                if line.startswith("ENV SPARK_HOME="))
    assert home.endswith("/site-packages/pyspark")
    assert (Path(pyspark.__file__).parent / "bin" / "spark-class").is_file()
    for package in ("client", "db", "ingest", "jobs", "procedures", "slidewin"):
        assert f"COPY {package} ./{package}" in text
