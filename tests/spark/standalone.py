"""A real Spark standalone cluster on loopback: one master and N worker JVMs.

Started from the pip-installed PySpark's `spark-class`, each process logging to a file that
is read to learn its port and state (no fixed sleeps). Workers can be killed with -9
together with their executors, and started again.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
START_TIMEOUT_S = 240.0


def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids, from /proc."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def descendants(pid: int) -> list[int]:
    tree = _children()
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class _Daemon:
    """One `spark-class` JVM (the script execs java, so the pid is the JVM's)."""

    def __init__(self, name: str, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.name = name
        self.args = args
        self.log = log
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *self.args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,
            )

    def wait_for(self, pattern: str, count: int = 1) -> re.Match[str]:
        """The `count`-th match of `pattern` in the log, waiting for the process to write it."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            text = self.log.read_text(errors="replace")
            matches = list(re.finditer(pattern, text))
            if len(matches) >= count:
                return matches[count - 1]
            assert self.proc is not None and self.proc.poll() is None, (
                f"{self.name} exited: {text[-3000:]}"
            )
            assert time.monotonic() < deadline, f"{self.name}: no {pattern!r}: {text[-3000:]}"
            time.sleep(0.2)

    def kill(self) -> None:
        """kill -9 the JVM and everything it started (executors, Python workers)."""
        if self.proc is None:
            return
        for pid in [self.proc.pid, *descendants(self.proc.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(30)
        self.proc = None


class StandaloneCluster:
    """`with StandaloneCluster(tmp, workers=2) as c:` ... `c.url` is `spark://127.0.0.1:PORT`."""

    def __init__(self, root: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.root = root
        self.env = {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_DAEMON_MEMORY": "256m",
            # No REST submission server on the fixed port 6066: several clusters may run.
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        }
        self.master = _Daemon(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
            ],
            root / "master.log",
            self.env,
        )
        self.url = ""
        self.workers: list[_Daemon] = []
        self._worker_count = workers
        self._cores = cores
        self._memory = memory

    def start(self) -> StandaloneCluster:
        self.master.start()
        match = self.master.wait_for(r"Starting Spark master at (spark://\S+)")
        self.url = match.group(1)
        for i in range(self._worker_count):
            work = self.root / f"worker{i}"
            work.mkdir(exist_ok=True)
            args = [
                "org.apache.spark.deploy.worker.Worker",
                *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
                *("--cores", str(self._cores), "--memory", self._memory),
                *("--work-dir", str(work), self.url),
            ]
            self.workers.append(_Daemon(f"worker{i}", args, self.root / f"worker{i}.log", self.env))
        for worker in self.workers:
            worker.start()
        for worker in self.workers:
            worker.wait_for("Successfully registered with master")
        return self

    def kill_worker(self, i: int) -> None:
        self.workers[i].kill()

    def restart_worker(self, i: int) -> None:
        """Start a killed worker again (a new registration in the same log)."""
        worker = self.workers[i]
        registered = len(re.findall("Successfully registered", worker.log.read_text()))
        worker.start()
        worker.wait_for("Successfully registered with master", registered + 1)

    def stop(self) -> None:
        for daemon in [*self.workers, self.master]:
            daemon.kill()

    def __enter__(self) -> StandaloneCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
