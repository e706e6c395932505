"""A hand-driven quorum for step-by-step tests: messages move only when a test says so."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from moldau.raft import (
    Committed,
    Effects,
    LeaderAndEpoch,
    LoadSnapshot,
    MemoryQuorumStateStore,
    OffsetAndEpoch,
    Outbound,
    QuorumConfig,
    RaftClient,
    VoterAddress,
)
from moldau.raft.memory_log import LogEntry, MemoryRaftLog
from moldau.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    VoteRequest,
)
from moldau.raft.state import Leader

REQUESTS = (
    VoteRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
)


def config(voters: int, **overrides: int) -> QuorumConfig:
    return QuorumConfig(
        voters={v: VoterAddress("localhost", 9092 + v) for v in range(1, voters + 1)}, **overrides
    )


@dataclass
class Node:
    node_id: int
    log: MemoryRaftLog
    store: MemoryQuorumStateStore
    client: RaftClient
    applied: list[LoadSnapshot | LogEntry] = field(default_factory=list)
    leader_changes: list[LeaderAndEpoch] = field(default_factory=list)
    deadline: int | None = None

    @property
    def state(self) -> str:
        return self.client.state.name

    def data_values(self) -> list[bytes]:
        return [
            e.value for e in self.applied if isinstance(e, LogEntry) and isinstance(e.value, bytes)
        ]


@dataclass
class Message:
    source: int
    out: Outbound

    @property
    def destination(self) -> int:
        return self.out.destination

    @property
    def is_request(self) -> bool:
        return isinstance(self.out.message, REQUESTS)


class Quorum:
    def __init__(
        self,
        voters: int = 3,
        observers: int = 0,
        seed: int = 0,
        fetch_max_bytes: int = 1 << 20,
        **overrides: int,
    ) -> None:
        self.now = 0
        self.config = config(voters, **overrides)
        self.rng = random.Random(seed)
        self.fetch_max_bytes = fetch_max_bytes
        self.nodes: dict[int, Node] = {}
        self.stopped: dict[int, Node] = {}
        self.network: list[Message] = []
        self.delivered: list[Message] = []
        # Pick jitter so that node 1 times out first, then node 2, and so on.
        while True:
            for node_id in range(1, voters + observers + 1):
                self.start(node_id, MemoryRaftLog(), MemoryQuorumStateStore())
            deadlines = [self.nodes[v].deadline or 0 for v in range(1, voters + 1)]
            if deadlines == sorted(set(deadlines)):
                break
            self.network = []

    def start(self, node_id: int, log: MemoryRaftLog, store: MemoryQuorumStateStore) -> Node:
        client = RaftClient(
            node_id,
            self.config,
            log,
            store,
            random.Random(self.rng.random()),
            self.now,
            cluster_id="test",
            fetch_max_bytes=self.fetch_max_bytes,
        )
        node = Node(node_id, log, store, client)
        self.nodes[node_id] = node
        self.record(node, client.tick(self.now))
        return node

    def stop(self, node_id: int) -> Node:
        """Crash a node: it is gone from the quorum, messages to it are lost."""
        node = self.nodes.pop(node_id)
        self.stopped[node_id] = node
        self.network = [m for m in self.network if node_id not in (m.source, m.destination)]
        return node

    def restart(self, node_id: int) -> Node:
        old = self.stop(node_id) if node_id in self.nodes else self.stopped[node_id]
        return self.start(node_id, old.log, old.store)

    def record(self, node: Node, effects: Effects) -> Effects:
        for out in effects.outbound:
            self.network.append(Message(node.node_id, out))
        for item in effects.apply:
            if isinstance(item, LoadSnapshot):
                node.applied.append(item)
            else:
                assert isinstance(item, Committed) and isinstance(item.records, tuple)
                node.applied.extend(item.records)
        if effects.leader_change is not None:
            node.leader_changes.append(effects.leader_change)
        node.deadline = effects.deadline_ms
        return effects

    def __getitem__(self, node_id: int) -> Node:
        return self.nodes[node_id]

    # ---------------------------------------------------------------- time and messages

    def advance(self, to_ms: int) -> None:
        """Move the clock, ticking every node whose deadline is due (in deadline order)."""
        while True:
            due = [n for n in self.nodes.values() if n.deadline is not None and n.deadline <= to_ms]
            if not due:
                break
            node = min(due, key=lambda n: (n.deadline, n.node_id))
            assert node.deadline is not None
            self.now = max(self.now, node.deadline)
            self.record(node, node.client.tick(self.now))
        self.now = max(self.now, to_ms)

    def tick(self, node_id: int) -> Effects:
        node = self.nodes[node_id]
        return self.record(node, node.client.tick(self.now))

    def take(self, where: Callable[[Message], bool] = lambda m: True) -> list[Message]:
        taken = [m for m in self.network if where(m)]
        self.network = [m for m in self.network if not where(m)]
        return taken

    def pending(
        self, kind: type, source: int | None = None, destination: int | None = None
    ) -> list[Message]:
        return [
            m
            for m in self.network
            if isinstance(m.out.message, kind)
            and (source is None or m.source == source)
            and (destination is None or m.destination == destination)
        ]

    def deliver(self, message: Message) -> Effects:
        node = self.nodes.get(message.destination)
        if node is None:
            return Effects()
        self.delivered.append(message)
        out = message.out
        if message.is_request:
            effects = node.client.handle_request(
                message.source, out.correlation_id, out.message, self.now
            )  # type: ignore[arg-type]
        else:
            effects = node.client.handle_response(
                message.source, out.correlation_id, out.message, self.now
            )  # type: ignore[arg-type]
        return self.record(node, effects)

    def deliver_all(
        self, where: Callable[[Message], bool] = lambda m: True, rounds: int = 100
    ) -> None:
        """Deliver matching messages, and those they cause, until none is left."""
        for _ in range(rounds):
            batch = self.take(where)
            if not batch:
                return
            for message in batch:
                self.deliver(message)
        raise AssertionError("messages kept flowing")

    def run_for(
        self, ms: int, where: Callable[[Message], bool] = lambda m: True, step: int = 5
    ) -> None:
        """Let time pass, delivering the messages `where` accepts and losing the rest.

        Messages sent in the last step stay in the network for the test to look at.
        """
        end = self.now + ms
        while self.now < end:
            self.deliver_all(where)
            self.network = []
            self.advance(min(end, self.now + step))

    def drop_all(self) -> None:
        self.network = []

    # ---------------------------------------------------------------- shortcuts

    def expire(self, node_id: int) -> Node:
        """Jump to `node_id`'s deadline and tick it alone: it times out before the others."""
        node = self.nodes[node_id]
        assert node.deadline is not None
        self.now = max(self.now, node.deadline)
        self.tick(node_id)
        return node

    def elect(self, node_id: int) -> Node:
        """Let `node_id` time out first and win; everyone else hears about it."""
        node = self.expire(node_id)
        self.deliver_all(
            lambda m: not isinstance(m.out.message, FetchRequest | FetchSnapshotRequest)
        )
        assert isinstance(node.client.state, Leader), node.client.state
        return node

    def replicate(self) -> None:
        """Deliver everything, then let parked fetches expire so followers learn the HW."""
        self.deliver_all()
        self.advance(self.now + 500)
        self.deliver_all()

    def append(self, node_id: int, *values: bytes) -> Effects:
        node = self.nodes[node_id]
        return self.record(node, node.client.append(node.client.epoch, list(values), self.now))

    def snapshot(self, node_id: int) -> OffsetAndEpoch:
        """Snapshot `node_id`'s state machine (its data values) at what it has applied."""
        node = self.nodes[node_id]
        last = next(e for e in reversed(node.applied) if isinstance(e, LogEntry))
        snapshot_id = OffsetAndEpoch(last.offset + 1, last.epoch)
        data = b"\n".join(node.data_values()) or b"-"
        self.record(node, node.client.create_snapshot(snapshot_id, data, self.now))
        return snapshot_id
