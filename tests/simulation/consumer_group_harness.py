"""Deterministic simulation of KIP-848 consumer groups: one pure `GroupCoordinator`,
simulated ``group.protocol=consumer`` members, a virtual clock and one seed.

Members behave as the Java and librdkafka KIP-848 consumers do: join with epoch 0,
heartbeat every interval reporting what they own, drop revoked partitions at once and
take new ones when the coordinator hands them over, rejoin from scratch (same member id,
nothing owned) after FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID, leave with epoch -1.
Everything random comes from the seed: which member joins, leaves, crashes (stops
without leaving: its session times out), stalls (heartbeats late, maybe past its
session), topics growing, and coordinator failovers (the shard reloads from the records
it wrote).

Checked after every event, raising `InvariantViolation` at the first breach:
- no partition owned by two members at once (among members that are running and not
  stalled: a stalled member past its session is fenced and learns it when it wakes);
- the coordinator never holds a partition for two members;
- group epochs, and each member's epoch while it keeps its id, never go back;
- once calm, every partition of the subscribed topic is owned by exactly one member and
  the group is Stable.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from moldau.coordinator.group import GroupConfig, GroupCoordinator
from moldau.coordinator.group.consumer_group import TopicMetadata
from moldau.coordinator.group.consumer_groups import ConsumerHeartbeat
from moldau.ids import SeededIds
from tests.simulation.group_driver import (
    REBALANCE_TIMEOUT_MS,
    SESSION_TIMEOUT_MS,
    GroupSimulationBase,
    InvariantViolation,
)

__all__ = [
    "REBALANCE_TIMEOUT_MS",
    "SESSION_TIMEOUT_MS",
    "ConsumerGroupSimulation",
    "InvariantViolation",
]

GROUP = "sim-consumer-group"
TOPIC = "t"
TOPIC_ID = b"\x07" * 16
HEARTBEAT_INTERVAL_MS = 1_000
CONFIG = GroupConfig(
    consumer_session_timeout_ms=SESSION_TIMEOUT_MS,
    consumer_heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
)


@dataclass
class Member:
    name: str
    member_id: str = ""
    epoch: int = 0
    owned: frozenset[int] = frozenset()
    up: bool = False
    stalled_until: int = -1
    incarnation: int = 0
    """Bumped on start/crash/leave so heartbeats scheduled by an older life are dropped."""
    epochs: list[int] = field(default_factory=list)
    instance: str | None = None  # always dynamic


class ConsumerGroupSimulation(GroupSimulationBase):
    group_id, topic, topic_id = GROUP, TOPIC, TOPIC_ID

    def __init__(self, seed: int, members: int, partitions: int) -> None:
        super().__init__()
        self.rng = random.Random(seed)
        self.now = 0
        self.partitions = partitions
        self.coordinator = GroupCoordinator(CONFIG, ids=SeededIds(seed))
        self.members = {f"m{i}": Member(f"m{i}") for i in range(members)}
        self._last_group_epoch = 0

    def topics(self) -> dict[str, TopicMetadata]:
        return {TOPIC: TopicMetadata(TOPIC_ID, TOPIC, self.partitions)}

    # What members do

    def start(self, name: str) -> None:
        m = self.members[name]
        if m.up:
            return
        m.up, m.epoch, m.owned, m.stalled_until = True, 0, frozenset(), -1
        m.member_id = m.member_id or f"{name}-{self.rng.randrange(1 << 30):x}"
        m.incarnation += 1
        m.epochs = []
        self.heartbeat(m, m.incarnation)

    def crash(self, name: str) -> None:
        m = self.members[name]
        m.up, m.owned = False, frozenset()
        m.incarnation += 1
        m.member_id = ""  # a restarted process has a new member id

    def leave(self, name: str) -> None:
        m = self.members[name]
        if not m.up:
            return
        self.consumer_heartbeat(ConsumerHeartbeat(GROUP, m.member_id, -1))
        self.crash(name)

    def stall(self, name: str, ms: int) -> None:
        m = self.members[name]
        m.stalled_until = max(m.stalled_until, self.now + ms)

    def grow_topic(self) -> None:
        self.partitions += 1

    def failover(self) -> None:
        """A new coordinator loads the shard from the records written so far."""
        self.coordinator = GroupCoordinator(CONFIG, now_ms=self.now, ids=SeededIds(self.now))
        self.coordinator.load(self.log, self.now)

    # Invariants

    def check(self) -> None:
        self.check_owned_once(self.members.values(), lambda m: m.name)
        group = self.coordinator.consumer_groups.get(GROUP)
        if group is None:
            return
        if group.group_epoch < self._last_group_epoch:
            raise InvariantViolation(
                f"group epoch went back: {self._last_group_epoch} -> {group.group_epoch}"
            )
        self._last_group_epoch = group.group_epoch
        if group.target_assignment_epoch > group.group_epoch:
            raise InvariantViolation("target assignment epoch ahead of the group epoch")
        self.check_held_once(group)

    def check_settled(self) -> None:
        running = [m for m in self.members.values() if m.up]
        owned = sorted(p for m in running for p in m.owned)
        if running and owned != list(range(self.partitions)):
            raise InvariantViolation(f"not settled: {[(m.name, sorted(m.owned)) for m in running]}")
        group = self.coordinator.consumer_groups.get(GROUP)
        if running and (group is None or group.state.value != "Stable"):
            raise InvariantViolation(f"group not Stable: {group and group.state}")
        if group is not None and len(group.members) != len(running):
            raise InvariantViolation(
                f"members {sorted(group.members)} vs running {[m.member_id for m in running]}"
            )
