"""Bad configuration fails before Spark starts, with the fix in the message (no JVM needed)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from slidewin.client.cli import cli
from slidewin.db.errors import ConfigError
from slidewin.ingest.config import IngestConfig, resolve_retention
from slidewin.ingest.java import check_java, parse_java_major
from slidewin.ingest.spark import session_conf


@pytest.fixture
def no_spark(monkeypatch):
    """Fail the test if anything tries to start Spark."""

    def refuse(*_a, **_k):
        raise AssertionError("Spark was started although the configuration is bad")

    monkeypatch.setattr("slidewin.ingest.spark.build_session", refuse)


def make(tmp_path: Path, **kw) -> IngestConfig:
    land = tmp_path / "landing"
    land.mkdir(exist_ok=True)
    base = {"landing": land, "checkpoint_dir": tmp_path / "cp", "archive_dir": tmp_path / "arch"}
    return IngestConfig(**{**base, **kw})


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"grace": timedelta(seconds=-1)}, "--grace -1s is negative"),
        ({"grace": timedelta(seconds=60), "history": timedelta(seconds=30)}, "no larger than"),
        ({"max_future": timedelta(seconds=-5)}, "--max-future"),
        ({"format": "xml"}, "--format 'xml'"),
        ({"processed": "shred"}, "--processed 'shred'"),
        ({"query_id": "bad id!"}, "--query-id"),
        ({"chunk": 0}, "--chunk 0"),
        ({"max_rows": -3}, "--max-rows -3"),
        ({"reconnect_timeout": timedelta(seconds=-1)}, "--reconnect-timeout -1s is negative"),
        ({"epoch_unit": "min"}, "--epoch-unit 'min' is not one of auto, s, ms, us, ns"),
        ({"streams_trigger": timedelta(0)}, "--streams-trigger 0s must be positive, e.g. 1s"),
        ({"rollups": "gpu"}, "--rollups 'gpu' is not one of driver, spark, database"),
    ],
)
def test_config_refuses_bad_values_naming_the_option(tmp_path, kw, needle):
    with pytest.raises(ConfigError, match=None) as info:
        make(tmp_path, **kw)
    assert needle in str(info.value)


def test_reconnect_timeout_defaults_to_3m_and_carries_into_the_policy(tmp_path):
    assert make(tmp_path).reconnect.timeout == timedelta(minutes=3)
    assert make(tmp_path, reconnect_timeout=timedelta(0)).reconnect.timeout == timedelta(0)


def test_missing_landing_dir_says_how_to_create_it(tmp_path):
    with pytest.raises(ConfigError, match="mkdir -p"):
        IngestConfig(landing=tmp_path / "nope", checkpoint_dir=tmp_path, archive_dir=tmp_path / "a")


def test_archive_inside_landing_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="inside the landing"):
        make(tmp_path, archive_dir=tmp_path / "landing" / "archive")


def test_streams_per_format(tmp_path):
    assert make(tmp_path).stream_names == ("text", "parquet")
    assert make(tmp_path, format="csv").stream_names == ("text",)
    assert make(tmp_path, format="parquet").stream_names == ("parquet",)


def test_retention_defaults_come_from_the_default_row(tmp_path, conn):
    conn.execute(
        "INSERT INTO slidewin.retention_settings (name, history_s, max_rows, chunk) "
        "VALUES ('default', 30, 1000, 50)"
    )
    got = resolve_retention(conn, make(tmp_path))
    assert (got.history, got.max_rows, got.chunk) == (timedelta(seconds=30), 1000, 50)
    mine = resolve_retention(conn, make(tmp_path, history=timedelta(seconds=10), chunk=7))
    assert (mine.history, mine.max_rows, mine.chunk) == (timedelta(seconds=10), 1000, 7)
    with pytest.raises(ConfigError, match="no larger than"):
        resolve_retention(conn, make(tmp_path, grace=timedelta(seconds=45)))


def test_inline_without_any_limit_is_refused(tmp_path, conn):
    with pytest.raises(ConfigError, match="--inline needs a retention limit"):
        resolve_retention(conn, make(tmp_path, inline=True))


@pytest.mark.parametrize(
    ("text", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "21" 2023-09-19', 21),
        ("garbage", None),
    ],
)
def test_parse_java_major(text, major):
    assert parse_java_major(text) == major


def test_java_missing_says_how_to_install(tmp_path):
    from slidewin.ingest.errors import JavaUnavailable

    with pytest.raises(JavaUnavailable, match="apt-get install openjdk-17-jre-headless"):
        check_java({"JAVA_HOME": str(tmp_path / "no-jdk"), "PATH": ""})
    fake = tmp_path / "old-jdk" / "bin"
    fake.mkdir(parents=True)
    (fake / "java").write_text("#!/bin/sh\necho 'java version \"1.8.0_392\"' >&2\n")
    (fake / "java").chmod(0o755)
    with pytest.raises(JavaUnavailable, match="is Java 8"):
        check_java({"JAVA_HOME": str(tmp_path / "old-jdk"), "PATH": ""})


def test_session_conf_defaults():
    conf = session_conf()
    assert conf["spark.master"] == "local[*]"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.log.level"] == "FATAL"  # Spark's own log only with -v
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert int(conf["spark.sql.shuffle.partitions"]) <= 8
    assert session_conf("spark://h:7077", ui=True)["spark.ui.enabled"] == "true"


def run_cli(args: list[str], env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, args, env=env, catch_exceptions=False)


def test_cli_missing_landing(tmp_path, store_dsn, no_spark):
    res = run_cli(["--dsn", store_dsn, "ingest", "--landing", str(tmp_path / "absent")])
    assert res.exit_code == 2
    assert "does not exist; create it with `mkdir -p" in res.output


def test_cli_negative_grace(tmp_path, store_dsn, no_spark):
    res = run_cli(["--dsn", store_dsn, "ingest", "--landing", str(tmp_path), "--grace", "-5s"])
    assert res.exit_code == 2
    assert "--grace" in res.output


def test_cli_grace_over_history(tmp_path, store_dsn, no_spark):
    args = [
        "--dsn",
        store_dsn,
        "ingest",
        "--landing",
        str(tmp_path),
        "--grace",
        "1m",
        "--history",
        "30s",
    ]
    res = run_cli(args)
    assert res.exit_code == 2
    assert "larger than --history" in res.output


def test_cli_unreachable_database(tmp_path, no_spark):
    dsn = "postgresql://nobody@127.0.0.1:1/none"
    res = run_cli(["--dsn", dsn, "ingest", "--landing", str(tmp_path)])
    assert res.exit_code == 1
    assert "cannot connect to PostgreSQL" in res.output


def test_cli_schema_missing(tmp_path, pg_admin_dsn, no_spark):
    from tests.pgfixture import create_database, drop_database

    dsn = create_database(pg_admin_dsn)
    try:
        res = run_cli(["--dsn", dsn, "ingest", "--landing", str(tmp_path)])
    finally:
        drop_database(pg_admin_dsn, dsn)
    assert res.exit_code == 1
    assert "slidewin db init" in res.output


def test_cli_java_missing(tmp_path, store_dsn, no_spark):
    env = {"JAVA_HOME": str(tmp_path / "no-jdk")}
    res = run_cli(["--dsn", store_dsn, "ingest", "--landing", str(tmp_path)], env=env)
    assert res.exit_code == 2
    assert "Java 17+" in res.output and "JAVA_HOME" in res.output


def test_cli_help_has_examples():
    res = run_cli(["ingest", "-h"])
    assert res.exit_code == 0
    assert "Examples:" in res.output and "--inline" in res.output


def test_schema_has_ingest_state_table(conn):
    assert conn.execute("SELECT to_regclass('slidewin.stream_state')").fetchone()[0] is not None
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        conn.execute("SELECT slidewin.ingest_advance('', NULL)")


def test_default_landing_is_created_but_a_named_one_must_exist(tmp_path):
    from slidewin.ingest.config import default_paths

    land, checkpoints, archive = default_paths(tmp_path, None, "ingest")
    assert land == (tmp_path / "landing").resolve() and land.is_dir()
    assert archive == (tmp_path / "landing-archive").resolve()
    named, _, _ = default_paths(tmp_path, tmp_path / "typo", "ingest")
    assert not named.exists()  # the check in IngestConfig refuses it, with the mkdir fix


def test_a_master_on_the_loopback_address_keeps_the_driver_there():
    from slidewin.ingest.spark import loopback_master

    assert loopback_master("spark://127.0.0.1:7077")
    assert loopback_master("spark://localhost:7077,127.0.0.1:7078")
    assert not loopback_master("spark://spark-master:7077")
    assert not loopback_master("local[*]")


# -- a landing folder's own name and checkpoints ---------------------------------------------------


def test_each_landing_folder_gets_a_query_id_of_its_own(tmp_path):
    from slidewin.ingest.config import query_id_for

    data = tmp_path / "data"
    assert query_id_for(data, data / "landing", None) == "ingest"
    other = query_id_for(data, tmp_path / "drop zone", None)
    assert other.startswith("ingest-drop_zone-") and len(other) == len("ingest-drop_zone-") + 8
    assert query_id_for(data, tmp_path / "elsewhere" / "drop zone", None) != other  # same name
    assert query_id_for(data, tmp_path / "drop zone", None) == other  # stable
    assert query_id_for(data, tmp_path / "drop zone", "mine") == "mine"
    make(tmp_path, query_id=other)  # a valid --query-id


def test_a_folder_ingested_as_ingest_before_keeps_that_name(tmp_path):
    """Checkpoints of the old default name that belong to this very folder are kept on."""
    from slidewin.ingest.checkpoints import claim
    from slidewin.ingest.config import query_id_for

    data = tmp_path / "data"
    old = make(tmp_path, checkpoint_dir=data / "checkpoints" / "ingest")
    claim(old)
    assert query_id_for(data, old.landing, None) == "ingest"


def test_a_checkpoint_written_before_the_record_is_known_by_its_source_log(tmp_path):
    from slidewin.ingest.checkpoints import owner_of

    folder = tmp_path / "cp"
    log = folder / "text" / "sources" / "0"
    log.mkdir(parents=True)
    (log / "0").write_text(
        'v1\n{"path":"file:///data/land%20a/f.jsonl","timestamp":1,"batchId":0}\n'
    )
    first = owner_of(folder)
    assert first is not None and first.landing == Path("/data/land a")
    assert owner_of(tmp_path / "new") is None
    (log / "0").write_text(  # a file in a subfolder: the landing folder is an ancestor
        'v1\n{"path":"file:///data/land/sub/f.jsonl","timestamp":1,"batchId":0}\n'
    )
    owner = owner_of(folder)
    assert owner is not None and owner.holds(Path("/data/land")) and owner.holds(owner.landing)
    assert not owner.holds(Path("/data/other"))


def test_a_second_landing_folder_on_one_query_id_is_refused_before_spark(
    tmp_path, no_spark, store_dsn
):
    """Two folders under one --query-id share a checkpoint; Spark failed that 30 s in with
    "Wrong basePath ... fix the cause". Now: at once, naming --query-id."""
    data = tmp_path / "data"
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    log = data / "checkpoints" / "shared" / "text" / "sources" / "0"
    log.mkdir(parents=True)  # what an ingest of folder a under --query-id shared left
    record = {"path": (tmp_path / "a" / "f.jsonl").as_uri(), "timestamp": 1, "batchId": 0}
    (log / "0").write_text(f"v1\n{json.dumps(record)}\n")
    refused = CliRunner().invoke(cli, [
        "--dsn", store_dsn, "--data-dir", str(data), "ingest", "--landing", str(tmp_path / "b"),
        "--query-id", "shared", "--once",
    ])
    assert refused.exit_code == 2, refused.output
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith(f"error: the checkpoints in {data / 'checkpoints' / 'shared'} belong")
    assert "--query-id" in line and str(tmp_path / "a") in line


def test_the_archive_keeps_files_as_long_as_the_store_keeps_events(tmp_path, conn):
    from slidewin.ingest.config import DEFAULT_ARCHIVE_FOR, FOREVER

    assert resolve_retention(conn, make(tmp_path)).archive_for == DEFAULT_ARCHIVE_FOR
    conn.execute(
        "INSERT INTO slidewin.retention_settings (name, history_s, max_rows, chunk) "
        "VALUES ('default', 30, NULL, 50)"
    )
    assert resolve_retention(conn, make(tmp_path)).archive_for == timedelta(seconds=30)
    mine = make(tmp_path, history=timedelta(minutes=10))
    assert resolve_retention(conn, mine).archive_for == timedelta(minutes=10)
    for given in (timedelta(0), timedelta(days=1), FOREVER):
        assert resolve_retention(conn, make(tmp_path, archive_for=given)).archive_for == given
    with pytest.raises(ConfigError, match="--archive-for -1s is negative"):
        make(tmp_path, archive_for=timedelta(seconds=-1))


@pytest.mark.parametrize(("text", "want"), [
    ("forever", "FOREVER"), ("Forever", "FOREVER"), ("0", timedelta(0)),
    ("90m", timedelta(minutes=90)),
])
def test_archive_for_takes_a_duration_or_forever(text, want):
    from slidewin.client.cli.ingest import ArchiveFor
    from slidewin.ingest.config import FOREVER

    assert ArchiveFor().convert(text, None, None) == (FOREVER if want == "FOREVER" else want)


def test_the_started_line_names_the_declared_streams_interval(tmp_path):
    """--streams-trigger shows on the line the ingest starts with; without it nothing changes."""
    from types import SimpleNamespace

    from slidewin.ingest.runner import _started_line

    spark = SimpleNamespace(sparkContext=SimpleNamespace(uiWebUrl=None))
    line = _started_line(make(tmp_path, streams_trigger=timedelta(seconds=1)), spark)
    assert "every 0.1s (declared streams every 1s)" in line
    assert "declared streams" not in _started_line(make(tmp_path), spark)
    assert make(tmp_path).rollups == "driver"


@pytest.mark.parametrize(
    "command", [("ingest",), ("demo",), ("bench", "ingest"), ("bench", "joins")]
)
def test_every_commands_trigger_defaults_to_the_ingests(command):
    """One default micro-batch interval (a tenth of a second) for the ingest and the commands
    that start one: a changed default reaches all of them or none."""
    import click

    from slidewin.client.cli.options import DURATION
    from slidewin.ingest.config import DEFAULT_TRIGGER

    group: click.Command = cli
    for name in command:  # lazily loaded commands: as the command line finds them
        found = group.get_command(click.Context(group), name)  # type: ignore[attr-defined]
        assert found is not None, name
        group = found
    (option,) = [p for p in group.params if p.name == "trigger"]
    assert DURATION.convert(option.default, None, None) == DEFAULT_TRIGGER
    assert DEFAULT_TRIGGER == timedelta(milliseconds=100)
