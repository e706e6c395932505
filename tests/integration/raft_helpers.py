"""Real KRaft replicas in one event loop: `RaftManager`s behind minimal asyncio listeners.

Each node gets a loopback listener (port 0) that answers only the raft RPCs by calling
`RaftManager.handle`, one request at a time per connection as a Kafka server does, a
`NetworkClient` of its own and a data dir of real files. Used by the raft integration
tests and `benchmarks/raft_quorum.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moldau.clock import AsyncioScheduler
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import MetadataRecord
from moldau.metadata.snapshot import image_to_records
from moldau.protocol.client import NetworkClient
from moldau.protocol.framing import is_flexible
from moldau.protocol.messages import REQUESTS, RESPONSES
from moldau.protocol.messages.request_header import RequestHeader
from moldau.protocol.primitives import INT32
from moldau.raft import QuorumConfig, VoterAddress
from moldau.raft.config import MetadataLogConfig
from moldau.raft.driver import RaftManager

CLUSTER_ID = "raft-test-cluster-1"


@dataclass
class RecordingListener:
    """Everything a node's metadata listener was told, in order."""

    commits: list[tuple[list[MetadataRecord], int]] = field(default_factory=list)
    snapshots: list[MetadataImage] = field(default_factory=list)
    leaders: list[tuple[int | None, int]] = field(default_factory=list)
    image: MetadataImage = field(default_factory=MetadataImage)  # the last one given

    def handle_commit(
        self, records: Sequence[MetadataRecord], last_offset: int, image: MetadataImage
    ) -> None:
        assert image.offset == last_offset
        self.commits.append((list(records), last_offset))
        self.image = image

    def handle_snapshot(self, image: MetadataImage) -> None:
        self.snapshots.append(image)
        self.image = image

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None:
        self.leaders.append((leader_id, epoch))

    def state(self) -> list[MetadataRecord]:
        """The records that make up this node's state: the last snapshot, then commits
        after it."""
        if not self.snapshots:
            return [r for records, _ in self.commits for r in records]
        snapshot = self.snapshots[-1]
        after = [r for rs, last in self.commits if last > snapshot.offset for r in rs]
        return image_to_records(snapshot) + after


class RaftServer:
    """A loopback listener serving one node's raft RPCs."""

    def __init__(self) -> None:
        self.manager: RaftManager | None = None
        self.server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        try:
            while True:
                (size,) = INT32.unpack(await reader.readexactly(4))
                frame = memoryview(await reader.readexactly(size))
                header, pos = RequestHeader.decode(frame, 1)
                api_key, version = header.request_api_key, header.request_api_version
                cls = REQUESTS[api_key]
                if is_flexible(cls, version):
                    header, pos = RequestHeader.decode(frame, 2)
                request, _ = cls.decode(frame, version, pos)
                manager = self.manager
                if manager is None:
                    break
                response = await manager.handle(api_key, version, request)
                body = b"".join(bytes(p) for p in response.encode(version))
                head = INT32.pack(header.correlation_id)
                if is_flexible(RESPONSES[api_key], version):
                    head += b"\x00"
                writer.write(INT32.pack(len(head) + len(body)) + head + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._connections.discard(writer)
            writer.close()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in list(self._connections):
            writer.close()


@dataclass
class Node:
    node_id: int
    data_dir: Path
    server: RaftServer
    listener: RecordingListener
    manager: RaftManager
    network: NetworkClient

    @property
    def running(self) -> bool:
        return not self.manager.closed


class RaftCluster:
    """N voters (and optionally observers) on loopback, each with its own data dir."""

    def __init__(
        self,
        root: Path,
        voters: int = 3,
        observers: int = 0,
        *,
        log_config: MetadataLogConfig | None = None,
        **quorum: int,
    ) -> None:
        self.root = root
        self.voter_ids = list(range(1, voters + 1))
        self.node_ids = list(range(1, voters + observers + 1))
        self.log_config = log_config
        self.quorum = quorum
        self.config: QuorumConfig | None = None
        self.servers: dict[int, RaftServer] = {}
        self.nodes: dict[int, Node] = {}

    async def start(self) -> RaftCluster:
        ports = {}
        for node_id in self.node_ids:
            server = RaftServer()
            ports[node_id] = await server.start()
            self.servers[node_id] = server
        self.config = QuorumConfig(
            voters={v: VoterAddress("127.0.0.1", ports[v]) for v in self.voter_ids},
            **self.quorum,
        )
        for node_id in self.node_ids:
            await self.start_node(node_id)
        return self

    async def start_node(self, node_id: int, listener: RecordingListener | None = None) -> Node:
        assert self.config is not None
        server = self.servers[node_id]
        network = NetworkClient(f"raft-{node_id}", request_timeout_ms=5_000)
        listener = listener or RecordingListener()
        manager = RaftManager(
            node_id,
            CLUSTER_ID,
            self.config,
            self.root / f"node{node_id}",
            network,
            AsyncioScheduler(),
            listener,
            log_config=self.log_config,
        )
        await manager.start()
        server.manager = manager
        node = Node(node_id, self.root / f"node{node_id}", server, listener, manager, network)
        self.nodes[node_id] = node
        return node

    def stop_node(self, node_id: int) -> Node:
        """Stop a node abruptly: its connections drop, nothing is resigned."""
        node = self.nodes[node_id]
        node.server.manager = None
        for writer in list(node.server._connections):
            writer.close()
        node.manager.close()
        node.network.close()
        return node

    def close(self) -> None:
        for node_id, node in self.nodes.items():
            if node.running:
                self.stop_node(node_id)
        for server in self.servers.values():
            server.close()

    def running(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.running]

    def leader(self) -> Node | None:
        leaders = [n for n in self.running() if n.manager.is_leader]
        assert len(leaders) <= 1, "two nodes think they lead"
        return leaders[0] if leaders else None

    async def wait_for(self, condition: Callable[[], Any], timeout_s: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met within {timeout_s}s")
            await asyncio.sleep(0.01)

    async def wait_for_leader(self, timeout_s: float = 10.0) -> Node:
        node: Node = await self.wait_for(self.leader, timeout_s)
        return node


@contextlib.asynccontextmanager
async def raft_cluster(root: Path, voters: int = 3, **kwargs: Any) -> Any:
    cluster = RaftCluster(root, voters, **kwargs)
    try:
        yield await cluster.start()
    finally:
        cluster.close()
        await asyncio.sleep(0)
