"""A Spark standalone cluster on this machine, from the installed PySpark: one master, N workers.

What a user types by hand (see the README's "Running on a Spark cluster") -- ``bin/spark-class
org.apache.spark.deploy.master.Master`` and ``...worker.Worker spark://host:port`` -- as a
context manager, for the cluster test and ``slidewin bench ingest --master``: every process in a
session of its own, bound to 127.0.0.1, logs in ``work_dir``; ``start`` returns once the master
reports every worker alive, ``stop`` ends them all (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class ClusterError(RuntimeError):
    """The cluster did not come up; the message carries the tail of the failing log."""


def spark_home() -> Path:
    """The installed PySpark's directory: it holds ``bin/spark-class`` and the jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@dataclass
class LocalCluster:
    """A standalone master and ``workers`` workers of ``cores`` cores and ``memory`` each."""

    work_dir: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def start(self, timeout_s: float = 120.0) -> LocalCluster:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._launch("master", MASTER_CLASS, "--host", HOST, "--port", str(self.port),
                         "--webui-port", str(self.ui_port))
            for k in range(self.workers):
                worker_dir = self.work_dir / f"worker-{k}"
                worker_dir.mkdir(exist_ok=True)
                self._launch(f"worker-{k}", WORKER_CLASS, self.url, "--host", HOST,
                             "--cores", str(self.cores), "--memory", self.memory,
                             "--webui-port", str(free_port()), "--work-dir", str(worker_dir))
            self._wait_for_workers(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, name: str, main_class: str, *args: str) -> None:
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": HOST,
               "SPARK_NO_DAEMONIZE": "1"}
        log = (self.work_dir / f"{name}.log").open("ab")
        try:
            proc = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), main_class, *args],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )
        finally:
            log.close()  # the child holds its own descriptor
        self.procs.append(proc)

    def alive_workers(self) -> int:
        """Workers the master reports ALIVE (its web UI's JSON), 0 when it does not answer."""
        try:
            url = f"http://{HOST}:{self.ui_port}/json/"
            with urllib.request.urlopen(url, timeout=2) as reply:
                state = json.load(reply)
        except (OSError, ValueError):
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def _wait_for_workers(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while self.alive_workers() < self.workers:
            dead = [p for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                why = "a process exited" if dead else f"not up after {timeout_s:.0f} s"
                raise ClusterError(f"Spark standalone cluster: {why}\n{self._log_tails()}")
            time.sleep(0.3)

    def _log_tails(self, lines: int = 15) -> str:
        tails = []
        for log in sorted(self.work_dir.glob("*.log")):
            text = log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
            tails.append(f"--- {log.name}\n" + "\n".join(text))
        return "\n".join(tails)

    def kill_worker(self, index: int) -> None:
        """SIGKILL one worker and its executors (a machine lost, for tests)."""
        proc = self.procs[1 + index]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Workers first, then the master; each process group gets SIGTERM, then SIGKILL."""
        for proc in reversed(self.procs):
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
            _signal_group(proc, signal.SIGKILL)  # an executor JVM left in the group
        self.procs.clear()

    def __enter__(self) -> LocalCluster:
        return self.start() if not self.procs else self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
