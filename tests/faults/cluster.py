"""The cluster under test: a :class:`~moldau.cli.cluster.LocalCluster` of three combined
nodes, with what a nemesis needs (kill -9, SIGSTOP/SIGCONT, restart), metadata read from
one chosen node at a time (a paused or cut-off node's view must not be mistaken for the
cluster's), and the replicas' log files for the checker.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from moldau.cli.cluster import LocalCluster, LocalNode
from moldau.protocol.client import NetworkClient
from moldau.protocol.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from moldau.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from tests.faults.checker import BatchHeader, read_batch_headers
from tests.faults.workload import quiet

# Kafka's timeouts scaled down so a fault plays out in seconds (Kafka's own system tests
# do the same): heartbeats, sessions, ISR lag, fetcher backoff.
FAST = {
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "4000",
    "replica.fetch.backoff.ms": "200",
    "replica.fetch.wait.max.ms": "200",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "min.insync.replicas": "2",
    "log.flush.offset.checkpoint.interval.ms": "1000",
}


@dataclass(frozen=True)
class PartitionState:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class FaultCluster:
    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.paused: set[int] = set()

    # -- nodes ---------------------------------------------------------------------------
    def node(self, node_id: int) -> LocalNode:
        return self.cluster.nodes[node_id - 1]

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    def alive(self, node_id: int) -> bool:
        proc = self.node(node_id).proc
        return proc is not None and proc.poll() is None and node_id not in self.paused

    def start(self) -> None:
        self.cluster.start()

    def kill(self, node_id: int) -> None:
        """kill -9: no controlled shutdown, no flush, no checkpoints."""
        proc = self.node(node_id).proc
        assert proc is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        self.paused.discard(node_id)

    def pause(self, node_id: int) -> None:
        proc = self.node(node_id).proc
        assert proc is not None
        proc.send_signal(signal.SIGSTOP)
        self.paused.add(node_id)

    def resume(self, node_id: int) -> None:
        proc = self.node(node_id).proc
        assert proc is not None
        proc.send_signal(signal.SIGCONT)
        self.paused.discard(node_id)

    def stop_node(self, node_id: int, timeout: float = 60.0) -> None:
        """SIGTERM: a controlled shutdown."""
        proc = self.node(node_id).proc
        assert proc is not None
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout)

    def restart(self, node_id: int, timeout: float = 60.0) -> float:
        """Start a stopped node on its ports and data; returns the seconds until it
        serves (registered and unfenced: it prints its listeners then)."""
        node = self.node(node_id)
        assert node.proc is None or node.proc.poll() is not None, "node still running"
        seen = len(node.output)
        start = time.monotonic()
        self.cluster.start_node(node)
        while not any("listening on" in line for line in node.output[seen:]):
            assert node.proc is not None
            if node.proc.poll() is not None or time.monotonic() - start > timeout:
                raise RuntimeError(
                    f"node {node_id} did not restart:\n" + "\n".join(node.output[-40:])
                )
            time.sleep(0.05)
        return time.monotonic() - start

    def stop(self) -> None:
        for node_id in list(self.paused):
            self.resume(node_id)
        self.cluster.stop()

    def kill_all(self) -> None:
        """The end of a test: kill -9 every node (writes are in the page cache, so the log
        files are complete; a simultaneous SIGTERM of all three would wait out the
        controlled shutdown of the last ones, whose controller quorum is gone)."""
        for node in self.cluster.nodes:
            if node.proc is not None and node.proc.poll() is None:
                self.kill(node.node_id)

    def dump_logs(self, directory: Path) -> list[Path]:
        paths = []
        for node in self.cluster.nodes:
            path = directory / f"node{node.node_id}.out"
            path.write_text("\n".join(node.output) + "\n")
            paths.append(path)
        return paths

    # -- metadata ------------------------------------------------------------------------
    def create_topic(
        self,
        topic: str,
        partitions: int,
        configs: dict[str, str] | None = None,
        assignment: list[list[int]] | None = None,
    ) -> None:
        """Replication factor 3 (or ``assignment``: each partition's replicas, leader first)."""
        admin = AdminClient(quiet({"bootstrap.servers": self.bootstrap}))
        config = {"min.insync.replicas": "2", **(configs or {})}
        if assignment is None:
            new = NewTopic(topic, partitions, 3, config=config)
        else:
            new = NewTopic(topic, len(assignment), replica_assignment=assignment, config=config)
        futures = admin.create_topics([new])
        for future in futures.values():
            future.result(30)
        self.wait_for(lambda: len(self.describe(topic)) == partitions, 30, "topic created")

    def describe(self, topic: str, via: int | None = None) -> dict[int, PartitionState]:
        """The partitions of ``topic`` as node ``via`` (default: any running node) sees
        them."""
        candidates = (
            [via]
            if via is not None
            else [n.node_id for n in self.cluster.nodes if self.alive(n.node_id)]
        )
        last: Exception | None = None
        for node_id in candidates:
            try:
                return asyncio.run(self._describe(self.node(node_id), topic))
            except (ConnectionError, TimeoutError, OSError) as e:
                last = e
        raise ConnectionError(f"no node answered metadata: {last}")

    @staticmethod
    async def _describe(node: LocalNode, topic: str) -> dict[int, PartitionState]:
        client = NetworkClient("faults-describe", request_timeout_ms=5_000)
        try:
            response = await client.send(
                (node.host, node.client_port),
                MetadataRequest(topics=[MetadataRequestTopic(name=topic)]),
                9,
            )
        finally:
            client.close()
        out: dict[int, PartitionState] = {}
        for t in response.topics:
            if t.name == topic and t.error_code == 0:
                for p in t.partitions:
                    out[p.partition_index] = PartitionState(
                        p.leader_id, p.leader_epoch, tuple(p.replica_nodes), tuple(p.isr_nodes)
                    )
        return out

    def controller(self) -> int:
        """The active controller (the metadata quorum's leader), as a running node says."""
        for node in self.cluster.nodes:
            if self.alive(node.node_id):
                try:
                    leader = asyncio.run(self._quorum_leader(node))
                except (ConnectionError, TimeoutError, OSError):
                    continue
                if leader >= 0:
                    return leader
        raise ConnectionError("no node knows the quorum leader")

    @staticmethod
    async def _quorum_leader(node: LocalNode) -> int:
        client = NetworkClient("faults-quorum", request_timeout_ms=5_000)
        try:
            response = await client.send(
                (node.host, node.client_port),
                DescribeQuorumRequest(
                    topics=[
                        TopicData(
                            topic_name="__cluster_metadata",
                            partitions=[PartitionData(partition_index=0)],
                        )
                    ]
                ),
                1,
            )
        finally:
            client.close()
        if response.error_code or not response.topics:
            return -1
        return int(response.topics[0].partitions[0].leader_id)

    def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> float:
        """Poll ``condition`` until true; returns the seconds it took."""
        start = time.monotonic()
        while True:
            try:
                if condition():
                    return time.monotonic() - start
            except (ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() - start > timeout:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for: {what}")
            time.sleep(0.1)

    def wait_full_isr(self, topic: str, timeout: float = 60.0) -> float:
        nodes = {n.node_id for n in self.cluster.nodes}
        return self.wait_for(
            lambda: all(
                set(s.isr) == nodes and s.leader in nodes for s in self.describe(topic).values()
            ),
            timeout,
            f"every replica of {topic} in sync",
        )

    def leaders(self, topic: str) -> dict[int, int]:
        return {p: s.leader for p, s in self.describe(topic).items()}

    # -- the replicas' files ---------------------------------------------------------------
    def replica_logs(self, topic: str, partitions: int) -> dict[int, dict[int, list[BatchHeader]]]:
        out: dict[int, dict[int, list[BatchHeader]]] = {}
        for p in range(partitions):
            out[p] = {}
            for node in self.cluster.nodes:
                directory = node.data_dir / f"{topic}-{p}"
                if directory.is_dir():
                    out[p][node.node_id] = read_batch_headers(directory)
        return out
