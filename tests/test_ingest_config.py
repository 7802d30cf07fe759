"""Bad configuration fails before Spark starts, with the fix in the message (no JVM needed)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from client.cli import cli
from db.errors import ConfigError
from ingest.config import IngestConfig, resolve_retention
from ingest.java import check_java, parse_java_major
from ingest.spark import session_conf


@pytest.fixture
def no_spark(monkeypatch):
    """Fail the test if anything tries to start Spark."""

    def refuse(*_a, **_k):
        raise AssertionError("Spark was started although the configuration is bad")

    monkeypatch.setattr("ingest.spark.build_session", refuse)


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
    from ingest.errors import JavaUnavailable

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
    assert conf["spark.log.level"] == "WARN"
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
    from ingest.config import default_paths

    land, checkpoints, archive = default_paths(tmp_path, None, "ingest")
    assert land == (tmp_path / "landing").resolve() and land.is_dir()
    assert archive == (tmp_path / "landing-archive").resolve()
    named, _, _ = default_paths(tmp_path, tmp_path / "typo", "ingest")
    assert not named.exists()  # the check in IngestConfig refuses it, with the mkdir fix


def test_a_master_on_the_loopback_address_keeps_the_driver_there():
    from ingest.spark import loopback_master

    assert loopback_master("spark://127.0.0.1:7077")
    assert loopback_master("spark://localhost:7077,127.0.0.1:7078")
    assert not loopback_master("spark://spark-master:7077")
    assert not loopback_master("local[*]")
