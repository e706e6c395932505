"""What the group-coordinator simulations share (group_harness, consumer_group_harness,
migration_harness): the event loop over one pure `GroupCoordinator`, the records log,
and the members' side of both protocols (a classic member's JoinGroup/SyncGroup round
trips, a KIP-848 member's heartbeat loop).

Each harness keeps its own members, invariants and failure handling; the random draws
happen here in the order each harness made them before, so a seed replays the same run.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable, Iterable, Mapping
from typing import ClassVar, Protocol

from moldau.coordinator.group import Effects, GroupCoordinator, JoinGroupResult, SyncGroupResult
from moldau.coordinator.group.consumer_group import ConsumerGroup, TopicMetadata
from moldau.coordinator.group.consumer_groups import ConsumerHeartbeat, HeartbeatResult
from moldau.coordinator.group.coordinator import NO_TOPICS
from moldau.protocol.errors import ErrorCode

SESSION_TIMEOUT_MS = 6_000
REBALANCE_TIMEOUT_MS = 10_000
RETRY_BACKOFF_MS = 100


class InvariantViolation(AssertionError):
    pass


class ClassicMember(Protocol):
    """What the classic driving reads and writes of a harness's member."""

    name: str
    up: bool
    incarnation: int
    """Bumped on start/crash/leave so events scheduled by an older life are dropped."""
    member_id: str
    state: str  # down | joining | syncing | stable
    request: int | None  # the JoinGroup/SyncGroup the member waits for


class ConsumerMember(Protocol):
    """What the KIP-848 heartbeat loop reads and writes of a harness's member."""

    name: str
    up: bool
    incarnation: int
    member_id: str
    instance: str | None
    epoch: int
    owned: frozenset[int]
    stalled_until: int
    epochs: list[int]


