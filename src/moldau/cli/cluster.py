"""`moldau cluster`: run a local KRaft cluster, and describe any cluster.

``up`` starts N combined nodes (broker and controller) as separate processes on free
loopback ports, all voters of one controller quorum, prints the bootstrap servers and
stops them cleanly on Ctrl-C. ``describe`` shows brokers (fenced or not), the controller
quorum (DescribeQuorum: leader, epoch, voters and their lag) and every partition's
leader, replicas and ISR, from any Kafka-protocol cluster.
"""

from __future__ import annotations

import asyncio
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from moldau.admin.cluster import describe_cluster
from moldau.storage.meta_properties import new_uuid

app = typer.Typer(help="Run a local cluster, or describe one.", no_args_is_help=True)

_LISTENING = re.compile(r"listening on (\S+):(\d+)")
STARTUP_TIMEOUT_S = 60.0


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
    output: list[str] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.client_port}"


class LocalCluster:
    """N combined nodes on loopback: the processes behind ``moldau cluster up``.

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
            "group.initial.rebalance.delay.ms": "0",
        }
        if node.rack:
            props["broker.rack"] = node.rack
        if node.metrics_port is not None:
            props["metrics.port"] = str(node.metrics_port)
        props.update(self.overrides)
        return props

    def start_node(self, node: LocalNode) -> None:
        cmd = [sys.executable, "-m", "moldau", "server"]
        for key, value in self.properties(node).items():
            cmd += ["-o", f"{key}={value}"]
        node.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        threading.Thread(target=self._pump, args=(node,), daemon=True).start()

    @staticmethod
    def _pump(node: LocalNode) -> None:
        assert node.proc is not None and node.proc.stdout is not None
        for line in node.proc.stdout:
            node.output.append(line.rstrip())

    def start(self) -> None:
        for node in self.nodes:
            self.start_node(node)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        for node in self.nodes:
            while not any(_LISTENING.search(line) for line in node.output):
                assert node.proc is not None
                if node.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"node {node.node_id} did not start:\n" + "\n".join(node.output[-30:])
                    )
                time.sleep(0.05)

    def stop(self, timeout_s: float = 60.0) -> None:
        """SIGTERM every node at once (each moves its leaderships away first)."""
        running = [n for n in self.nodes if n.proc is not None and n.proc.poll() is None]
        for node in running:
            assert node.proc is not None
            node.proc.send_signal(signal.SIGTERM)
        for node in running:
            assert node.proc is not None
            try:
                node.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                last = "\n".join(node.output[-30:])
                print(
                    f"node {node.node_id} did not stop in {timeout_s:.0f} s; killing it. It "
                    f"printed last:\n{last}",
                    file=sys.stderr,
                    flush=True,
                )
                node.proc.kill()
                node.proc.wait()


@app.command("up")
def up(
    nodes: Annotated[int, typer.Option("--nodes", "-n", min=1, help="How many nodes.")] = 3,
    racks: Annotated[
        str | None, typer.Option(help="Comma-separated rack per node, e.g. r1,r1,r2.")
    ] = None,
    data_dir: Annotated[
        Path | None, typer.Option("--dir", help="Data directory (default: a temporary one).")
    ] = None,
    metrics: Annotated[
        bool, typer.Option(help="Serve Prometheus metrics on each node (URLs printed).")
    ] = True,
    override: Annotated[
        list[str] | None, typer.Option("--override", "-o", help="key=value for every node.")
    ] = None,
) -> None:
    """Start a local cluster of combined nodes; Ctrl-C stops it cleanly."""
    rack_list = [r.strip() for r in racks.split(",")] if racks else None
    if rack_list is not None and len(rack_list) != nodes:
        typer.echo(f"--racks names {len(rack_list)} racks for {nodes} nodes", err=True)
        raise typer.Exit(2)
    base = data_dir or Path(tempfile.mkdtemp(prefix="moldau-cluster-"))
    extra = dict(o.split("=", 1) for o in override or [] if "=" in o)
    cluster = LocalCluster(nodes, base, racks=rack_list, metrics=metrics, overrides=extra)
    try:
        cluster.start()
    except RuntimeError as e:
        typer.echo(f"moldau cluster up: {e}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"cluster {cluster.cluster_id}: {nodes} node(s), data in {base}")
    typer.echo(f"bootstrap servers: {cluster.bootstrap_servers}")
    for node in cluster.nodes:
        if node.metrics_port is not None:
            typer.echo(f"metrics: http://127.0.0.1:{node.metrics_port}/metrics")
    # Ctrl-C and SIGTERM only set a flag: a KeyboardInterrupt raised inside Popen.poll()
    # can leave its lock taken, and the stop would then wait forever on a node.
    signals: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _: signals.append(signum))
    typer.echo("press Ctrl-C to stop")
    try:
        while not signals:
            if not all(n.proc is not None and n.proc.poll() is None for n in cluster.nodes):
                typer.echo("a node exited; stopping the cluster", err=True)
                break
            time.sleep(0.5)
        else:
            typer.echo("stopping")
    finally:
        cluster.stop()


# -- describe -------------------------------------------------------------------------




@app.command("describe")
def describe(
    bootstrap: Annotated[
        str, typer.Option("--bootstrap-server", "-b", help="HOST:PORT of any broker.")
    ] = "127.0.0.1:9092",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Brokers, the controller quorum, and every partition's leader, replicas and ISR."""
    try:
        result = asyncio.run(describe_cluster(bootstrap))
    except (ConnectionError, TimeoutError, OSError) as e:
        typer.echo(f"moldau cluster describe: cannot reach {bootstrap}: {e}", err=True)
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    console = Console()
    console.print(f"cluster id: {result['cluster_id']}")
    brokers = Table("broker", "endpoint", "rack", "fenced", title="brokers")
    for b in result["brokers"]:
        brokers.add_row(
            str(b["id"]), b["endpoint"], b["rack"] or "", "yes" if b["fenced"] else "no"
        )
    console.print(brokers)
    quorum = result["quorum"]
    if "error" in quorum:
        console.print(f"quorum: not available (error {quorum['error']})")
    else:
        console.print(
            f"quorum: leader {quorum['leader']}, epoch {quorum['epoch']}, "
            f"high watermark {quorum['high_watermark']}"
        )
        voters = Table("voter", "log end offset", "lag", title="controller quorum")
        for v in quorum["voters"]:
            voters.add_row(str(v["id"]), str(v["log_end_offset"]), str(v["lag"]))
        console.print(voters)
    for topic, partitions in result["topics"].items():
        table = Table("partition", "leader", "replicas", "isr", "offline", title=topic)
        for p in partitions:
            table.add_row(
                str(p["partition"]),
                str(p["leader"]),
                ",".join(map(str, p["replicas"])),
                ",".join(map(str, p["isr"])),
                ",".join(map(str, p["offline"])),
            )
        console.print(table)
