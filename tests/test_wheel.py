"""A normal (non-editable) install works: the wheel is built, installed into a fresh virtual
environment, and the path a new user takes runs from it -- create the schema, ingest a file,
ask a window query -- with the installed package, never this checkout.

Every other test runs against the editable install, which reads the SQL straight from the
source tree; only a wheel shows what ``package-data`` forgot (``slidewin db init`` once failed
on a missing ``procedures/migrations`` folder in a wheel install).

The fresh environment gets the wheel alone (``--no-deps``) and finds the dependencies in the
test run's own environment through a ``.pth`` line, so the test needs no network. CI also makes a
full install (``pip install dist/*.whl``, dependencies resolved) and points this test at it with
``SLIDEWIN_WHEEL_VENV``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import T0
from tests.ingest_fixtures import event, write_jsonl
from tests.pgfixture import create_database, drop_database

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.spark]


def _build_wheel(out: Path) -> Path:
    """The wheel of a copy of the sources: a build in the checkout would reuse its ``build/``
    folder, where files of an earlier build hide what the package data leaves out."""
    source = out / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(source)],
        check=True, capture_output=True, cwd=out,
    )
    (wheel,) = out.glob("slidewin-*.whl")
    return wheel


def _fresh_venv(where: Path, wheel: Path) -> Path:
    """A new environment holding the wheel; dependencies come from this environment."""
    venv.EnvBuilder(with_pip=False).create(where)
    python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
         str(wheel)],
        check=True, capture_output=True,
    )
    # a plain path line: the directory's own .pth files (this checkout's editable finder among
    # them) are not run, so `import db` can only find the wheel's copy
    Path(purelib, "slidewin_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return where


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    given = os.environ.get("SLIDEWIN_WHEEL_VENV")
    if given:
        yield Path(given)
        return
    work = tmp_path_factory.mktemp("wheel")
    yield _fresh_venv(work / "venv", _build_wheel(work))


def _slidewin(venv_dir: Path, dsn: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(SLIDEWIN_DSN=dsn, PATH=f"{venv_dir / 'bin'}:{env.get('PATH', '')}")
    done = subprocess.run(
        [str(venv_dir / "bin" / "slidewin"), *args],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=300,
    )
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    return done


SHIPPED = """
import json
from slidewin import db, procedures
names = procedures.all_files()
for name in names:
    procedures.read_sql(name)
print(json.dumps({"db": db.__file__, "procedures": procedures.__file__,
                  "files": len(names), "migrations": procedures.migrations()}))
"""

# what the installed distribution puts where imports look: only the slidewin package
INSTALLED = """
import importlib.metadata as md, importlib.util, json
files = [str(f) for f in md.files("slidewin")]
tops = sorted({f.split("/")[0] for f in files if not f.startswith(("..", "slidewin-"))})
generic = {n: importlib.util.find_spec(n) is not None
           for n in ("db", "ingest", "jobs", "client", "procedures")}
print(json.dumps({"tops": tops, "generic": generic}))
"""


def test_the_installed_package_is_the_wheels(wheel_venv: Path, tmp_path: Path) -> None:
    """Imports come from the wheel, and it holds every SQL file and migration of the sources."""
    out = subprocess.run(
        [str(wheel_venv / "bin" / "python"), "-c", SHIPPED],
        check=True, capture_output=True, text=True, cwd=tmp_path,
    ).stdout
    found = json.loads(out)
    assert str(ROOT) not in found["db"] and str(ROOT) not in found["procedures"], found
    sources = ROOT / "procedures"
    migrations = sorted(sources.glob("migrations/*.sql"))
    assert found["files"] == len(list(sources.glob("**/*.sql"))) - len(migrations)
    assert found["migrations"] == [[int(p.name[:4]), f"migrations/{p.name}"] for p in migrations]


def test_only_the_slidewin_namespace_is_installed(wheel_venv: Path, tmp_path: Path) -> None:
    """No generic top-level name (db, ingest, jobs, client, procedures) in site-packages."""
    out = subprocess.run(
        [str(wheel_venv / "bin" / "python"), "-c", INSTALLED],
        check=True, capture_output=True, text=True, cwd=tmp_path,
    ).stdout
    found = json.loads(out)
    assert found["tops"] == ["slidewin"], found
    assert not any(found["generic"].values()), found


@pytest.fixture
def empty_dsn(pg_admin_dsn: str) -> Iterator[str]:
    """A database without the slidewin schema, as a new user's is."""
    dsn = create_database(pg_admin_dsn)
    yield dsn
    drop_database(pg_admin_dsn, dsn)


def test_a_new_users_path_from_the_wheel(wheel_venv: Path, empty_dsn: str, tmp_path: Path) -> None:
    dsn = empty_dsn
    landing = tmp_path / "landing"
    landing.mkdir()
    _slidewin(wheel_venv, dsn, "db", "init", cwd=tmp_path)
    _slidewin(wheel_venv, dsn, "db", "init", cwd=tmp_path)  # idempotent, also when installed
    write_jsonl(landing, "a.jsonl", [event("k1", 10, 1), event("k2", 30, 2), event("k1", 20, 11)])
    _slidewin(wheel_venv, dsn, "--data-dir", str(tmp_path / "data"), "ingest", "--once",
              "--landing", str(landing), "--grace", "0s", cwd=tmp_path)
    start = T0.isoformat()
    end = T0.replace(minute=1).isoformat()
    out = _slidewin(wheel_venv, dsn, "windows", "tumbling", "--size", "10s", "--from", start,
                    "--to", end, "--json", cwd=tmp_path).stdout
    found = json.loads(out.strip().splitlines()[-1])
    assert [(w["n"], w["sum"]) for w in found["windows"]] == [(2, 40), (1, 20)]
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM slidewin.events").fetchone()[0] == 3
