"""One classic group's membership, generation and committed offsets (Kafka's GroupMetadata).

Pure bookkeeping: the coordinator decides when to rebalance, answer, or time out.
"""

from __future__ import annotations

from collections import Counter
from enum import Enum

from moldau.protocol.errors import ErrorCode

from .consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscription_topics
from .member import Member
from .offsets_records import GroupMetadataValue, MemberMetadataValue, OffsetAndMetadata
from .results import JoinGroupMember, TopicPartition
from .txn_offsets import PendingTxnOffsets


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class Group:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp_ms: int | None = now_ms
        """When the current state began; None for groups loaded from pre-v2 records."""
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        """group.instance.id -> current member id."""
        self.pending_members: set[str] = set()
        """Member ids handed out with MEMBER_ID_REQUIRED, not yet joined (KIP-394)."""
        self.pending_sync_members: set[str] = set()
        """Members of the new generation that have not sent SyncGroup yet."""
        self.initial_join: tuple[int, int] | None = None
        """(delay_ms, remaining_ms) while the join phase is group.initial.rebalance.delay.ms."""
        self.new_member_added = False
        self.subscribed_topics: frozenset[str] | None = None
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        self.pending_txn = PendingTxnOffsets()  # TxnOffsetCommits awaiting their marker
        self._supported_protocols: Counter[str] = Counter()

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp_ms = now_ms

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def add(self, member: Member) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._supported_protocols.update(member.protocol_names)
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id)
        self._supported_protocols.subtract(member.protocol_names)
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_sync_members.discard(member_id)

    def update_member(
        self,
        member: Member,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
    ) -> None:
        self._supported_protocols.subtract(member.protocol_names)
        member.protocols = protocols
        self._supported_protocols.update(member.protocol_names)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """A restarted static member takes over its predecessor's place and assignment."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_id)
            self.pending_sync_members.add(new_id)
        self.static_members[instance_id] = new_id
        return member

    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and any(
            self._supported_protocols[name] == len(self.members) for name in protocols
        )

    def select_protocol(self) -> str:
        """The protocol all members support with the most first-choice votes (ties: first)."""
        candidates = {p for p, n in self._supported_protocols.items() if n == len(self.members)}
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return votes.most_common(1)[0][0]

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        """Kafka's validateCurrentMember: a static id must map to member_id, which must exist."""
        if group_instance_id is not None:
            current = self.static_members.get(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        return None if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    def has_all_members_joined(self) -> bool:
        awaiting = sum(m.join_request is not None for m in self.members.values())
        return awaiting == len(self.members) and not self.pending_members

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any rejoined member; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].join_request is not None:
            return True
        joined = next((m for m in self.members.values() if m.join_request is not None), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition(GroupState.EMPTY, now_ms)
        self.subscribed_topics = self._compute_subscribed_topics()
        self.pending_sync_members.clear()

    def refresh_subscribed_topics(self) -> None:
        """After members were put in place without a generation change (a downgrade)."""
        self.subscribed_topics = self._compute_subscribed_topics()

    def current_member_metadata(self) -> tuple[JoinGroupMember, ...]:
        protocol = self.protocol_name or ""
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in self.members.values()
        )

    def _compute_subscribed_topics(self) -> frozenset[str] | None:
        """Topics of all members' consumer subscriptions; None when unknown or undecodable."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        try:
            return frozenset(
                topic
                for m in self.members.values()
                if (subscription := m.metadata(self.protocol_name))
                for topic in subscription_topics(subscription)
            )
        except ValueError:
            return None

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    def remove_expired_offsets(
        self, now_ms: int, retention_ms: int
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Kafka's expiry rules: KIP-211 for Empty groups, per-commit otherwise."""
        if self.protocol_type is not None and self.state is GroupState.EMPTY:
            since_empty = self.state_timestamp_ms
            expired = self._expired(now_ms, retention_ms, frozenset(), since_empty)
        elif (
            self.protocol_type == CONSUMER_PROTOCOL_TYPE
            and self.subscribed_topics is not None
            and self.state is GroupState.STABLE
        ):
            expired = self._expired(now_ms, retention_ms, self.subscribed_topics, None)
        elif self.protocol_type is None:
            expired = self._expired(now_ms, retention_ms, frozenset(), None)
        else:
            return {}
        for tp in expired:
            del self.offsets[tp]
        return expired

    def _expired(
        self, now_ms: int, retention_ms: int, subscribed: frozenset[str], base_ms: int | None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        def is_expired(offset: OffsetAndMetadata) -> bool:
            if offset.expire_timestamp is not None:
                return now_ms >= offset.expire_timestamp
            base = offset.commit_timestamp if base_ms is None else base_ms
            return now_ms - base >= retention_ms

        pending = self.pending_txn.partitions()  # as Kafka: kept until the marker
        return {
            tp: offset
            for tp, offset in self.offsets.items()
            if tp[0] not in subscribed and tp not in pending and is_expired(offset)
        }

    def metadata_value(self) -> GroupMetadataValue:
        protocol = self.protocol_name or ""
        members = tuple(
            MemberMetadataValue(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(protocol),
                m.assignment,
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            self.protocol_type or "",
            self.generation_id,
            self.protocol_name,
            self.leader_id,
            -1 if self.state_timestamp_ms is None else self.state_timestamp_ms,
            members,
        )

    @classmethod
    def from_metadata(cls, group_id: str, value: GroupMetadataValue, now_ms: int) -> Group:
        """A group as persisted: Stable with its members if it had any, else Empty."""
        group = cls(group_id, now_ms)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.state_timestamp_ms = (
            None if value.current_state_timestamp < 0 else value.current_state_timestamp
        )
        for m in value.members:
            group.add(
                Member(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout,
                    m.session_timeout,
                    value.protocol_type,
                    [(value.protocol or "", m.subscription)],
                    m.assignment,
                )
            )
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        if group.members:
            group.state = GroupState.STABLE
        group.subscribed_topics = group._compute_subscribed_topics()
        return group
