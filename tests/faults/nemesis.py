"""What the fault tests do to a :class:`~moldau.testing.ClusterProcess` and read from it,
beyond what it offers itself: Kafka's timeouts scaled down, topics with a chosen
assignment, partition states as one chosen node sees them (a paused or cut-off node's
view must not be mistaken for the cluster's), and the replicas' log files for the checker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from moldau.testing import ClusterProcess
from moldau.testing.process import TEST_DEFAULTS
from tests.faults.checker import BatchHeader, read_batch_headers
from tests.faults.workload import quiet

# Kafka's timeouts scaled down so a fault plays out in seconds (Kafka's own system tests
# do the same): heartbeats, sessions, ISR lag, fetcher backoff.
FAST = {
    **TEST_DEFAULTS,
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "4000",
    "replica.fetch.backoff.ms": "200",
    "replica.fetch.wait.max.ms": "200",
    "offsets.topic.num.partitions": "3",
    "min.insync.replicas": "2",
    "log.flush.offset.checkpoint.interval.ms": "1000",
}
LAG_TIME_S = int(FAST["replica.lag.time.max.ms"]) / 1000


def timed(condition: Callable[[], Any], timeout: float, what: str) -> float:
    """Poll ``condition`` (errors of a node restarting count as not yet) until it holds;
    returns the seconds it took."""
    start = time.monotonic()
    try:
        ClusterProcess.wait_until(condition, timeout)
    except AssertionError as e:
        raise AssertionError(f"{what}: {e}") from None
    return time.monotonic() - start


def create_topic(
    c: ClusterProcess,
    topic: str,
    partitions: int,
    configs: dict[str, str] | None = None,
    assignment: list[list[int]] | None = None,
) -> None:
    """Replication factor 3, min.insync.replicas=2 (or ``assignment``: each partition's
    replicas, preferred leader first); returns once every node knows every leader."""
    config = {"min.insync.replicas": "2", **(configs or {})}
    if assignment is None:
        c.create_topic(topic, partitions, replication_factor=3, **config)
        return
    admin = AdminClient(quiet({"bootstrap.servers": c.bootstrap_servers}))
    new = NewTopic(topic, len(assignment), replica_assignment=assignment, config=config)
    admin.create_topics([new])[topic].result(30)
    timed(
        lambda: all(
            len(states(c, topic, via=i)) == len(assignment)
            and all(s["leader"] >= 0 for s in states(c, topic, via=i).values())
            for i in c.serving()
        ),
        30,
        "the topic known everywhere",
    )


def states(c: ClusterProcess, topic: str, via: int | None = None) -> dict[int, dict[str, Any]]:
    """partition -> {"leader", "replicas", "isr", "offline"}, as node ``via`` (default:
    any serving node) sees it."""
    return {p["partition"]: p for p in c.describe(via)["topics"].get(topic, [])}


def leaders(c: ClusterProcess, topic: str, via: int | None = None) -> dict[int, int]:
    return {p: s["leader"] for p, s in states(c, topic, via).items()}


def new_leaders(
    c: ClusterProcess, topic: str, partitions: set[int], old: int, via: int | None = None
) -> bool:
    """Every one of ``partitions`` is led by a node other than ``old``."""
    current = leaders(c, topic, via)
    return all(current.get(p, -1) not in (old, -1) for p in partitions)


def wait_full_isr(c: ClusterProcess, topic: str, timeout: float = 60.0) -> float:
    """Seconds until every partition of ``topic`` has a leader and all its replicas in
    its ISR."""
    return timed(
        lambda: all(
            s["leader"] >= 0 and set(s["isr"]) == set(s["replicas"])
            for s in states(c, topic).values()
        ),
        timeout,
        f"every replica of {topic} in sync",
    )


def kill_all(c: ClusterProcess) -> None:
    """kill -9 of every node: the end of a test (writes are in the page cache, so the log
    files are complete; a SIGTERM of all three at once would wait out the controlled
    shutdown of the last ones, whose controller quorum is gone)."""
    for i in c.running():
        c.kill(i)


def replica_logs(
    c: ClusterProcess, topic: str, partitions: int
) -> dict[int, dict[int, list[BatchHeader]]]:
    """partition -> node -> the batch headers of that replica's log files."""
    out: dict[int, dict[int, list[BatchHeader]]] = {}
    for p in range(partitions):
        out[p] = {}
        for node_id, node in c.nodes.items():
            directory = node.data_dir / f"{topic}-{p}"
            if directory.is_dir():
                out[p][node_id] = read_batch_headers(directory)
    return out


def output_since(c: ClusterProcess, node_id: int, mark: int) -> list[str]:
    """Node ``node_id``'s output lines after its ``lines_seen`` was ``mark``."""
    node = c.node(node_id)
    node.settle_output()
    return node.output_since(mark)
