"""Deterministic simulation of the classic group coordinator: one pure `GroupCoordinator`,
simulated consumers speaking the classic protocol, a virtual clock, one seed.

Everything random comes from the seed: request and response delays, which consumer
starts, leaves, crashes (stops without leaving: its session times out), stalls (its
heartbeats stop for a while, maybe past the session timeout) or commits, coordinator
failovers (the shard reloads from the records it wrote; parked requests get
NOT_COORDINATOR, as the runtime answers them) and the member ids the coordinator mints
(`SeededIds`). The consumers follow the Java client's classic protocol: KIP-394 join
handshake, the leader assigns (round robin), SyncGroup, heartbeats every interval,
rejoin on REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION, a new member id after
UNKNOWN_MEMBER_ID.

Checked after every event, raising `InvariantViolation` at the first breach:
- a group's generation never goes back while a coordinator serves it, nor, after a
  failover, below the last generation whose assignment a member received;
- no partition is assigned to two members of the same generation (what members received,
  and what the coordinator holds for a Stable group);
- the committed offsets are exactly the last acknowledged commit of each partition, across
  failovers (none lost, none invented);
- a member that leaves is gone from the group at once.

Extending it: another group protocol (KIP-848, share groups) adds its own consumer class
beside `ClassicConsumer` and its invariants beside `check`; the event loop, network and
records log are protocol-agnostic.
"""

from __future__ import annotations

import heapq
import itertools
import random
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from moldau.coordinator.group import (
    Effects,
    GroupConfig,
    GroupCoordinator,
    JoinGroupMember,
    JoinGroupResult,
    MemberIdentity,
    OffsetCommit,
    SyncGroupResult,
)
from moldau.coordinator.group.loader import GroupLoader
from moldau.ids import SeededIds
from moldau.protocol.errors import ErrorCode

GROUP = "sim-group"
TOPIC = "t"
SESSION_TIMEOUT_MS = 6_000
REBALANCE_TIMEOUT_MS = 10_000
HEARTBEAT_INTERVAL_MS = 2_000
RETRY_BACKOFF_MS = 100
CONFIG = GroupConfig(group_initial_rebalance_delay_ms=300)


class InvariantViolation(AssertionError):
    pass


def subscription(topic: str) -> bytes:
    """A ConsumerProtocolSubscription v0, as the Java client encodes it."""
    return struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", -1)


def encode_assignment(partitions: list[int]) -> bytes:
    return struct.pack(f">{len(partitions)}i", *partitions)


def decode_assignment(data: bytes) -> list[int]:
    return list(struct.unpack(f">{len(data) // 4}i", data))


def round_robin(members: tuple[JoinGroupMember, ...], partitions: int) -> dict[str, bytes]:
    ids = sorted(m.member_id for m in members)
    return {
        member: encode_assignment(list(range(i, partitions, len(ids))))
        for i, member in enumerate(ids)
    }


@dataclass
class ClassicConsumer:
    """One consumer's view of the group (Java's ConsumerCoordinator, much reduced)."""

    name: str
    up: bool = False
    incarnation: int = 0
    member_id: str = ""
    generation: int = -1
    state: str = "down"  # down | joining | syncing | stable
    assignment: list[int] = field(default_factory=list)
    request: int | None = None  # the Join/SyncGroup this consumer waits for
    stalled_until_ms: int = 0


