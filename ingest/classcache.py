"""A class-data-sharing (CDS) archive for the driver JVM, so Spark starts faster.

A fresh driver loads and verifies thousands of classes. The JVM can dump the classes a run
loaded into an archive when it exits (``-XX:ArchiveClassesAtExit``) and map that archive at the
next start (``-XX:SharedArchiveFile``): Spark starts, and runs its first chunk, markedly faster.
The first run with a given Java and PySpark pays for it once: it starts slower and its JVM
writes the archive (150-180 MB) as it stops.

The archive lives in the user's cache directory, named by a key of the java binary and the
PySpark installation, so an upgrade of either makes a new one (the JVM also checks the archive
and quietly ignores one that does not match). ``SLIDEWIN_CLASS_CACHE`` names another directory,
or ``off`` to turn the cache off. A JVM that is killed never finishes its dump; only a complete
archive is renamed into place.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs
import psutil

from slidewin.ingest.java import java_executable

CACHE_ENV = "SLIDEWIN_CLASS_CACHE"
PREFIX = "spark-classes-"  # every archive name starts with it, every dump with "." + it
# the JVM warns about every class it cannot archive (e.g. generated accessors): not news
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


@dataclass(frozen=True)
class ClassCache:
    """Where the archive for this Java and PySpark lives."""

    archive: Path

    @property
    def ready(self) -> bool:
        return self.archive.is_file()

    def dump_path(self) -> Path:
        """Where this process's JVM writes its dump before it is renamed into place."""
        return self.archive.with_name(f".{self.archive.stem}.{os.getpid()}.tmp")

    def java_options(self) -> str:
        """Use the archive if there is one, else have the JVM write it at exit."""
        if self.ready:
            return f"-XX:SharedArchiveFile={self.archive} {QUIET}"
        self.archive.parent.mkdir(parents=True, exist_ok=True)
        self.remove_stale_dumps()
        return f"-XX:ArchiveClassesAtExit={self.dump_path()} {QUIET}"

    def remove_stale_dumps(self) -> None:
        """Delete dumps left by JVMs that were killed (their process is gone)."""
        for dump in self.archive.parent.glob(f".{PREFIX}*.tmp"):
            pid = dump.suffixes[-2].lstrip(".") if len(dump.suffixes) >= 2 else ""
            if not pid.isdigit() or not psutil.pid_exists(int(pid)):
                dump.unlink(missing_ok=True)

    def keep_dump(self, jvm_exit_code: int | None) -> bool:
        """After the JVM exited: move a complete dump into place (else discard it)."""
        dump = self.dump_path()
        try:
            if jvm_exit_code == 0 and dump.is_file() and dump.stat().st_size > 0:
                os.replace(dump, self.archive)
                return True
            dump.unlink(missing_ok=True)
        except OSError:
            return False
        return False


def class_cache(env: dict[str, str] | None = None) -> ClassCache | None:
    """The cache for the java PySpark will run, or None (turned off, no java, or a folder
    whose path has a space: Spark splits the JVM options on spaces)."""
    env = dict(os.environ) if env is None else env
    setting = env.get(CACHE_ENV, "").strip()
    if setting.lower() == "off":
        return None
    java = java_executable(env)
    if java is None:
        return None
    folder = Path(setting).expanduser() if setting else _default_folder()
    if " " in str(folder.resolve()):
        return None
    return ClassCache(folder / f"{PREFIX}{_key(java, env)}.jsa")


def _default_folder() -> Path:
    return platformdirs.user_cache_path("slidewin") / "jvm"


def _key(java: str, env: dict[str, str]) -> str:
    """Changes when the java binary or the PySpark installation (its jars) changes."""
    import pyspark

    real = Path(java).resolve()
    jars = Path(env.get("SPARK_HOME") or Path(pyspark.__file__).parent) / "jars"
    parts = [str(real), _stamp(real), pyspark.__version__, str(jars), _stamp(jars)]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _stamp(path: Path) -> str:
    try:
        info = path.stat()
    except OSError:
        return "missing"
    return f"{info.st_size}:{info.st_mtime_ns}"
