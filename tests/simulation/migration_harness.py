"""Deterministic simulation of a group moving between the classic and the consumer
(KIP-848) protocols: one pure `GroupCoordinator`, simulated members of three kinds, a
virtual clock and one seed.

- ``consumer`` members speak ConsumerGroupHeartbeat as the KIP-848 clients do (join with
  epoch 0, report what they own, drop revoked partitions at once, rejoin from scratch
  when fenced);
- ``eager`` classic members (``cooperative-sticky`` and ``range``): before every JoinGroup they give
  up everything they own;
- ``cooperative`` classic members (``cooperative-sticky``): they keep what they own
  across a rebalance, report it in their subscription, drop what SyncGroup no longer
  gives them and then rejoin at once (the second rebalance of KIP-429).

While the group is classic the elected leader assigns (round robin; a cooperative leader
withholds partitions another member still owns). Whatever a member speaks, the
coordinator decides: the first consumer-protocol member upgrades a classic group online,
the last one leaving, or replaced by a classic static member with its
``group.instance.id``, downgrades it (``group.consumer.migration.policy``). In half the
runs some members are static: a consumer-protocol one leaves with epoch -2, a classic one
sends no LeaveGroup, and a restart (maybe as another kind) takes its old self's place. Everything
random comes from the seed: which kind a member starts as (a restart may switch kinds:
the upgrade and downgrade paths), joins, leaves, crashes (its session times out), stalls
(maybe past its session), network delays, and coordinator failovers (a new shard loads
the records written so far; parked JoinGroup/SyncGroup get NOT_COORDINATOR).

Checked after every event (`check`), raising `InvariantViolation` at the first breach:
- no partition owned by two members at once, whatever protocol each speaks (among the
  members running and not stalled: a stalled member learns it lost its partitions at
  its next heartbeat, and that heartbeat is its first act when it wakes);
- a consumer group never holds a partition for two members;
- the group's type fits its members: never a classic and a consumer group with members
  at once, a consumer group with at least one consumer-protocol member (the last one
  leaving turns it classic);
- epochs never go back: the consumer group's epoch, the classic generation (after a
  failover: from the last one written), and the epoch (generation) of the assignment
  each member holds while it keeps its member id;
- a failover changes nothing: the group the new coordinator loads equals the one the old
  one had (its durable part: for a classic group in a rebalance, what was last written).
And once calm (`check_settled`): every partition owned by exactly one running member,
the group Stable with exactly the running members.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from moldau.coordinator.group import (
    GroupConfig,
    GroupCoordinator,
    JoinGroupMember,
    JoinGroupResult,
    MemberIdentity,
    SyncGroupResult,
)
from moldau.coordinator.group.consumer_group import TopicMetadata
from moldau.coordinator.group.consumer_groups import ConsumerHeartbeat
from moldau.coordinator.group.consumer_protocol import (
    assignment_partitions,
    decode_subscription,
    encode_assignment,
)
from moldau.coordinator.group.offsets_records import decode_group_value, encode_group_key
from moldau.ids import SeededIds
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
    TopicPartition,
)
from tests.simulation.group_driver import (
    REBALANCE_TIMEOUT_MS,
    SESSION_TIMEOUT_MS,
    GroupSimulationBase,
    InvariantViolation,
)

__all__ = [
    "KINDS",
    "REBALANCE_TIMEOUT_MS",
    "SESSION_TIMEOUT_MS",
    "InvariantViolation",
    "MigrationSimulation",
]

GROUP = "sim-migration"
TOPIC = "t"
TOPIC_ID = b"\x09" * 16
HEARTBEAT_INTERVAL_MS = 1_000
CLASSIC_HEARTBEAT_INTERVAL_MS = 2_000
CONFIG = GroupConfig(
    group_initial_rebalance_delay_ms=300,
    consumer_session_timeout_ms=SESSION_TIMEOUT_MS,
    consumer_heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
)
KINDS = ("consumer", "eager", "cooperative")
PROTOCOLS = {"eager": ("cooperative-sticky", "range"), "cooperative": ("cooperative-sticky",)}
"""As in the first bounce of a rolling upgrade from eager to cooperative (the Java client
is eager while any of its assignors is): every classic member prefers
``cooperative-sticky``, so they can share a classic group, also once it is reloaded (a
member's record keeps only the chosen protocol, as in Kafka)."""


def subscription(owned: frozenset[int]) -> bytes:
    """A ConsumerProtocolSubscription v1 (topics and owned partitions), as Java writes it."""
    sub = ConsumerProtocolSubscription(
        topics=[TOPIC], owned_partitions=[TopicPartition(TOPIC, sorted(owned))] if owned else []
    )
    return b"\x00\x01" + b"".join(bytes(part) for part in sub.encode(1))


@dataclass
class Member:
    name: str
    instance: str | None = None  # group.instance.id: a static member
    kind: str = "consumer"
    up: bool = False
    incarnation: int = 0
    """Bumped on start/crash/leave so events scheduled by an older life are dropped."""
    member_id: str = ""
    epoch: int = 0  # member epoch, or the classic generation (-1: none)
    owned: frozenset[int] = frozenset()
    state: str = "down"  # classic: joining | syncing | stable
    protocol: str | None = None  # classic: the protocol its JoinGroup answer named
    request: int | None = None  # the JoinGroup/SyncGroup a classic member waits for
    stalled_until: int = -1
    epochs: list[int] = field(default_factory=list)


class MigrationSimulation(GroupSimulationBase):
    group_id, topic, topic_id = GROUP, TOPIC, TOPIC_ID
    gone = (
        ErrorCode.FENCED_MEMBER_EPOCH,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.GROUP_ID_NOT_FOUND,
        ErrorCode.UNRELEASED_INSTANCE_ID,  # its previous self's session has not ended yet
    )

    def __init__(self, seed: int, members: int, partitions: int) -> None:
        super().__init__()
        self.seed = seed
        self.rng = random.Random(seed)
        self.now = 1_700_000_000_000
        self.partitions = partitions
        self.ids = SeededIds(self.rng.getrandbits(64))
        self.coordinator = GroupCoordinator(CONFIG, now_ms=self.now, ids=self.ids)
        static = self.rng.random() < 0.5  # half the runs have static members
        self.members = {
            f"m{i}": Member(f"m{i}", f"i-{i}" if static and self.rng.random() < 0.6 else None)
            for i in range(members)
        }
        self._epochs = {"classic": -1, "consumer": -1}
        self.conversions = {"upgrade": 0, "downgrade": 0}
        self._type = ""

    def member(self, name: str) -> Member:
        return self.members[name]

    def topics(self) -> dict[str, TopicMetadata]:
        return {TOPIC: TopicMetadata(TOPIC_ID, TOPIC, self.partitions)}

    # -- what happens to members -----------------------------------------------------
    def start(self, name: str, kind: str) -> None:
        m = self.members[name]
        if m.up:
            return
        m.kind, m.up, m.incarnation = kind, True, m.incarnation + 1
        m.member_id, m.epoch, m.owned, m.epochs = (
            "",
            0 if kind == "consumer" else -1,
            frozenset(),
            [],
        )
        m.stalled_until, m.request = -1, None
        if kind == "consumer":
            m.member_id = f"{name}-{self.rng.randrange(1 << 30):x}"
            self.heartbeat(m, m.incarnation)
        else:
            self.join(m)
            self._schedule_classic_heartbeat(m, m.incarnation)

    def crash(self, name: str) -> None:
        """Stops without a word: its session times out."""
        m = self.members[name]
        m.up, m.owned, m.state, m.request = False, frozenset(), "down", None
        m.incarnation += 1

    def leave(self, name: str) -> None:
        m = self.members[name]
        if not m.up:
            return
        if m.kind == "consumer":
            epoch = -1 if m.instance is None else -2  # a static member leaves for a while
            self.consumer_heartbeat(ConsumerHeartbeat(GROUP, m.member_id, epoch, m.instance))
        elif m.member_id and m.instance is None:  # a static classic member just stops
            _, _, effects = self.coordinator.leave_group(
                self.now, GROUP, [MemberIdentity(m.member_id, None)]
            )
            self._absorb(effects)
        self.crash(name)

    def stall(self, name: str, ms: int) -> None:
        m = self.members[name]
        m.stalled_until = max(m.stalled_until, self.now + ms)

    def failover(self) -> None:
        """A new coordinator loads the shard from the records written so far. Parked
        requests are answered NOT_COORDINATOR (their members retry on the new one)."""
        before = self.durable_view(written=True)
        self.answer_parked_not_coordinator()
        self.coordinator = GroupCoordinator(CONFIG, now_ms=self.now, ids=self.ids)
        self.coordinator.load(self.log, self.now)
        after = self.durable_view()
        if before != after:
            raise InvariantViolation(f"failover changed the group:\n{before}\n->\n{after}")
        # A classic generation is written when its assignment is: one whose join phase
        # ended but whose leader had not synced comes back as the one before.
        self._epochs["classic"] = -1

    # -- classic members -------------------------------------------------------------
    def _protocols(self, m: Member) -> list[tuple[str, bytes]]:
        return [(name, subscription(m.owned)) for name in PROTOCOLS[m.kind]]

    def join(self, m: Member) -> None:
        if m.kind == "eager":
            m.owned = frozenset()  # onPartitionsRevoked: everything, before joining
        self.send_join(m, m.instance, self._protocols(m))

    def on_join(self, m: Member, result: JoinGroupResult) -> None:
        if result.error is ErrorCode.NONE:
            m.member_id, m.protocol = result.member_id, result.protocol_name
            m.epoch = result.generation_id
            leads = result.leader == m.member_id and bool(result.members)
            assignments = self._assign(result.members) if leads else {}
            self.send_sync(m, m.epoch, assignments, m.instance, "consumer", m.protocol)
        else:
            self._rejoin_later(m, result.error)

    def on_sync(self, m: Member, result: SyncGroupResult) -> None:
        if result.error is not ErrorCode.NONE:
            self._rejoin_later(m, result.error)
            return
        self.saw_epoch(m, m.epoch)
        assigned = frozenset(assignment_partitions(result.assignment).get(TOPIC, []))
        revoked = m.owned - assigned
        m.owned, m.state = assigned, "stable"
        if revoked and m.kind == "cooperative":
            self.join(m)  # gave some up: rejoin so that they can move (KIP-429)

    def _rejoin_later(self, m: Member, error: ErrorCode) -> None:
        """After an error: UNKNOWN_MEMBER_ID starts over with a new id; it and
        ILLEGAL_GENERATION mean the partitions are lost (onPartitionsLost);
        FENCED_INSTANCE_ID stops the consumer."""
        if error is ErrorCode.FENCED_INSTANCE_ID:
            # Fatal to the Java client. A static member's replacement during a rebalance
            # is not written (Kafka's either): a failover brings the old member id back.
            self.crash(m.name)
            return
        if error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            m.owned, m.epochs = frozenset(), []
            if error is ErrorCode.UNKNOWN_MEMBER_ID:
                m.member_id = ""
        elif error not in (
            ErrorCode.REBALANCE_IN_PROGRESS,
            ErrorCode.NOT_COORDINATOR,
        ):
            raise InvariantViolation(f"{m.name} ({m.kind}): unexpected {error!r}")
        self.retry_join(m)

    def _assign(self, members: tuple[JoinGroupMember, ...]) -> dict[str, bytes]:
        """The leader's assignment: round robin over the member ids; the cooperative
        protocol withholds a partition while another member still owns it."""
        ids = sorted(jm.member_id for jm in members)
        owned: dict[int, str] = {}
        for jm in members:
            for tp in decode_subscription(jm.metadata).owned_partitions:
                for p in tp.partitions:
                    owned[p] = jm.member_id
        out: dict[str, bytes] = {}
        for i, member_id in enumerate(ids):
            parts = [
                p
                for p in range(i, self.partitions, len(ids))
                if owned.get(p, member_id) == member_id
            ]
            out[member_id] = encode_assignment({TOPIC: parts})
        return out

    def _schedule_classic_heartbeat(self, m: Member, incarnation: int) -> None:
        def beat() -> None:
            if not m.up or m.incarnation != incarnation:
                return
            if self.now < m.stalled_until:
                self.at(m.stalled_until - self.now, beat)
                return
            self.at(CLASSIC_HEARTBEAT_INTERVAL_MS, beat)
            if m.state != "stable":
                return
            error = self.coordinator.heartbeat(
                self.now,
                group_id=GROUP,
                member_id=m.member_id,
                generation_id=m.epoch,
                group_instance_id=m.instance,
            )
            if error is not ErrorCode.NONE:
                self._rejoin_later(m, error)

        self.at(CLASSIC_HEARTBEAT_INTERVAL_MS, beat)

    # -- invariants ------------------------------------------------------------------
    def check(self) -> None:
        self.check_owned_once(self.members.values(), lambda m: f"{m.name} ({m.kind})")
        classic = self.coordinator.groups.get(GROUP)
        consumer = self.coordinator.consumer_groups.get(GROUP)
        if classic is not None and classic.members and consumer is not None and consumer.members:
            raise InvariantViolation("a classic and a consumer group with members at once")
        kind = self._type
        if consumer is not None and consumer.members:
            kind = "consumer"
        elif classic is not None and classic.members:
            kind = "classic"
        if kind != self._type:
            if self._type:
                self.conversions["upgrade" if kind == "consumer" else "downgrade"] += 1
            self._epochs[kind] = -1  # a conversion starts the other type's count afresh
            self._type = kind
        if kind == "classic" and classic is not None and classic.members:
            self._monotonic("classic", classic.generation_id)
        if consumer is not None and consumer.members:
            if all(cm.classic is not None for cm in consumer.members.values()):
                raise InvariantViolation("a consumer group of classic members only")
            self._monotonic("consumer", consumer.group_epoch)
            self.check_held_once(consumer)

    def _monotonic(self, kind: str, epoch: int) -> None:
        if epoch < self._epochs[kind]:
            raise InvariantViolation(f"{kind} epoch went back: {self._epochs[kind]} -> {epoch}")
        self._epochs[kind] = epoch

    def durable_view(self, written: bool = False) -> tuple[object, ...]:
        """What a failover must keep of the group: a consumer group whole; a classic
        group's generation, protocol, leader and members' assignments (``written``: as
        its last record says, since a rebalance under way is not durable)."""
        consumer = self.coordinator.consumer_groups.get(GROUP)
        if consumer is not None and consumer.members:
            members = {
                mid: (
                    cm.member_epoch,
                    cm.assignment.previous_member_epoch,
                    cm.state,
                    cm.assignment.assigned,
                    cm.assignment.pending_revocation,
                    cm.subscribed_topic_names,
                    cm.instance_id,
                    cm.classic,
                )
                for mid, cm in consumer.members.items()
            }
            return (
                "consumer",
                consumer.group_epoch,
                consumer.target_assignment_epoch,
                consumer.target_assignment,
                consumer.subscription_metadata,
                members,
            )
        classic = self.coordinator.groups.get(GROUP)
        if classic is None or not classic.members:
            return ("none",)
        if written:
            key = encode_group_key(GROUP)
            value = next((v for k, v in reversed(self.log) if k == key), None)
            if value is None:  # its first rebalance is under way: nothing durable yet
                return ("none",)
            metadata = decode_group_value(value)
        else:
            metadata = classic.metadata_value()
        if not metadata.members:
            return ("none",)
        return ("classic", replace(metadata, current_state_timestamp=0))

    def check_settled(self) -> None:
        running = [m for m in self.members.values() if m.up]
        if not running:
            return
        owned = sorted(p for m in running for p in m.owned)
        if owned != list(range(self.partitions)):
            raise InvariantViolation(
                f"not settled: {[(m.name, m.kind, sorted(m.owned)) for m in running]}"
            )
        consumer = self.coordinator.consumer_groups.get(GROUP)
        classic = self.coordinator.groups.get(GROUP)
        group = consumer if consumer is not None and consumer.members else classic
        if group is None or group.state.value != "Stable":
            raise InvariantViolation(f"group not Stable: {group and group.state}")
        ids = sorted(group.members)
        if ids != sorted(m.member_id for m in running):
            raise InvariantViolation(f"members {ids} vs running {[m.member_id for m in running]}")
