"""`moldau cluster`: run a local KRaft cluster, and describe any cluster.

``up`` starts N combined nodes (broker and controller) as separate processes on free
loopback ports, all voters of one controller quorum, prints the bootstrap servers, reports
a node that exits while the others keep serving, and stops them all cleanly on Ctrl-C.
``kill-node`` and ``restart-node`` act on the nodes of a running ``up`` (see
:mod:`moldau.cli.local_cluster`). ``describe`` shows brokers (fenced or not), the
controller quorum (DescribeQuorum: leader, epoch, voters and their lag) and every
partition's leader, replicas and ISR, from any Kafka-protocol cluster.
"""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from moldau.admin.cluster import describe_cluster
from moldau.cli.common import (
    DEFAULT_BOOTSTRAP,
    BootstrapOption,
    CommandConfigOption,
    PropertyOption,
    user_properties,
)
from moldau.cli.local_cluster import (
    CONTROL_DIR,
    LAST_LINES,
    STATE_FILE,
    LocalCluster,
    exit_status,
    read_state,
    request,
    running_clusters,
)
from moldau.cli.wire import Target, run

app = typer.Typer(help="Run a local cluster, or describe one.", no_args_is_help=True)

CONTROL_TIMEOUT_S = 90.0  # a restart: a clean stop (leaderships move), then a start

ClusterDirOption = Annotated[
    Path | None,
    typer.Option(
        "--dir",
        envvar="MOLDAU_CLUSTER_DIR",
        help="The directory of the running `cluster up` (default: the one running on a "
        "temporary directory, if there is exactly one).",
    ),
]


@app.command("up")
def up(
    nodes: Annotated[int, typer.Option("--nodes", "-n", min=1, help="How many nodes.")] = 3,
    racks: Annotated[
        str | None, typer.Option(help="Comma-separated rack per node, e.g. r1,r1,r2.")
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--dir",
            help="Data directory, kept on exit (default: a temporary one, removed on exit).",
        ),
    ] = None,
    metrics: Annotated[
        bool, typer.Option(help="Serve Prometheus metrics on each node (URLs printed).")
    ] = True,
    override: Annotated[
        list[str] | None, typer.Option("--override", "-o", help="key=value for every node.")
    ] = None,
) -> None:
    """Start a local cluster of combined nodes; a node that exits is reported and the others
    keep running (`kill-node`, `restart-node`); Ctrl-C stops them all cleanly."""
    rack_list = [r.strip() for r in racks.split(",")] if racks else None
    if rack_list is not None and len(rack_list) != nodes:
        typer.echo(f"--racks names {len(rack_list)} racks for {nodes} nodes", err=True)
        raise typer.Exit(2)
    base = data_dir or Path(tempfile.mkdtemp(prefix="moldau-cluster-"))
    try:
        _run(base, nodes, rack_list, metrics, override or [], keep=data_dir is not None)
    finally:
        if data_dir is None:
            shutil.rmtree(base, ignore_errors=True)


def _run(
    base: Path, nodes: int, racks: list[str] | None, metrics: bool, override: list[str], keep: bool
) -> None:
    extra = dict(o.split("=", 1) for o in override if "=" in o)
    base.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster(nodes, base, racks=racks, metrics=metrics, overrides=extra)
    # Ctrl-C and SIGTERM only set a flag: a KeyboardInterrupt raised inside Popen.poll()
    # can leave its lock taken, and the stop would then wait forever on a node.
    signals: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _: signals.append(signum))
    try:
        try:
            cluster.start(cancelled=lambda: bool(signals))
        except RuntimeError as e:
            typer.echo(f"moldau cluster up: {e}", err=True)
            raise typer.Exit(1) from None
        kept = "kept on exit" if keep else "removed on exit"
        typer.echo(f"cluster {cluster.cluster_id}: {nodes} node(s), data in {base} ({kept})")
        typer.echo(f"bootstrap servers: {cluster.bootstrap_servers}")
        for node in cluster.nodes:
            if node.metrics_port is not None:
                typer.echo(f"metrics: http://127.0.0.1:{node.metrics_port}/metrics")
        typer.echo(f"node logs: {base}/node<N>.log")
        typer.echo(f"kill or restart a node: moldau cluster kill-node|restart-node N --dir {base}")
        typer.echo("press Ctrl-C to stop")
        _watch(cluster, signals)
    finally:
        cluster.stop()
        (base / STATE_FILE).unlink(missing_ok=True)
        shutil.rmtree(base / CONTROL_DIR, ignore_errors=True)


