"""Deterministic simulation of a KRaft quorum: pure `RaftClient`s, a seeded network, a virtual clock.

Everything random comes from one seed: message delays, drops, duplicates, partitions,
crashes, client appends and each node's election jitter. A crash keeps the node's log
and quorum-state store (its disk) and loses everything else; responses addressed to an
earlier incarnation are dropped, as a closed connection would.

Checked after every event, raising `InvariantViolation` at the first breach:
- election safety: one leader per epoch; one vote per voter and epoch, across restarts;
  every (offset, epoch) record is created once (`CheckedLog`);
- log matching: a follower appends a record only after the epoch its leader wrote it after
  (with unique creation this gives Raft's log matching inductively; `check_logs_match`
  compares whole logs at the end);
- leader completeness: a new leader holds every committed record (or a snapshot at its log
  start that covers them);
- committed data never lost or changed: each node applies exactly the cluster's committed
  sequence, a loaded snapshot matches the committed prefix, no truncation removes a
  committed record;
- per node: high watermark and stored epoch never go back; a leader's high watermark is
  on a majority of voters.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from moldau.raft import (
    Committed,
    Effects,
    LoadSnapshot,
    MemoryQuorumStateStore,
    NotLeaderError,
    OffsetAndEpoch,
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
    FetchSnapshotResponse,
    VoteRequest,
    VoteResponse,
)
from moldau.raft.state import Candidate, Leader

REQUEST_TYPES = (
    VoteRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
)


class InvariantViolation(AssertionError):
    pass


@dataclass
class NetworkParams:
    min_delay_ms: int = 1
    max_delay_ms: int = 10
    drop_rate: float = 0.0
    duplicate_rate: float = 0.0


def _chain(digest: bytes, value: object) -> bytes:
    if not isinstance(value, bytes):
        return digest
    return hashlib.blake2b(digest + value, digest_size=8).digest()


@dataclass
class History:
    """What the whole cluster has committed, and every record ever created by a leader.

    `digests[o]` chains the data values committed below offset `o`, so a snapshot can be
    checked against the committed prefix without replaying it.
    """

    committed: list[tuple[int, object]] = field(default_factory=list)
    digests: list[bytes] = field(default_factory=lambda: [b""])
    created: dict[tuple[int, int], tuple[object, int]] = field(default_factory=dict)

    def commit(self, record: tuple[int, object]) -> None:
        self.committed.append(record)
        self.digests.append(_chain(self.digests[-1], record[1]))


class CheckedLog(MemoryRaftLog):
    """The in-memory log, checking log matching and committed data on every write.

    Every (offset, epoch) is created once, by its epoch's leader, after a known previous
    epoch; a follower may only append it after that same previous epoch. Together this
    is Raft's log matching property, checked inductively. Truncations must not remove a
    committed record.
    """

    def __init__(self, node_id: int, history: History, on_truncate: Callable[[], None]) -> None:
        super().__init__()
        self.node_id = node_id
        self.history = history
        self.on_truncate = on_truncate

    def _epoch_before(self, offset: int) -> int:
        if offset == self.log_start_offset:
            return self._base.epoch
        entry = self.entry(offset - 1)
        assert entry is not None
        return entry.epoch

    def _append(self, epoch: int, values: Any) -> Any:
        start = self.log_end_offset
        previous = self._epoch_before(start)
        info = super()._append(epoch, values)
        for offset in range(start, self.log_end_offset):
            entry = self.entry(offset)
            assert entry is not None
            key = (offset, epoch)
            if key in self.history.created:
                raise InvariantViolation(
                    f"node {self.node_id} created {key} a second time (two leaders in epoch {epoch}?)"
                )
            self.history.created[key] = (entry.value, previous)
            previous = epoch
        return info

    def append_as_follower(self, records: object) -> Any:
        assert isinstance(records, tuple)
        previous = self._epoch_before(self.log_end_offset)
        for entry in records:
            created = self.history.created.get((entry.offset, entry.epoch))
            if created is None or created[0] != entry.value:
                raise InvariantViolation(
                    f"node {self.node_id} got ({entry.offset}, {entry.epoch}) that no leader wrote"
                )
            if created[1] != previous:
                raise InvariantViolation(
                    f"log matching: node {self.node_id} appends ({entry.offset}, {entry.epoch}) after "
                    f"epoch {previous}, its leader wrote it after epoch {created[1]}"
                )
            previous = entry.epoch
        return super().append_as_follower(records)

    def truncate_to(self, offset: int) -> None:
        committed = self.history.committed
        for entry in self.entries():
            if offset <= entry.offset < len(committed) and committed[entry.offset] == (
                entry.epoch,
                entry.value,
            ):
                raise InvariantViolation(
                    f"node {self.node_id} truncated committed record at offset {entry.offset}"
                )
        super().truncate_to(offset)
        self.on_truncate()


class StateMachine:
    """A replicated log of values, kept as a digest chain plus the latest values.

    Its snapshot (JSON) is small but spans several FetchSnapshot chunks when the simulation
    fetches with a small `fetch_max_bytes`.
    """

    TAIL = 64

    def __init__(self) -> None:
        self.digest = b""
        self.tail: list[str] = []
        self.next_offset = 0
        self.last_epoch = 0
        self.snapshot_loads = 0

    def apply(self, value: object) -> None:
        if isinstance(value, bytes):
            self.digest = _chain(self.digest, value)
            self.tail = [*self.tail[1 - self.TAIL :], value.decode()]

    def snapshot_data(self) -> bytes:
        return json.dumps({"digest": self.digest.hex(), "tail": self.tail}).encode()

    def load(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        image = json.loads(data)
        self.digest = bytes.fromhex(image["digest"])
        self.tail = image["tail"]
        self.next_offset = snapshot_id.offset
        self.last_epoch = snapshot_id.epoch
        self.snapshot_loads += 1


@dataclass
class SimNode:
    node_id: int
    log: CheckedLog
    store: MemoryQuorumStateStore
    sm: StateMachine = field(default_factory=StateMachine)
    client: RaftClient | None = None
    incarnation: int = 0
    next_tick: int | None = None
    max_high_watermark: int = -1
    max_epoch: int = 0
    was_leader_in: int | None = None
    fetch_snapshot_chunks: int = 0
    pending_requesters: dict[tuple[int, int], int] = field(default_factory=dict)


class Simulation:
    def __init__(
        self,
        seed: int,
        voters: int,
        observers: int = 0,
        network: NetworkParams | None = None,
        snapshot_every: int = 0,
        fetch_max_bytes: int = 8 * 1024 * 1024,
        config: QuorumConfig | None = None,
    ) -> None:
        self.rng = random.Random(seed)
        self.now = 0
        self.history = History()
        self.network = network or NetworkParams()
        self.snapshot_every = snapshot_every
        self.fetch_max_bytes = fetch_max_bytes
        voter_ids = list(range(1, voters + 1))
        self.config = config or QuorumConfig(
            voters={v: VoterAddress("sim", 9000 + v) for v in voter_ids}
        )
        self.voter_ids = voter_ids
        self.nodes = {
            node_id: SimNode(
                node_id,
                CheckedLog(node_id, self.history, self._check_all),
                MemoryQuorumStateStore(),
            )
            for node_id in range(1, voters + observers + 1)
        }
        self.blocked: set[tuple[int, int]] = set()
        self.leaders_by_epoch: dict[int, int] = {}
        self.votes: dict[tuple[int, int], int] = {}
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0
        self.appended = 0
        self.events = 0
        self.on_apply: Callable[[SimNode, LogEntry], None] | None = None
        self._touched: set[int] = set()

    # ------------------------------------------------------------------ scheduling

    def at(self, time: int, action: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (time, self._seq, action))

    def run(self, until: int, stop: Callable[[], bool] | None = None) -> bool:
        """Run events up to virtual time `until`; True if `stop` became true."""
        queue = self._queue
        while queue and queue[0][0] <= until:
            self.now, _, action = heapq.heappop(queue)
            self._touched.clear()
            action()

            self.events += 1
            self.check()
            if stop is not None and stop():
                return True
        self.now = max(self.now, until)
        return stop is not None and stop()

    # ------------------------------------------------------------------ nodes

    def start(self, node_id: int) -> None:
        node = self.nodes[node_id]
        assert node.client is None
        node.incarnation += 1
        node.sm = StateMachine()
        node.pending_requesters.clear()
        node.client = RaftClient(
            node_id,
            self.config,
            node.log,
            node.store,
            random.Random(self.rng.getrandbits(64)),
            self.now,
            cluster_id="sim",
            fetch_max_bytes=self.fetch_max_bytes,
        )
        self._process(node, node.client.tick(self.now))

    def crash(self, node_id: int) -> None:
        node = self.nodes[node_id]
        node.client = None
        node.next_tick = None
        node.was_leader_in = None

    def resign(self, node_id: int) -> None:
        """Graceful shutdown of a leader (as on SIGTERM): resign first, stop a little later."""
        node = self.nodes[node_id]
        assert node.client is not None
        self._process(node, node.client.resign(node.client.epoch, self.now))

    def running(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.client is not None]

    def leaders(self) -> list[SimNode]:
        return [n for n in self.running() if isinstance(n.client.state, Leader)]  # type: ignore[union-attr]

    def _tick(self, node: SimNode, incarnation: int, when: int) -> None:
        if node.client is None or node.incarnation != incarnation or node.next_tick != when:
            return
        node.next_tick = None
        self._process(node, node.client.tick(self.now))

    def _process(self, node: SimNode, effects: Effects) -> None:
        self._touched.add(node.node_id)
        for out in effects.outbound:
            if isinstance(out.message, REQUEST_TYPES):
                self._transmit(
                    node.node_id,
                    node.incarnation,
                    out.destination,
                    out.correlation_id,
                    out.message,
                    None,
                )
            else:
                requester = node.pending_requesters.pop((out.destination, out.correlation_id), None)
                if requester is not None:
                    self._transmit(
                        node.node_id,
                        node.incarnation,
                        out.destination,
                        out.correlation_id,
                        out.message,
                        requester,
                    )
        for item in effects.apply:
            self._apply(node, item)
        if effects.deadline_ms is not None and (
            node.next_tick is None or effects.deadline_ms < node.next_tick
        ):
            node.next_tick = effects.deadline_ms
            incarnation, when = node.incarnation, effects.deadline_ms
            self.at(when, lambda: self._tick(node, incarnation, when))

    def _apply(self, node: SimNode, item: LoadSnapshot | Committed) -> None:
        sm = node.sm
        committed = self.history.committed
        if isinstance(item, LoadSnapshot):
            snapshot = node.log.read_snapshot(item.snapshot_id)
            assert snapshot is not None
            sm.load(item.snapshot_id, snapshot.data)
            end = item.snapshot_id.offset
            if end > len(committed) or sm.digest != self.history.digests[end]:
                raise InvariantViolation(
                    f"node {node.node_id} loaded snapshot {item.snapshot_id} that is not the committed prefix"
                )
            return
        assert isinstance(item.records, tuple)
        for entry in item.records:
            if entry.offset != sm.next_offset:
                raise InvariantViolation(
                    f"node {node.node_id} applied {entry.offset}, expected {sm.next_offset}"
                )
            record = (entry.epoch, entry.value)
            if entry.offset < len(committed):
                if committed[entry.offset] != record:
                    raise InvariantViolation(
                        f"node {node.node_id} committed {record} at {entry.offset}, the cluster had {committed[entry.offset]}"
                    )
            else:
                self.history.commit(record)
            sm.apply(entry.value)
            sm.next_offset = entry.offset + 1
            sm.last_epoch = entry.epoch
            if self.on_apply is not None:
                self.on_apply(node, entry)
        if (
            self.snapshot_every
            and sm.next_offset - node.log.log_start_offset >= self.snapshot_every
        ):
            assert node.client is not None
            snapshot_id = OffsetAndEpoch(sm.next_offset, sm.last_epoch)
            self._process(
                node, node.client.create_snapshot(snapshot_id, sm.snapshot_data(), self.now)
            )

    # ------------------------------------------------------------------ network

    def _transmit(
        self,
        src: int,
        src_inc: int,
        dst: int,
        correlation_id: int,
        message: Any,
        requester: int | None,
    ) -> None:
        params = self.network
        if (src, dst) in self.blocked or self.rng.random() < params.drop_rate:
            return
        copies = 2 if self.rng.random() < params.duplicate_rate else 1
        spread = params.max_delay_ms - params.min_delay_ms + 1
        for _ in range(copies):
            delay = params.min_delay_ms + int(self.rng.random() * spread)
            self.at(
                self.now + delay,
                lambda: self._deliver(src, src_inc, dst, correlation_id, message, requester),
            )

    def _deliver(
        self,
        src: int,
        src_inc: int,
        dst: int,
        correlation_id: int,
        message: Any,
        requester: int | None,
    ) -> None:
        node = self.nodes[dst]
        client = node.client
        if client is None or (src, dst) in self.blocked:
            return
        if requester is None:
            node.pending_requesters[(src, correlation_id)] = src_inc
            effects = client.handle_request(src, correlation_id, message, self.now)
            if isinstance(message, VoteRequest) and not message.pre_vote:
                self._check_vote(dst, message, effects)
            self._process(node, effects)
        elif requester == node.incarnation:
            if isinstance(message, FetchSnapshotResponse) and message.error_code == 0:
                node.fetch_snapshot_chunks += 1
            self._process(node, client.handle_response(src, correlation_id, message, self.now))

    def partition(self, side: set[int]) -> None:
        others = set(self.nodes) - side
        self.blocked = {(a, b) for a in side for b in others} | {
            (b, a) for a in side for b in others
        }

    def heal(self) -> None:
        self.blocked = set()

    # ------------------------------------------------------------------ clients

    def client_append(self) -> bytes | None:
        """A client writes one record to a node that believes it leads; returns the value."""
        leaders = self.leaders()
        if not leaders:
            return None
        node = self.rng.choice(leaders)
        assert node.client is not None
        self.appended += 1
        value = f"{node.node_id}-{self.appended}".encode()
        try:
            effects = node.client.append(node.client.epoch, [value], self.now)
        except NotLeaderError:
            return None
        self._process(node, effects)
        return value

    # ------------------------------------------------------------------ invariants

    def check(self) -> None:
        """Invariants after an event, for the nodes it touched."""
        for node_id in self._touched:
            self._check_node(self.nodes[node_id])

    def _check_vote(self, voter: int, request: VoteRequest, effects: Effects) -> None:
        """A voter grants at most one candidate per epoch, across restarts."""
        for out in effects.outbound:
            reply = out.message
            if (
                isinstance(reply, VoteResponse)
                and out.destination == request.replica_id
                and reply.vote_granted
            ):
                key = (voter, request.replica_epoch)
                if self.votes.setdefault(key, request.replica_id) != request.replica_id:
                    raise InvariantViolation(
                        f"node {voter} voted for {self.votes[key]} and {request.replica_id} in epoch {key[1]}"
                    )

    def _check_all(self) -> None:
        """A follower's log got shorter: a leader's high watermark may have lost its majority."""
        self._touched.update(self.nodes)

    def _check_node(self, node: SimNode) -> None:
        stored = node.store.state
        if stored is not None:
            if stored.epoch < node.max_epoch:
                raise InvariantViolation(f"node {node.node_id} epoch went back to {stored.epoch}")
            node.max_epoch = stored.epoch
        client = node.client
        if client is None:
            return
        hw = client.high_watermark
        if hw is not None:
            if hw < node.max_high_watermark:
                raise InvariantViolation(
                    f"node {node.node_id} high watermark went back {node.max_high_watermark} -> {hw}"
                )
            node.max_high_watermark = hw
        state = client.state
        if (
            isinstance(state, Candidate)
            and self.votes.setdefault((node.node_id, state.epoch), node.node_id) != node.node_id
        ):
            raise InvariantViolation(
                f"node {node.node_id} runs in epoch {state.epoch} after voting for another"
            )
        if isinstance(state, Leader):
            if hw is not None:
                reached = sum(1 for v in self.voter_ids if self.nodes[v].log.log_end_offset >= hw)
                if reached < len(self.voter_ids) // 2 + 1:
                    raise InvariantViolation(f"high watermark {hw} is on fewer than a majority")
            leader = self.leaders_by_epoch.setdefault(state.epoch, node.node_id)
            if leader != node.node_id:
                raise InvariantViolation(
                    f"two leaders in epoch {state.epoch}: {leader} and {node.node_id}"
                )
            if node.was_leader_in != state.epoch:
                node.was_leader_in = state.epoch
                self._check_leader_completeness(node)
        else:
            node.was_leader_in = None

    def _check_leader_completeness(self, node: SimNode) -> None:
        log = node.log
        committed = self.history.committed
        if log.log_end_offset < len(committed):
            raise InvariantViolation(
                f"new leader {node.node_id} ends at {log.log_end_offset}, {len(committed)} records are committed"
            )
        for offset in range(log.log_start_offset, len(committed)):
            entry = log.entry(offset)
            assert entry is not None
            if committed[offset] != (entry.epoch, entry.value):
                raise InvariantViolation(
                    f"new leader {node.node_id} lacks committed record at {offset}"
                )
        if log.log_start_offset > 0:
            earliest = log.earliest_snapshot_id()
            if earliest is None or earliest.offset != log.log_start_offset:
                raise InvariantViolation(
                    f"new leader {node.node_id} has no snapshot at its log start"
                )

    def check_logs_match(self) -> None:
        """Full log matching: logs that share an (offset, epoch) agree up to it."""
        logs = {n.node_id: {e.offset: e for e in n.log.entries()} for n in self.nodes.values()}
        ids = sorted(logs)
        for i, a in enumerate(ids):
            for b in ids[i + 1 :]:
                common = sorted(set(logs[a]) & set(logs[b]), reverse=True)
                match = next((o for o in common if logs[a][o].epoch == logs[b][o].epoch), None)
                if match is None:
                    continue
                for offset in common:
                    if offset <= match and logs[a][offset] != logs[b][offset]:
                        raise InvariantViolation(
                            f"logs of {a} and {b} differ at {offset}, below matching {match}"
                        )