class GroupSimulationBase:
    group_id: ClassVar[str]
    topic: ClassVar[str] = "t"
    topic_id: ClassVar[bytes] = b""
    gone: ClassVar[tuple[ErrorCode, ...]] = (
        ErrorCode.FENCED_MEMBER_EPOCH,
        ErrorCode.UNKNOWN_MEMBER_ID,
    )
    """The heartbeat errors after which a KIP-848 member rejoins from scratch."""

    rng: random.Random
    now: int
    partitions: int
    coordinator: GroupCoordinator

    def __init__(self) -> None:
        self.log: list[tuple[bytes, bytes | None]] = []  # the shard's partition
        self.events = 0
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._requests = itertools.count()
        self._waiting: dict[int, tuple[str, int, str]] = {}  # request -> member, life, kind

    # -- the event loop --------------------------------------------------------------
    def at(self, delay_ms: int, action: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (self.now + delay_ms, next(self._seq), action))

    def run_until(self, end_ms: int) -> None:
        """Deliver events and fire coordinator timers in time order up to ``end_ms``,
        checking the invariants after each."""
        while True:
            timer = self.coordinator.next_timer_ms()
            queued = self._queue[0][0] if self._queue else end_ms + 1
            when = min(timer, queued)
            if when > end_ms:
                break
            self.now = max(self.now, when)
            if timer <= queued:
                self._absorb(self.coordinator.tick(self.now))
            else:
                heapq.heappop(self._queue)[2]()
            self.events += 1
            self.check()
        self.now = end_ms

    def check(self) -> None:
        raise NotImplementedError

    def network_delay(self) -> int:
        return self.rng.randint(0, 20)

    def _absorb(self, effects: Effects) -> None:
        """Records are written at once (the runtime holds answers until they commit)."""
        self.log.extend((r.key, r.value) for r in effects.records)
        for request_id, result in effects.completions:
            self._answer(request_id, result)

    def topics(self) -> Mapping[str, TopicMetadata]:
        return NO_TOPICS

    # -- classic members -------------------------------------------------------------
    def member(self, name: str) -> ClassicMember:
        raise NotImplementedError

    def join(self, m: ClassicMember) -> None:
        """Send the member's JoinGroup (`send_join`, with its protocols)."""
        raise NotImplementedError

    def on_join(self, m: ClassicMember, result: JoinGroupResult) -> None:
        raise NotImplementedError

    def on_sync(self, m: ClassicMember, result: SyncGroupResult) -> None:
        raise NotImplementedError

    def _answer(self, request_id: object, result: JoinGroupResult | SyncGroupResult) -> None:
        assert isinstance(request_id, int)
        name, incarnation, _ = self._waiting.pop(request_id)
        self.at(self.network_delay(), lambda: self._deliver(name, incarnation, request_id, result))

    def _deliver(
        self,
        name: str,
        incarnation: int,
        request_id: int,
        result: JoinGroupResult | SyncGroupResult,
    ) -> None:
        m = self.member(name)
        if not m.up or m.incarnation != incarnation or m.request != request_id:
            return  # a closed connection, or an answer to a request it replaced
        if isinstance(result, JoinGroupResult) and result.error is ErrorCode.MEMBER_ID_REQUIRED:
            m.member_id = result.member_id  # KIP-394: join again with the id it was given
            self.join(m)
        elif isinstance(result, JoinGroupResult):
            self.on_join(m, result)
        else:
            self.on_sync(m, result)

    def answer_parked_not_coordinator(self) -> None:
        """A failover: the runtime answers the parked JoinGroup/SyncGroup requests
        NOT_COORDINATOR (their members retry on the new coordinator)."""
        for request_id in list(self._waiting):
            kind = self._waiting[request_id][2]
            result_type = JoinGroupResult if kind == "join" else SyncGroupResult
            self._answer(request_id, result_type(ErrorCode.NOT_COORDINATOR))

    def send_join(
        self, m: ClassicMember, instance: str | None, protocols: list[tuple[str, bytes]]
    ) -> int:
        """JoinGroup after a network delay (KIP-394: a dynamic member needs a known id)."""
        request_id = next(self._requests)
        m.state, m.request = "joining", request_id
        self._waiting[request_id] = (m.name, m.incarnation, "join")

        def send() -> None:
            if request_id not in self._waiting:
                return  # answered NOT_COORDINATOR by a failover while in flight
            self._absorb(
                self.coordinator.join_group(
                    request_id,
                    self.now,
                    group_id=self.group_id,
                    member_id=m.member_id,
                    group_instance_id=instance,
                    client_id=m.name,
                    client_host="/127.0.0.1",
                    session_timeout_ms=SESSION_TIMEOUT_MS,
                    rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                    protocol_type="consumer",
                    protocols=protocols,
                    require_known_member_id=instance is None,
                    topics=self.topics(),
                )
            )

        self.at(self.network_delay(), send)
        return request_id

    def send_sync(
        self,
        m: ClassicMember,
        generation: int,
        assignments: Mapping[str, bytes],
        instance: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> int:
        """SyncGroup after a network delay, for the member id and generation it has now."""
        request_id = next(self._requests)
        m.state, m.request = "syncing", request_id
        self._waiting[request_id] = (m.name, m.incarnation, "sync")
        member_id = m.member_id

        def send() -> None:
            if request_id not in self._waiting:
                return  # answered NOT_COORDINATOR by a failover while in flight
            self._absorb(
                self.coordinator.sync_group(
                    request_id,
                    self.now,
                    group_id=self.group_id,
                    generation_id=generation,
                    member_id=member_id,
                    group_instance_id=instance,
                    protocol_type=protocol_type,
                    protocol_name=protocol_name,
                    assignments=assignments,
                )
            )

        self.at(self.network_delay(), send)
        return request_id

    def retry_join(self, m: ClassicMember) -> None:
        """Back off, then join again unless the member stopped or restarted meanwhile."""
        m.state, m.request = "joining", None
        incarnation = m.incarnation
        self.at(RETRY_BACKOFF_MS, lambda: m.incarnation == incarnation and m.up and self.join(m))

    # -- KIP-848 members -------------------------------------------------------------
    def consumer_heartbeat(self, hb: ConsumerHeartbeat) -> HeartbeatResult:
        result, effects = self.coordinator.consumer_group_heartbeat(self.now, hb, self.topics())
        self._absorb(effects)
        return result

    def heartbeat(self, m: ConsumerMember, incarnation: int) -> None:
        """One ConsumerGroupHeartbeat as the KIP-848 clients send it (subscription on
        joining, what it owns every time), then the next one: at once after a change
        (acknowledging it), else after the interval; from scratch after ``gone``."""
        if not m.up or m.incarnation != incarnation:
            return
        if self.now < m.stalled_until:
            self.at(m.stalled_until - self.now, lambda: self.heartbeat(m, incarnation))
            return
        joining = m.epoch == 0
        result = self.consumer_heartbeat(
            ConsumerHeartbeat(
                self.group_id,
                m.member_id,
                m.epoch,
                m.instance,
                rebalance_timeout_ms=REBALANCE_TIMEOUT_MS if joining else -1,
                subscribed_topic_names=[self.topic] if joining else None,
                owned={self.topic_id: m.owned},
            )
        )
        if result.error in self.gone:
            m.epoch, m.owned, m.epochs = 0, frozenset(), []  # lost: rejoin from scratch
            self.at(self.rng.randint(10, 200), lambda: self.heartbeat(m, incarnation))
            return
        if result.error is not ErrorCode.NONE:
            raise InvariantViolation(f"{m.name}: unexpected {result.error!r}")
        self.saw_epoch(m, result.member_epoch)
        changed = False
        if result.assignment is not None:
            target = frozenset(result.assignment.get(self.topic_id, frozenset()))
            changed, m.owned = target != m.owned, target
        delay = self.rng.randint(1, 50) if changed else result.heartbeat_interval_ms
        self.at(delay, lambda: self.heartbeat(m, incarnation))

    def saw_epoch(self, m: ConsumerMember, epoch: int) -> None:
        """A member's epoch never goes back while it keeps its member id."""
        if m.epochs and epoch < m.epochs[-1]:
            raise InvariantViolation(f"{m.name}: epoch went back {m.epochs} -> {epoch}")
        m.epoch = epoch
        m.epochs.append(epoch)

    # -- invariants ------------------------------------------------------------------
    def check_owned_once(
        self, members: Iterable[ConsumerMember], label: Callable[[ConsumerMember], str]
    ) -> None:
        """No partition owned by two members at once, among those running and not
        stalled (a stalled member learns it lost its partitions when it wakes)."""
        seen: dict[int, str] = {}
        for m in members:
            if not m.up or self.now < m.stalled_until:
                continue
            for p in m.owned:
                if p in seen:
                    raise InvariantViolation(
                        f"t={self.now}: partition {p} owned by {seen[p]} and {label(m)}"
                    )
                seen[p] = label(m)

    def check_held_once(self, group: ConsumerGroup) -> None:
        """The coordinator never holds a partition (assigned or pending revocation) for
        two members of a consumer group."""
        held: dict[int, str] = {}
        for member in group.members.values():
            a = member.assignment
            for p in a.assigned.get(self.topic_id, frozenset()) | a.pending_revocation.get(
                self.topic_id, frozenset()
            ):
                if p in held:
                    raise InvariantViolation(f"coordinator holds {p} for two members")
                held[p] = member.member_id


def churn(
    sim: GroupSimulationBase,
    names: list[str],
    start: Callable[[str], None],
    chaos_ms: int,
    max_step_ms: int,
    act: Callable[[str, float], None],
) -> None:
    """The chaos phase of a group simulation: every member starts within 500 ms, then,
    for ``chaos_ms``, the simulation runs up to ``max_step_ms`` and ``act`` is called with
    a member picked at random and a draw in [0, 1) that chooses what happens to it."""
    rng = sim.rng
    for name in names:
        sim.at(rng.randint(0, 500), lambda name=name: start(name))  # type: ignore[misc]
    end = sim.now + chaos_ms
    while sim.now < end:
        sim.run_until(sim.now + rng.randint(1, max_step_ms))
        name = rng.choice(names)
        act(name, rng.random())
