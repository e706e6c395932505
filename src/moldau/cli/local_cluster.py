"""The processes behind ``moldau cluster up``: N combined nodes on loopback, watched.

A node that exits is reported (which one, its exit status, its last log lines) and the
others keep running, so failover can be watched. Other ``moldau cluster`` commands act on
the running cluster through its directory:

- ``cluster.json``: what ``up`` runs (its PID, the bootstrap servers, each node's PID,
  ports, state and log file), rewritten whenever a node changes state;
- ``control/<op>-<node id>``: a request (``kill``, ``kill9``, ``restart``) that ``up``
  carries out within a fraction of a second. ``up`` signals its own children, which it
  alone reaps, so a signal can never reach a process that merely reuses a node's PID.

Each node's output goes to ``node<N>.log`` in the directory.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moldau.storage.meta_properties import new_uuid

_LISTENING = re.compile(r"listening on (\S+):(\d+)")
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0
STATE_FILE = "cluster.json"
CONTROL_DIR = "control"
LAST_LINES = 20
# What `kill-node` may ask for: the signal, by request name.
KILL_SIGNALS = {"kill9": signal.SIGKILL, "kill": signal.SIGTERM}


def free_ports(count: int) -> list[int]:
    """Free loopback ports (held until all are chosen, so they differ)."""
    sockets = []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def exit_status(code: int) -> str:
    """Popen's return code as a person reads it."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


@dataclass
class LocalNode:
    node_id: int
    client_port: int
    controller_port: int
    data_dir: Path
    rack: str | None
    metrics_port: int | None = None
    host: str = "127.0.0.1"
    proc: subprocess.Popen[str] | None = None
    output: deque[str] = field(default_factory=lambda: deque(maxlen=2000))
    serving: bool = False  # this incarnation printed `listening on`
    reported: bool = False  # its exit was reported

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir.parent / f"node{self.node_id}.log"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def state(self) -> str:
        if self.proc is None:
            return "stopped"
        code = self.proc.poll()
        if code is not None:
            return f"exited ({exit_status(code)})"
        return "serving" if self.serving else "starting"


