"""`moldau cluster up` as a user runs it: a node killed -9 is reported while the others keep
serving an RF=3 topic, `restart-node` brings it back into the ISR, Ctrl-C stops everything
and the default temporary directory goes away."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from moldau.testing import ClusterProcess
from moldau.testing.clients import ExternalCluster

MOLDAU = [sys.executable, "-m", "moldau"]


class Up:
    """`moldau cluster up` in a subprocess; its output lines collected as they come."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [*MOLDAU, "cluster", "up", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())

    def wait_for(self, pattern: str, timeout: float = 90) -> re.Match[str]:
        def found() -> re.Match[str] | None:
            assert self.proc.poll() is None, "\n".join(self.lines)
            return next((m for line in self.lines if (m := re.search(pattern, line))), None)

        return ClusterProcess.wait_until(found, timeout)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.reader.join(10)
        return code


def control(*args: str) -> str:
    done = subprocess.run([*MOLDAU, "cluster", *args], capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr
    return done.stdout


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_a_killed_node_is_reported_the_others_serve_and_restart_node_brings_it_back() -> None:
    up = Up("--nodes", "3", "--no-metrics", "-o", "broker.session.timeout.ms=3000")
    try:
        base = Path(up.wait_for(r"data in (\S+) \(removed on exit\)").group(1))
        bootstrap = up.wait_for(r"bootstrap servers: (\S+)").group(1)
        up.wait_for("press Ctrl-C to stop")
        state = json.loads((base / "cluster.json").read_text())
        pids = [n["pid"] for n in state["nodes"]]
        cluster = ExternalCluster(bootstrap)
        topic = cluster.create_topic("orders", 1, replication_factor=3, min_insync_replicas=2)
        acked = cluster.produce(topic, *(f"before-{i}" for i in range(20)))
        admin = AdminClient({"bootstrap.servers": bootstrap})
        leader = admin.list_topics(topic, timeout=30).topics[topic].partitions[0].leader

        assert "killed by SIGKILL" in control("kill-node", str(leader), "--dir", str(base))
        up.wait_for(rf"node {leader} exited \(killed by SIGKILL\); the other nodes keep running")
        assert any("listening on" in line for line in up.lines[-25:])  # its last log lines
        acked += cluster.produce(topic, *(f"after-{i}" for i in range(20)))
        assert [r.value for r in cluster.consume(topic, 40)] == [r.value for r in acked]

        assert "serving at" in control("restart-node", str(leader), "--dir", str(base))

        def back_in_isr() -> bool:
            partition = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
            return sorted(partition.isrs) == [1, 2, 3]

        ClusterProcess.wait_until(back_in_isr, timeout=60)
        pids += [n["pid"] for n in json.loads((base / "cluster.json").read_text())["nodes"]]
    finally:
        code = up.stop()
    assert code == 0, "\n".join(up.lines)
    assert "stopping" in up.lines
    assert not [pid for pid in pids if alive(pid)], "a node outlived `moldau cluster up`"
    assert not base.exists()


def test_kill_node_without_a_running_cluster_is_one_clear_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [*MOLDAU, "cluster", "kill-node", "1", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr == f"moldau cluster: no `moldau cluster up` is running in {tmp_path}\n"
