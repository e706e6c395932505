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

The event loop, network, records log and the classic JoinGroup/SyncGroup round trips are
`group_driver.GroupSimulationBase`'s, shared with the KIP-848 and migration simulations.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from moldau.coordinator.group import (
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
from tests.simulation.group_driver import (
    REBALANCE_TIMEOUT_MS,
    SESSION_TIMEOUT_MS,
    ClassicMember,
    GroupSimulationBase,
    InvariantViolation,
)

__all__ = ["REBALANCE_TIMEOUT_MS", "SESSION_TIMEOUT_MS", "GroupSimulation", "InvariantViolation"]

GROUP = "sim-group"
TOPIC = "t"
HEARTBEAT_INTERVAL_MS = 2_000
CONFIG = GroupConfig(group_initial_rebalance_delay_ms=300)


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


class GroupSimulation(GroupSimulationBase):
    group_id = GROUP

    def __init__(self, seed: int, consumers: int, partitions: int) -> None:
        super().__init__()
        self.rng = random.Random(seed)
        self.now = 1_700_000_000_000
        self.partitions = partitions
        self.ids = SeededIds(self.rng.getrandbits(64))
        self.coordinator = GroupCoordinator(CONFIG, now_ms=self.now, ids=self.ids)
        self.consumers = {f"c{i}": ClassicConsumer(f"c{i}") for i in range(consumers)}
        self._sync_context: dict[int, tuple[int, str]] = {}  # request -> generation, member
        # What the invariants compare against.
        self.acked_offsets: dict[int, int] = {}
        self.received: dict[int, dict[str, list[int]]] = {}  # generation -> member -> parts
        self.generation = 0

    def member(self, name: str) -> ClassicMember:
        return self.consumers[name]

    def _answer(self, request_id: object, result: JoinGroupResult | SyncGroupResult) -> None:
        """Notes which partitions a SyncGroup answer hands to whom (for `check`)."""
        assert isinstance(request_id, int)
        synced = self._sync_context.pop(request_id, None)
        if synced is not None and result.error is ErrorCode.NONE:
            assert isinstance(result, SyncGroupResult)
            generation, member_id = synced
            parts = decode_assignment(result.assignment)
            self.received.setdefault(generation, {})[member_id] = parts
        super()._answer(request_id, result)

    # -- consumer actions ------------------------------------------------------------
    def start(self, name: str) -> None:
        c = self.consumers[name]
        c.up, c.incarnation, c.member_id, c.generation = True, c.incarnation + 1, "", -1
        c.assignment = []
        self.join(c)
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
        self.answer_parked_not_coordinator()
        loader = GroupLoader()
        for key, value in self.log:
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

    def join(self, c: ClassicConsumer) -> None:
        self.send_join(c, None, [("roundrobin", subscription(TOPIC))])

    def _sync(self, c: ClassicConsumer, assignments: Mapping[str, bytes]) -> None:
        request_id = self.send_sync(c, c.generation, assignments)
        self._sync_context[request_id] = (c.generation, c.member_id)

    def _rejoin_later(self, c: ClassicConsumer, reset: bool = False) -> None:
        if reset:
            c.member_id, c.generation = "", -1
        self.retry_join(c)

    def on_join(self, c: ClassicConsumer, result: JoinGroupResult) -> None:
        if result.error is ErrorCode.NONE:
            c.member_id, c.generation = result.member_id, result.generation_id
            leads = result.leader == c.member_id
            self._sync(c, round_robin(result.members, self.partitions) if leads else {})
        else:
            self._rejoin_later(c, reset=result.error is ErrorCode.UNKNOWN_MEMBER_ID)

    def on_sync(self, c: ClassicConsumer, result: SyncGroupResult) -> None:
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
                self.network_delay(), lambda: self._on_heartbeat(c, incarnation, generation, error)
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