def _watch(cluster: LocalCluster, signals: list[int]) -> None:
    """Until a signal: report nodes that exit, carry out kill/restart requests."""
    while not signals:
        cluster.publish()
        for op, node in cluster.take_requests():
            typer.echo(f"{op} node {node.node_id}")
            cluster.carry_out(op, node)
        for node in cluster.exited():
            assert node.proc is not None and node.proc.returncode is not None
            status = exit_status(node.proc.returncode)
            last = "\n".join(f"  {line}" for line in list(node.output)[-LAST_LINES:])
            typer.echo(
                f"node {node.node_id} exited ({status}); the other nodes keep running. "
                f"Its last log lines ({node.log_file}):\n{last}",
                err=True,
            )
        time.sleep(0.2)
    typer.echo("stopping")


def _cluster_dir(given: Path | None) -> Path:
    if given is not None:
        if read_state(given) is None:
            _control_fail(f"no `moldau cluster up` is running in {given}")
        return given
    found = running_clusters()
    if len(found) != 1:
        _control_fail(
            "no `moldau cluster up` is running on a temporary directory; give --dir"
            if not found
            else "several `moldau cluster up` are running; give --dir: "
            + ", ".join(map(str, found))
        )
    return found[0]


def _control_fail(message: str) -> NoReturn:
    typer.echo(f"moldau cluster: {message}", err=True)
    raise typer.Exit(1)


def _node_state(base: Path, node_id: int) -> dict[str, Any]:
    state = read_state(base)
    if state is None:
        _control_fail(f"`moldau cluster up` in {base} has stopped")
    for node in state["nodes"]:
        if node["id"] == node_id:
            return dict(node)
    _control_fail(f"there is no node {node_id} (nodes 1 to {len(state['nodes'])})")


def _await_node(base: Path, node_id: int, done: Any, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + CONTROL_TIMEOUT_S
    while True:
        node = _node_state(base, node_id)
        if done(node):
            return node
        if time.monotonic() > deadline:
            _control_fail(
                f"node {node_id} did not {what} in {CONTROL_TIMEOUT_S:.0f} s (state: "
                f"{node['state']}; see {node['log_file']})"
            )
        time.sleep(0.1)


@app.command("kill-node")
def kill_node(
    node_id: Annotated[int, typer.Argument(metavar="N", help="The node id (1 to N).")],
    data_dir: ClusterDirOption = None,
    term: Annotated[
        bool, typer.Option("--term", help="SIGTERM (a controlled shutdown) instead of kill -9.")
    ] = False,
) -> None:
    """Kill a node of a running `moldau cluster up` (kill -9 unless --term)."""
    base = _cluster_dir(data_dir)
    before = _node_state(base, node_id)
    if before["state"] not in ("starting", "serving"):
        _control_fail(f"node {node_id} is not running ({before['state']})")
    request(base, "kill" if term else "kill9", node_id)
    node = _await_node(base, node_id, lambda n: n["state"].startswith("exited"), "exit")
    typer.echo(f"node {node_id} {node['state']}")


@app.command("restart-node")
def restart_node(
    node_id: Annotated[int, typer.Argument(metavar="N", help="The node id (1 to N).")],
    data_dir: ClusterDirOption = None,
) -> None:
    """(Re)start a node of a running `moldau cluster up`: a clean stop if it runs, then a
    start on the same ports and data; returns once it serves."""
    base = _cluster_dir(data_dir)
    before = _node_state(base, node_id)
    request(base, "restart", node_id)
    node = _await_node(
        base,
        node_id,
        lambda n: n["state"] == "serving" and n["pid"] != before["pid"],
        "serve again",
    )
    typer.echo(f"node {node_id} serving at {node['bootstrap']} (pid {node['pid']})")


# -- describe -------------------------------------------------------------------------


@app.command("describe")
def describe(
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    command_config: CommandConfigOption = None,
    properties: PropertyOption = None,
) -> None:
    """Brokers, the controller quorum, and every partition's leader, replicas and ISR."""
    target = Target.of("cluster describe", bootstrap, user_properties(properties, command_config))
    result = run(
        "cluster describe", target, lambda: describe_cluster(bootstrap, 10_000, target.security)
    )
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
