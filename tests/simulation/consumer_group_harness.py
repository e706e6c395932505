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

import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from moldau.coordinator.group import GroupConfig, GroupCoordinator
from moldau.coordinator.group.consumer_group import TopicMetadata
from moldau.coordinator.group.consumer_groups import ConsumerHeartbeat, HeartbeatResult
from moldau.ids import SeededIds
from moldau.protocol.errors import ErrorCode

GROUP = "sim-consumer-group"
TOPIC = "t"
TOPIC_ID = b"\x07" * 16
SESSION_TIMEOUT_MS = 6_000
HEARTBEAT_INTERVAL_MS = 1_000
REBALANCE_TIMEOUT_MS = 10_000
CONFIG = GroupConfig(
    consumer_session_timeout_ms=SESSION_TIMEOUT_MS,
    consumer_heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
)


class InvariantViolation(AssertionError):
    pass


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


class ConsumerGroupSimulation:
    def __init__(self, seed: int, members: int, partitions: int) -> None:
        self.rng = random.Random(seed)
        self.now = 0
        self.partitions = partitions
        self.coordinator = GroupCoordinator(CONFIG, ids=SeededIds(seed))
        self.log: list[tuple[bytes, bytes | None]] = []
        self.members = {f"m{i}": Member(f"m{i}") for i in range(members)}
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._last_group_epoch = 0
        self.events = 0

    # The event loop

    def at(self, delay_ms: int, action: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (self.now + delay_ms, next(self._seq), action))

    def run_until(self, end_ms: int) -> None:
        while True:
            timer = self.coordinator.next_timer_ms()
            queued = self._queue[0][0] if self._queue else end_ms + 1
            when = min(timer, queued)
            if when > end_ms:
                break
            self.now = max(self.now, when)
            if timer <= queued:
                self._absorb(self.coordinator.tick(self.now).records)
            else:
                heapq.heappop(self._queue)[2]()
            self.check()
        self.now = end_ms

    def _absorb(self, records: list) -> None:  # type: ignore[type-arg]
        self.log.extend((r.key, r.value) for r in records)

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
        self._heartbeat(m, m.incarnation)

    def crash(self, name: str) -> None:
        m = self.members[name]
        m.up, m.owned = False, frozenset()
        m.incarnation += 1
        m.member_id = ""  # a restarted process has a new member id

    def leave(self, name: str) -> None:
        m = self.members[name]
        if not m.up:
            return
        self._send(m, ConsumerHeartbeat(GROUP, m.member_id, -1))
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

    def _send(self, m: Member, hb: ConsumerHeartbeat) -> HeartbeatResult:
        result, effects = self.coordinator.consumer_group_heartbeat(self.now, hb, self.topics())
        self._absorb(effects.records)
        self.events += 1
        return result

    def _heartbeat(self, m: Member, incarnation: int) -> None:
        if not m.up or m.incarnation != incarnation:
            return
        if self.now < m.stalled_until:
            self.at(m.stalled_until - self.now, lambda: self._heartbeat(m, incarnation))
            return
        joining = m.epoch == 0
        hb = ConsumerHeartbeat(
            GROUP,
            m.member_id,
            m.epoch,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS if joining else -1,
            subscribed_topic_names=[TOPIC] if joining else None,
            owned={TOPIC_ID: m.owned},
        )
        result = self._send(m, hb)
        if result.error in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            m.epoch, m.owned, m.epochs = 0, frozenset(), []  # lost: rejoin from scratch
            self.at(self.rng.randint(10, 200), lambda: self._heartbeat(m, incarnation))
            return
        if result.error is not ErrorCode.NONE:
            raise InvariantViolation(f"{m.name}: unexpected {result.error!r}")
        if m.epochs and result.member_epoch < m.epochs[-1]:
            raise InvariantViolation(f"{m.name}: member epoch went back {m.epochs} -> {result}")
        m.epoch = result.member_epoch
        m.epochs.append(m.epoch)
        changed = False
        if result.assignment is not None:
            target = result.assignment.get(TOPIC_ID, frozenset())
            changed = target != m.owned
            m.owned = frozenset(target)
        # Acknowledge a change at once, as the clients do; else wait for the interval.
        delay = self.rng.randint(1, 50) if changed else result.heartbeat_interval_ms
        self.at(delay, lambda: self._heartbeat(m, incarnation))

    # Invariants

    def check(self) -> None:
        seen: dict[int, str] = {}
        for m in self.members.values():
            if not m.up or self.now < m.stalled_until:
                continue
            for p in m.owned:
                if p in seen:
                    raise InvariantViolation(
                        f"t={self.now}: partition {p} owned by {seen[p]} and {m.name}"
                    )
                seen[p] = m.name
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
        held: dict[int, str] = {}
        for member in group.members.values():
            a = member.assignment
            for p in a.assigned.get(TOPIC_ID, frozenset()) | a.pending_revocation.get(
                TOPIC_ID, frozenset()
            ):
                if p in held:
                    raise InvariantViolation(f"coordinator holds {p} for two members")
                held[p] = member.member_id

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