class GroupSimulation:
    def __init__(self, seed: int, consumers: int, partitions: int) -> None:
        self.rng = random.Random(seed)
        self.now = 1_700_000_000_000
        self.partitions = partitions
        self.ids = SeededIds(self.rng.getrandbits(64))
        self.coordinator = GroupCoordinator(CONFIG, now_ms=self.now, ids=self.ids)
        self.records: list[tuple[bytes, bytes | None]] = []  # the shard's partition
        self.consumers = {f"c{i}": ClassicConsumer(f"c{i}") for i in range(consumers)}
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._requests = itertools.count()
        self._waiting: dict[int, tuple[str, int, str]] = {}  # request -> consumer, inc., kind
        self._sync_context: dict[int, tuple[int, str]] = {}  # request -> generation, member
        # What the invariants compare against.
        self.acked_offsets: dict[int, int] = {}
        self.received: dict[int, dict[str, list[int]]] = {}  # generation -> member -> parts
        self.generation = 0
        self.events = 0

    # -- the event loop --------------------------------------------------------------
    def at(self, delay_ms: int, action: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (self.now + delay_ms, next(self._seq), action))

    def run_until(self, end_ms: int) -> None:
        """Deliver events and fire coordinator timers in time order up to ``end_ms``."""
        while True:
            next_event = self._queue[0][0] if self._queue else end_ms + 1
            next_timer = self.coordinator.next_timer_ms()
            when = min(next_event, next_timer)
            if when > end_ms:
                self.now = end_ms
                return
            self.now = max(self.now, when)
            if next_timer <= next_event:
                self._absorb(self.coordinator.tick(self.now))
            else:
                heapq.heappop(self._queue)[2]()
            self.events += 1
            self.check()

    def _network_delay(self) -> int:
        return self.rng.randint(0, 20)

    def _absorb(self, effects: Effects) -> None:
        """Records are written at once (the runtime holds answers until they commit)."""
        self.records += [(r.key, r.value) for r in effects.records]
        for request_id, result in effects.completions:
            self._answer(request_id, result)

    def _answer(self, request_id: object, result: JoinGroupResult | SyncGroupResult) -> None:
        assert isinstance(request_id, int)
        name, incarnation, kind = self._waiting.pop(request_id)
        synced = self._sync_context.pop(request_id, None)
        if synced is not None and result.error is ErrorCode.NONE:
            assert isinstance(result, SyncGroupResult)
            generation, member_id = synced
            parts = decode_assignment(result.assignment)
            self.received.setdefault(generation, {})[member_id] = parts
        self.at(self._network_delay(), lambda: self._deliver(name, incarnation, request_id, result))

    # -- consumer actions ------------------------------------------------------------
    def start(self, name: str) -> None:
        c = self.consumers[name]
        c.up, c.incarnation, c.member_id, c.generation = True, c.incarnation + 1, "", -1
        c.assignment = []
        self._join(c)
        self._schedule_heartbeat(c)

    def crash(self, name: str) -> None:
        c = self.consumers[name]
        c.up, c.state, c.request = False, "down", None

    def leave(self, name: str) -> None:
        c = self.consumers[name]
        if c.member_id:
            _, _, effects = self.coordinator.leave_group(
                self.now, GROUP, [MemberIdentity(c.member_id, None)]
            )
            self._absorb(effects)
            group = self.coordinator.groups.get(GROUP)
            if group is not None and c.member_id in group.members:
                raise InvariantViolation(f"{c.member_id} left but is still a member")
        self.crash(name)

    def stall(self, name: str, ms: int) -> None:
        self.consumers[name].stalled_until_ms = self.now + ms

    def commit(self, name: str) -> None:
        c = self.consumers[name]
        if not c.up or c.state != "stable" or not c.assignment:
            return
        offsets = [OffsetCommit(TOPIC, p, next(self._requests)) for p in c.assignment]
        results, effects = self.coordinator.offsets.commit_offsets(
            self.now,
            group_id=GROUP,
            member_id=c.member_id,
            generation_id=c.generation,
            group_instance_id=None,
            offsets=offsets,
        )
        self._absorb(effects)
        for o in offsets:
            if results[(TOPIC, o.partition)] is ErrorCode.NONE:
                self.acked_offsets[o.partition] = o.offset

    def failover(self) -> None:
        """The shard moves: a new coordinator loads from the records; parked requests are
        answered NOT_COORDINATOR and their consumers retry on the new one."""
        for request_id in list(self._waiting):
            kind = self._waiting[request_id][2]
            result_type = JoinGroupResult if kind == "join" else SyncGroupResult
            self._answer(request_id, result_type(ErrorCode.NOT_COORDINATOR))
        loader = GroupLoader()
        for key, value in self.records:
            loader.replay(key, value)
        self.coordinator = GroupCoordinator(CONFIG, now_ms=self.now, ids=self.ids)
        self.coordinator.finish_load(loader, self.now)
        group = self.coordinator.groups.get(GROUP)
        self.generation = group.generation_id if group is not None else 0
        if self.received and self.generation < max(self.received):
            raise InvariantViolation(
                f"reloaded at generation {self.generation}, below {max(self.received)} "
                "whose assignment members already hold"
            )

    def _join(self, c: ClassicConsumer) -> None:
        request_id = next(self._requests)
        c.state, c.request = "joining", request_id
        self._waiting[request_id] = (c.name, c.incarnation, "join")

        def send() -> None:
            if request_id not in self._waiting:
                return  # answered NOT_COORDINATOR by a failover while in flight
            self._absorb(
                self.coordinator.join_group(
                    request_id,
                    self.now,
                    group_id=GROUP,
                    member_id=c.member_id,
                    group_instance_id=None,
                    client_id=c.name,
                    client_host="/127.0.0.1",
                    session_timeout_ms=SESSION_TIMEOUT_MS,
                    rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                    protocol_type="consumer",
                    protocols=[("roundrobin", subscription(TOPIC))],
                    require_known_member_id=True,
                )
            )

        self.at(self._network_delay(), send)

    def _sync(self, c: ClassicConsumer, assignments: Mapping[str, bytes]) -> None:
        request_id = next(self._requests)
        c.state, c.request = "syncing", request_id
        self._waiting[request_id] = (c.name, c.incarnation, "sync")
        member_id, generation = c.member_id, c.generation
        self._sync_context[request_id] = (generation, member_id)

        def send() -> None:
            if request_id not in self._waiting:
                return  # answered NOT_COORDINATOR by a failover while in flight
            self._absorb(
                self.coordinator.sync_group(
                    request_id,
                    self.now,
                    group_id=GROUP,
                    generation_id=generation,
                    member_id=member_id,
                    assignments=assignments,
                )
            )

        self.at(self._network_delay(), send)

    def _rejoin_later(self, c: ClassicConsumer, reset: bool = False) -> None:
        if reset:
            c.member_id, c.generation = "", -1
        c.state, c.request = "joining", None
        incarnation = c.incarnation
        self.at(RETRY_BACKOFF_MS, lambda: c.incarnation == incarnation and c.up and self._join(c))

    def _deliver(
        self,
        name: str,
        incarnation: int,
        request_id: int,
        result: JoinGroupResult | SyncGroupResult,
    ) -> None:
        c = self.consumers[name]
        if not c.up or c.incarnation != incarnation or c.request != request_id:
            return  # a closed connection, or an answer to a request the consumer replaced
        if isinstance(result, JoinGroupResult):
            self._on_join(c, result)
        else:
            self._on_sync(c, result)

    def _on_join(self, c: ClassicConsumer, result: JoinGroupResult) -> None:
        if result.error is ErrorCode.MEMBER_ID_REQUIRED:
            c.member_id = result.member_id
            self._join(c)
        elif result.error is ErrorCode.NONE:
            c.member_id, c.generation = result.member_id, result.generation_id
            leads = result.leader == c.member_id
            self._sync(c, round_robin(result.members, self.partitions) if leads else {})
        else:
            self._rejoin_later(c, reset=result.error is ErrorCode.UNKNOWN_MEMBER_ID)

    def _on_sync(self, c: ClassicConsumer, result: SyncGroupResult) -> None:
        if result.error is ErrorCode.NONE:
            c.state, c.assignment = "stable", decode_assignment(result.assignment)
        else:
            self._rejoin_later(c, reset=result.error is ErrorCode.UNKNOWN_MEMBER_ID)

    def _schedule_heartbeat(self, c: ClassicConsumer) -> None:
        incarnation = c.incarnation

        def beat() -> None:
            if not c.up or c.incarnation != incarnation:
                return
            self._schedule_heartbeat(c)
            if self.now < c.stalled_until_ms or c.state not in ("syncing", "stable"):
                return
            error = self.coordinator.heartbeat(
                self.now, group_id=GROUP, member_id=c.member_id, generation_id=c.generation
            )
            generation = c.generation
            self.at(
                self._network_delay(), lambda: self._on_heartbeat(c, incarnation, generation, error)
            )

        self.at(HEARTBEAT_INTERVAL_MS, beat)

    def _on_heartbeat(
        self, c: ClassicConsumer, incarnation: int, generation: int, error: ErrorCode
    ) -> None:
        if c.incarnation != incarnation or c.generation != generation or c.state == "joining":
            return
        if error is not ErrorCode.NONE:
            self._rejoin_later(c, reset=error is ErrorCode.UNKNOWN_MEMBER_ID)

    # -- invariants ------------------------------------------------------------------
    def check(self) -> None:
        group = self.coordinator.groups.get(GROUP)
        generation = group.generation_id if group is not None else self.generation
        if generation < self.generation:
            raise InvariantViolation(f"generation went back: {self.generation} -> {generation}")
        self.generation = generation
        for gen, members in self.received.items():
            owned = [p for parts in members.values() for p in parts]
            if len(owned) != len(set(owned)):
                raise InvariantViolation(f"generation {gen}: a partition has two owners {members}")
        if group is not None and group.state.value == "Stable":
            owned = [p for m in group.members.values() for p in decode_assignment(m.assignment)]
            if len(owned) != len(set(owned)):
                raise InvariantViolation(f"Stable group assigns a partition twice: {owned}")
        fetched = {
            o.partition: o.offset
            for o in self.coordinator.offsets.fetch_offsets(GROUP)
            if o.offset >= 0
        }
        if fetched != self.acked_offsets:
            raise InvariantViolation(f"offsets {fetched} != acknowledged {self.acked_offsets}")

    def check_quiesced(self) -> None:
        """After a calm period: one Stable generation owning every partition, every
        consumer that is up a member of it with an assignment."""
        group = self.coordinator.groups.get(GROUP)
        up = [c for c in self.consumers.values() if c.up]
        if not up:
            return
        if group is None or group.state.value != "Stable":
            raise InvariantViolation(f"not Stable after quiescing: {group and group.state}")
        if set(group.members) != {c.member_id for c in up}:
            raise InvariantViolation(
                f"members {sorted(group.members)} != consumers {[c.member_id for c in up]}"
            )
        for c in up:
            if c.state != "stable" or c.generation != group.generation_id:
                raise InvariantViolation(f"{c.name} is {c.state} in generation {c.generation}")
        owned = sorted(p for c in up for p in c.assignment)
        if owned != list(range(self.partitions)):
            raise InvariantViolation(f"assigned {owned}, not every partition once")