class LocalCluster:
    """N combined nodes on loopback, as separate processes.

    ``hosts`` gives each node its own address to bind and advertise (the fault tests put
    nodes in network namespaces)."""

    def __init__(
        self,
        nodes: int,
        data_dir: Path,
        *,
        racks: list[str] | None = None,
        metrics: bool = False,
        overrides: dict[str, str] | None = None,
        hosts: list[str] | None = None,
    ) -> None:
        ports = free_ports(3 * nodes if metrics else 2 * nodes)
        self.cluster_id = new_uuid()
        self.data_dir = data_dir
        self.nodes = [
            LocalNode(
                i + 1,
                ports[2 * i],
                ports[2 * i + 1],
                data_dir / f"node{i + 1}",
                racks[i] if racks else None,
                ports[2 * nodes + i] if metrics else None,
                hosts[i] if hosts else "127.0.0.1",
            )
            for i in range(nodes)
        ]
        self.overrides = dict(overrides or {})

    @property
    def voters(self) -> str:
        return ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in self.nodes)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def node(self, node_id: int) -> LocalNode:
        return self.nodes[node_id - 1]

    def properties(self, node: LocalNode) -> dict[str, str]:
        replication = str(min(3, len(self.nodes)))
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "cluster.id": self.cluster_id,
            "controller.quorum.voters": self.voters,
            "controller.listener.names": "CONTROLLER",
            "listeners": (
                f"PLAINTEXT://{node.host}:{node.client_port},"
                f"CONTROLLER://{node.host}:{node.controller_port}"
            ),
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(node.data_dir),
            "default.replication.factor": replication,
            "offsets.topic.replication.factor": replication,
            "transaction.state.log.replication.factor": replication,
            "remote.log.metadata.topic.replication.factor": replication,
            "group.initial.rebalance.delay.ms": "0",
        }
        if node.rack:
            props["broker.rack"] = node.rack
        if node.metrics_port is not None:
            props["metrics.port"] = str(node.metrics_port)
        props.update(self.overrides)
        return props

    # -- processes -------------------------------------------------------------------
    def start_node(self, node: LocalNode) -> None:
        cmd = [sys.executable, "-m", "moldau", "server"]
        for key, value in self.properties(node).items():
            cmd += ["-o", f"{key}={value}"]
        node.data_dir.parent.mkdir(parents=True, exist_ok=True)
        node.serving = node.reported = False
        node.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        threading.Thread(target=self._pump, args=(node, node.proc), daemon=True).start()

    @staticmethod
    def _pump(node: LocalNode, proc: subprocess.Popen[str]) -> None:
        """One incarnation's output: kept (the last lines), and appended to its log file."""
        assert proc.stdout is not None
        with node.log_file.open("a", encoding="utf-8") as log:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                node.output.append(line.rstrip())
                if _LISTENING.search(line) and node.proc is proc:
                    node.serving = True

    def start(self, cancelled: Callable[[], bool] = lambda: False) -> None:
        """Start every node and return once all serve (or ``cancelled()``)."""
        for node in self.nodes:
            self.start_node(node)
        self.publish()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        for node in self.nodes:
            while not node.serving and not cancelled():
                if not node.running or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"node {node.node_id} did not start:\n" + "\n".join(node.output)
                    )
                time.sleep(0.05)

    def stop_node(self, node: LocalNode, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (a controlled shutdown) and wait; kill -9 after ``timeout_s``."""
        self.stop([node], timeout_s)

    def stop(self, nodes: list[LocalNode] | None = None, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM the nodes (default: all) at once; each moves its leaderships away first."""
        running = [n for n in nodes or self.nodes if n.running]
        for node in running:
            assert node.proc is not None
            node.proc.send_signal(signal.SIGTERM)
        for node in running:
            assert node.proc is not None
            try:
                node.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                last = "\n".join(list(node.output)[-LAST_LINES:])
                print(
                    f"node {node.node_id} did not stop in {timeout_s:.0f} s; killing it. It "
                    f"printed last:\n{last}",
                    file=sys.stderr,
                    flush=True,
                )
                node.proc.kill()
                node.proc.wait()
            node.reported = True  # stopped on purpose: nothing to report

    # -- what `up` publishes, and the requests it takes ------------------------------
    def exited(self) -> list[LocalNode]:
        """Nodes that exited since the last call (each reported once)."""
        gone = [n for n in self.nodes if n.proc is not None and not n.running and not n.reported]
        for node in gone:
            node.reported = True
        return gone

    def state(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "cluster_id": self.cluster_id,
            "bootstrap_servers": self.bootstrap_servers,
            "nodes": [
                {
                    "id": n.node_id,
                    "pid": n.proc.pid if n.proc is not None else None,
                    "state": n.state(),
                    "bootstrap": n.bootstrap,
                    "controller_port": n.controller_port,
                    "data_dir": str(n.data_dir),
                    "log_file": str(n.log_file),
                }
                for n in self.nodes
            ],
        }

    def publish(self) -> None:
        """Write ``cluster.json`` if it changed (atomically: readers never see half)."""
        text = json.dumps(self.state(), indent=2) + "\n"
        path = self.data_dir / STATE_FILE
        if path.exists() and path.read_text() == text:
            return
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)

    def take_requests(self) -> list[tuple[str, LocalNode]]:
        """The pending ``control/`` requests, removed as taken (unknown ones dropped)."""
        requests = []
        control = self.data_dir / CONTROL_DIR
        for path in sorted(control.glob("*-*")) if control.is_dir() else ():
            op, _, node_id = path.name.rpartition("-")
            path.unlink(missing_ok=True)
            known = op in KILL_SIGNALS or op == "restart"
            if known and node_id.isdigit() and 1 <= int(node_id) <= len(self.nodes):
                requests.append((op, self.node(int(node_id))))
        return requests

    def carry_out(self, op: str, node: LocalNode) -> None:
        if op == "restart":
            self.stop_node(node)
            self.start_node(node)
        elif node.running:
            assert node.proc is not None
            node.proc.send_signal(KILL_SIGNALS[op])


def request(data_dir: Path, op: str, node_id: int) -> None:
    """Ask the ``up`` running in ``data_dir`` to carry out ``op`` on a node."""
    control = data_dir / CONTROL_DIR
    control.mkdir(exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=control, prefix=".", delete=False) as f:
        pass
    Path(f.name).replace(control / f"{op}-{node_id}")


def read_state(data_dir: Path) -> dict[str, Any] | None:
    """``cluster.json`` of a running ``up`` in ``data_dir``; None if there is none."""
    try:
        state = json.loads((data_dir / STATE_FILE).read_text())
        os.kill(int(state["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return state if isinstance(state, dict) else None


def running_clusters() -> list[Path]:
    """Directories of the running ``up``s that use a default (temporary) directory."""
    root = Path(tempfile.gettempdir())
    return [
        p.parent
        for p in sorted(root.glob(f"moldau-cluster-*/{STATE_FILE}"))
        if read_state(p.parent) is not None
    ]
