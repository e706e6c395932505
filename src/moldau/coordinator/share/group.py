"""Share-group membership (KIP-932): ShareGroupHeartbeat semantics on plain objects.

A share group has no rebalance to wait for: members never own partitions exclusively (the
share-partitions hand records out), so a new target assignment is given to every member
on its next heartbeat. Each membership or subscription change, and each change in the
partition counts of subscribed topics, bumps the group epoch; a member's epoch is the
group epoch of the assignment it last received. A heartbeat with another epoch is fenced
(FENCED_MEMBER_EPOCH) and the member rejoins with epoch 0. A member that does not
heartbeat within the session timeout is removed.

Kafka's ``simple`` assignor: per subscribed topic, when there are at least as many
partitions as members, partition ``i`` goes to member ``i mod members``; with more
members than partitions, member ``j`` gets partition ``j mod partitions``. Every member
gets work and every partition has a member.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from moldau.ids import IdSource
from moldau.protocol.errors import ErrorCode

ASSIGNOR = "simple"
LEAVE_EPOCH = -1
JOIN_EPOCH = 0


class ShareGroupState(Enum):
    EMPTY = "Empty"
    STABLE = "Stable"


Assignment = dict[str, tuple[int, ...]]  # topic name -> partitions
TopicPartitions = dict[bytes, tuple[str, frozenset[int]]]  # topic id -> name, partitions


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed: tuple[str, ...]
    deadline_ms: int
    assignment: Assignment = field(default_factory=dict)
    previous_member_epoch: int = LEAVE_EPOCH


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    topics: dict[str, tuple[bytes, int]] = field(default_factory=dict)  # id, partitions
    target: dict[str, Assignment] = field(default_factory=dict)
    # The share-partitions whose durable state exists (initialized), is being created
    # (initializing) or is being deleted (deleting: topic id -> name), as Kafka's
    # ShareGroupStatePartitionMetadata record says.
    initialized: TopicPartitions = field(default_factory=dict)
    initializing: TopicPartitions = field(default_factory=dict)
    deleting: dict[bytes, str] = field(default_factory=dict)

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}

    def uninitialized(self) -> TopicPartitions:
        """The subscribed topics' partitions whose share state is neither initialized nor
        being initialized; a topic whose state is being deleted waits for that to end."""
        missing: TopicPartitions = {}
        for name, (topic_id, count) in self.topics.items():
            if topic_id in self.deleting:
                continue
            have = _partitions(self.initialized, topic_id) | _partitions(
                self.initializing, topic_id
            )
            if parts := frozenset(range(count)) - have:
                missing[topic_id] = (name, parts)
        return missing


def _partitions(tps: TopicPartitions, topic_id: bytes) -> frozenset[int]:
    entry = tps.get(topic_id)
    return entry[1] if entry is not None else frozenset()


def add_partitions(tps: TopicPartitions, more: TopicPartitions) -> None:
    for topic_id, (name, parts) in more.items():
        tps[topic_id] = (name, _partitions(tps, topic_id) | parts)


def remove_partitions(tps: TopicPartitions, gone: TopicPartitions) -> None:
    for topic_id, (name, parts) in gone.items():
        if left := _partitions(tps, topic_id) - parts:
            tps[topic_id] = (name, left)
        else:
            tps.pop(topic_id, None)


def common_partitions(a: TopicPartitions, b: TopicPartitions) -> TopicPartitions:
    """The partitions in both."""
    both: TopicPartitions = {}
    for topic_id, (name, parts) in a.items():
        if shared := parts & _partitions(b, topic_id):
            both[topic_id] = (name, shared)
    return both


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    member_id: str = ""
    member_epoch: int = 0
    assignment: Assignment | None = None  # None: unchanged since the last heartbeat
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """One ShareGroupHeartbeat request (``subscribed`` None: unchanged)."""

    group_id: str
    member_id: str
    member_epoch: int
    subscribed: tuple[str, ...] | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""


class ShareGroupCoordinator:
    """The share groups this node coordinates."""

    def __init__(self, ids: IdSource, max_size: int = 200) -> None:
        self.ids = ids
        self.max_size = max_size
        self.groups: dict[str, ShareGroup] = {}

    def heartbeat(
        self,
        hb: Heartbeat,
        now_ms: int,
        session_timeout_ms: int,
        topics: Callable[[Iterable[str]], Mapping[str, tuple[bytes, int]]],
    ) -> HeartbeatResult:
        """``topics`` gives the id and partition count of each existing topic (a topic
        created again under its name gets a new id, and the members a new assignment)."""
        group = self.groups.get(hb.group_id)
        member = group.members.get(hb.member_id) if group is not None else None
        if hb.member_epoch == LEAVE_EPOCH:
            if group is not None and member is not None:
                self._remove(group, hb.member_id)
            return HeartbeatResult(ErrorCode.NONE, hb.member_id, LEAVE_EPOCH)
        if hb.member_epoch == JOIN_EPOCH:
            if member is None and hb.subscribed is None:
                return HeartbeatResult(
                    ErrorCode.INVALID_REQUEST, message="SubscribedTopicNames must be set on join"
                )
            group = self.groups.setdefault(hb.group_id, ShareGroup(hb.group_id))
            if member is None:
                if len(group.members) >= self.max_size:
                    return HeartbeatResult(ErrorCode.GROUP_MAX_SIZE_REACHED)
                member_id = hb.member_id or str(self.ids.uuid4())
                member = ShareMember(
                    member_id, 0, hb.client_id, hb.client_host, hb.rack_id, (), now_ms
                )
                group.members[member_id] = member
            member.previous_member_epoch, member.member_epoch = member.member_epoch, JOIN_EPOCH
        elif group is None or member is None:
            return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
        elif hb.member_epoch != member.member_epoch:
            return HeartbeatResult(ErrorCode.FENCED_MEMBER_EPOCH, member.member_id)
        changed = member.member_epoch == JOIN_EPOCH and not member.subscribed  # a new member
        member.deadline_ms = now_ms + session_timeout_ms
        if hb.rack_id is not None:
            member.rack_id = hb.rack_id
        if hb.subscribed is not None and tuple(sorted(set(hb.subscribed))) != member.subscribed:
            member.subscribed = tuple(sorted(set(hb.subscribed)))
            changed = True
        shapes = dict(topics(group.subscribed_topics()))
        if shapes != group.topics:
            group.topics = shapes
            changed = True
        if changed:
            group.group_epoch += 1
        if group.assignment_epoch != group.group_epoch:
            counts = {t: count for t, (_, count) in shapes.items()}
            group.target = assign_simple(group.members.values(), counts)
            group.assignment_epoch = group.group_epoch
        if member.member_epoch == group.assignment_epoch:
            return HeartbeatResult(ErrorCode.NONE, member.member_id, member.member_epoch)
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = group.assignment_epoch
        member.assignment = group.target.get(member.member_id, {})
        return HeartbeatResult(
            ErrorCode.NONE, member.member_id, member.member_epoch, member.assignment
        )

    def expire(self, now_ms: int) -> list[tuple[str, str]]:
        """Remove members whose session timed out: (group id, member id) of each."""
        gone: list[tuple[str, str]] = []
        for group in self.groups.values():
            for m in [m for m in group.members.values() if m.deadline_ms <= now_ms]:
                self._remove(group, m.member_id)
                gone.append((group.group_id, m.member_id))
        return gone

    def next_deadline_ms(self) -> int | None:
        deadlines = [m.deadline_ms for g in self.groups.values() for m in g.members.values()]
        return min(deadlines) if deadlines else None

    @staticmethod
    def _remove(group: ShareGroup, member_id: str) -> None:
        del group.members[member_id]
        group.group_epoch += 1


def assign_simple(
    members: Iterable[ShareMember], partition_counts: Mapping[str, int]
) -> dict[str, Assignment]:
    """Kafka's ``simple`` share assignor, topic by topic over the members subscribed."""
    target: dict[str, Assignment] = {}
    ordered = sorted(members, key=lambda m: m.member_id)
    for topic, count in sorted(partition_counts.items()):
        subscribers = [m.member_id for m in ordered if topic in m.subscribed]
        if not subscribers or count <= 0:
            continue
        chosen: dict[str, list[int]] = {}
        if count >= len(subscribers):
            for p in range(count):
                chosen.setdefault(subscribers[p % len(subscribers)], []).append(p)
        else:
            for j, member_id in enumerate(subscribers):
                chosen[member_id] = [j % count]
        for member_id, parts in chosen.items():
            target.setdefault(member_id, {})[topic] = tuple(parts)
    return target
