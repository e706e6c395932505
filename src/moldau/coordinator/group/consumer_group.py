"""One KIP-848 consumer group's state (Kafka's ConsumerGroup): members with their
epochs and assignments, the group epoch, the target assignment and its epoch, and who
owns each partition now.

Pure bookkeeping: :mod:`.consumer_groups` decides when epochs move and members go.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

from .assignors import Assignment
from .reconciliation import MemberAssignment, MemberState

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a member speaking the classic protocol inside a consumer group keeps from its
    JoinGroup (Kafka's ClassicMemberMetadata): its session timeout and protocols."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    """(name, ConsumerProtocolSubscription) in the member's order of preference."""


@dataclass
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assignment: MemberAssignment = field(default_factory=MemberAssignment)
    classic: ClassicMemberMetadata | None = None
    """Set while the member speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat)."""

    @property
    def member_epoch(self) -> int:
        return self.assignment.member_epoch

    @property
    def state(self) -> MemberState:
        return self.assignment.state


@dataclass(frozen=True)
class TopicMetadata:
    """A subscribed topic as the group last saw it (Kafka's ConsumerGroupPartitionMetadata)."""

    topic_id: bytes
    name: str
    num_partitions: int
    partition_racks: tuple[frozenset[str], ...] = field(default=(), compare=False)
    """Per partition, its replicas' racks (empty: none known). Not part of the group's
    subscription metadata: a rack change does not start a rebalance, as in Kafka 4.0."""


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.target_assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        """group.instance.id -> member id."""
        self.target_assignment: dict[str, Assignment] = {}
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        """Subscribed topics by name, as of the last group epoch bump."""
        self._owners: dict[tuple[bytes, int], str] = {}
        """Partition -> the member that holds it (assigned or still revoking)."""

    @property
    def state(self) -> ConsumerGroupState:
        """Kafka's derived state: Empty, Assigning (target behind the group epoch),
        Reconciling (members behind the target), Stable."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.target_assignment_epoch != self.group_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(
            m.member_epoch != self.target_assignment_epoch or m.state is not MemberState.STABLE
            for m in self.members.values()
            if m.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
        ):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def owner(self, topic_id: bytes, partition: int) -> str | None:
        return self._owners.get((topic_id, partition))

    def is_free(self, member_id: str, topic_id: bytes, partition: int) -> bool:
        return self._owners.get((topic_id, partition), member_id) == member_id

    def put_member(self, member: ConsumerGroupMember) -> None:
        """Add or update a member, keeping the owners and static ids in step."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for assignment in (member.assignment.assigned, member.assignment.pending_revocation):
            for topic_id, parts in assignment.items():
                for p in parts:
                    self._owners[(topic_id, p)] = member.member_id

    def set_assignment(self, member: ConsumerGroupMember, assignment: MemberAssignment) -> None:
        self.put_member(replace(member, assignment=assignment))

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == (
            member_id
        ):
            del self.static_members[member.instance_id]
        self.target_assignment.pop(member_id, None)
        return member

    def _release(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assignment.assigned, member.assignment.pending_revocation):
            for topic_id, parts in assignment.items():
                for p in parts:
                    if self._owners.get((topic_id, p)) == member.member_id:
                        del self._owners[(topic_id, p)]

    def subscribed_topic_names(self) -> set[str]:
        return {name for m in self.members.values() for name in m.subscribed_topic_names}

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members ask for (ties: first asked), else ``default``."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        return max(votes, key=lambda a: votes[a]) if votes else default
