"""KIP-848 consumer groups of one shard: ConsumerGroupHeartbeat, its timers and
ConsumerGroupDescribe (the consumer-group half of Kafka's GroupMetadataManager).

Each heartbeat: validate and fence (member epoch, static instance id), update the
member's subscription, bump the group epoch when the members or their subscribed topics
changed, recompute the target assignment when it lags the group epoch, then move the
member one reconciliation step. Session and rebalance timeouts are deadlines on the
shard's timers. Every change is written as Kafka's coordinator records.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from moldau.ids import IdSource
from moldau.protocol.errors import ErrorCode

from . import consumer_group_records as records
from .assignors import ASSIGNORS, Assignment, AssignmentMember
from .config import GroupConfig
from .consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    TopicMetadata,
)
from .offsets import OperationEffects
from .reconciliation import MemberAssignment, MemberState, reconcile
from .timers import Timers

TopicsView = Mapping[str, TopicMetadata]
"""The topics of the metadata image the coordinator sees, by name. A snapshot: a new
view object when topics change (regex matches are cached per view)."""
GroupOverrides = Mapping[str, str]
"""A group's own configs (Kafka's GroupConfig), by name."""
NO_OVERRIDES: GroupOverrides = MappingProxyType({})
MEMBER_TIMERS = ("consumer-session", "consumer-rebalance", "consumer-join", "consumer-sync")
"""A member's timeouts: its session, revoking (rebalance timeout), and for a classic
member the JoinGroup and SyncGroup it owes (Kafka's consumer group join/sync timeouts)."""
SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"


class HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class HeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None
    """Sent when it changed (or the member's view differs); None: unchanged."""


@dataclass(frozen=True)
class ConsumerHeartbeat:
    """A ConsumerGroupHeartbeat request's fields (None: not sent, keep the last value)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: Sequence[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Mapping[bytes, frozenset[int]] | None = None
    client_id: str = ""
    client_host: str = ""
    classic: ClassicMemberMetadata | None = None
    """A classic member's JoinGroup brought here (the group was upgraded online)."""


class ConsumerGroupManager:
    def __init__(
        self,
        config: GroupConfig,
        groups: dict[str, ConsumerGroup],
        ops: OperationEffects,
        timers: Timers[tuple[str, ...]],
        ids: IdSource,
    ) -> None:
        self.config = config
        self.groups = groups
        self._ops = ops
        self.timers = timers
        self._ids = ids
        self._regex_view: TopicsView | None = None
        self._regex_matches: dict[str, frozenset[str]] = {}

    def new_member_id(self) -> str:
        """Kafka's Uuid.toString: the UUID's 16 bytes in URL-safe base64, unpadded."""
        return base64.urlsafe_b64encode(self._ids.uuid4().bytes).decode().rstrip("=")

    def heartbeat(
        self, hb: ConsumerHeartbeat, topics: TopicsView, overrides: GroupOverrides = NO_OVERRIDES
    ) -> HeartbeatResult:
        """``overrides``: the group's own configs (IncrementalAlterConfigs on the GROUP
        resource), over the broker's ``group.consumer.*`` defaults."""
        try:
            self._validate(hb)
            if hb.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(hb)
            return self._heartbeat(hb, topics, overrides)
        except HeartbeatError as e:
            return HeartbeatResult(e.code, str(e), hb.member_id or None, hb.member_epoch)

    # Validation and fencing

    def check(self, hb: ConsumerHeartbeat) -> HeartbeatResult | None:
        """The heartbeat's own errors (malformed fields), found before anything changes."""
        try:
            self._validate(hb)
        except HeartbeatError as e:
            return HeartbeatResult(e.code, str(e), hb.member_id or None, hb.member_epoch)
        return None

    def _validate(self, hb: ConsumerHeartbeat) -> None:
        if not hb.group_id:
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if hb.member_epoch == 0:
            if hb.rebalance_timeout_ms == -1:
                raise HeartbeatError(ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be set.")
            if hb.subscribed_topic_names is None and hb.subscribed_topic_regex is None:
                raise HeartbeatError(
                    ErrorCode.INVALID_REQUEST,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                )
        elif not hb.member_id:
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if hb.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
        if hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and hb.instance_id is None:
            raise HeartbeatError(
                ErrorCode.INVALID_REQUEST, "InstanceId can't be null when MemberEpoch is -2."
            )
        if (
            hb.server_assignor is not None
            and hb.server_assignor not in self.config.consumer_assignors
        ):
            raise HeartbeatError(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {hb.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self.config.consumer_assignors)}.",
            )
        if hb.subscribed_topic_regex is not None:
            try:
                re.compile(hb.subscribed_topic_regex)
            except re.error as e:
                raise HeartbeatError(
                    ErrorCode.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex {hb.subscribed_topic_regex} is invalid: {e}",
                ) from None

    def _member(self, group: ConsumerGroup, hb: ConsumerHeartbeat) -> ConsumerGroupMember:
        """The member the heartbeat is from, created or taken over when joining (epoch 0)."""
        if hb.member_epoch == 0:
            if hb.instance_id is not None and hb.instance_id in group.static_members:
                previous = group.members[group.static_members[hb.instance_id]]
                if previous.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    raise HeartbeatError(
                        ErrorCode.UNRELEASED_INSTANCE_ID,
                        f"Static member {previous.member_id} with instance id {hb.instance_id} "
                        "is still active.",
                    )
                return self._replace_static_member(group, previous, hb)
            existing = group.members.get(hb.member_id)
            if existing is not None:
                return existing  # rejoin with the same id: starts over below
            if len(group.members) >= self.config.consumer_max_size:
                raise HeartbeatError(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The consumer group has reached its maximum capacity of "
                    f"{self.config.consumer_max_size} members.",
                )
            return ConsumerGroupMember(hb.member_id or self.new_member_id(), hb.instance_id)
        member = group.members.get(hb.member_id)
        if member is None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {hb.member_id} is not a member of group {group.group_id}.",
            )
        if hb.instance_id is not None and member.instance_id != hb.instance_id:
            raise HeartbeatError(
                ErrorCode.FENCED_INSTANCE_ID, f"Instance id {hb.instance_id} is fenced."
            )
        if hb.member_epoch > member.member_epoch:
            raise HeartbeatError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({hb.member_epoch}) "
                f"than the one known by the group coordinator ({member.member_epoch}).",
            )
        if hb.member_epoch < member.member_epoch and not (
            # It missed the response that moved it on, and owns nothing it should not.
            hb.member_epoch == member.assignment.previous_member_epoch
            and hb.owned is not None
            and _within(hb.owned, member.assignment.assigned)
        ):
            raise HeartbeatError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({hb.member_epoch}) "
                f"than the one known by the group coordinator ({member.member_epoch}).",
            )
        return member

    def _replace_static_member(
        self, group: ConsumerGroup, previous: ConsumerGroupMember, hb: ConsumerHeartbeat
    ) -> ConsumerGroupMember:
        """A restarted static member takes over its predecessor's target assignment."""
        new_id = hb.member_id or self.new_member_id()
        target = group.target_assignment.get(previous.member_id)
        self._remove_member(group, previous.member_id)
        member = replace(previous, member_id=new_id)
        member = replace(member, assignment=replace(member.assignment, member_epoch=0))
        group.put_member(member)
        self._ops.append(*records.member_record(group.group_id, member))
        if target is not None:
            group.target_assignment[new_id] = target
            self._ops.append(*records.target_member_record(group.group_id, new_id, target))
        return member

    # The heartbeat

    def _heartbeat(
        self, hb: ConsumerHeartbeat, topics: TopicsView, overrides: GroupOverrides
    ) -> HeartbeatResult:
        group = self.groups.get(hb.group_id)
        if group is None:
            if hb.member_epoch != 0:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {hb.member_id} is not a member of group {hb.group_id}.",
                )
            group = self.groups[hb.group_id] = ConsumerGroup(hb.group_id)
        member = self._member(group, hb)
        joining = hb.member_epoch == 0
        updated = replace(
            member,
            instance_id=hb.instance_id if hb.instance_id is not None else member.instance_id,
            rack_id=hb.rack_id if hb.rack_id is not None else member.rack_id,
            client_id=hb.client_id or member.client_id,
            client_host=hb.client_host or member.client_host,
            rebalance_timeout_ms=(
                hb.rebalance_timeout_ms
                if hb.rebalance_timeout_ms > 0
                else member.rebalance_timeout_ms
            ),
            subscribed_topic_names=(
                tuple(hb.subscribed_topic_names)
                if hb.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                (hb.subscribed_topic_regex or None)
                if hb.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            server_assignor=(
                (hb.server_assignor or None)
                if hb.server_assignor is not None
                else member.server_assignor
            ),
            classic=hb.classic,
        )
        if joining and hb.member_id in group.members and member.member_epoch != 0:
            # A known member rejoining from scratch gives up what it held.
            updated = replace(updated, assignment=MemberAssignment())
        bump = updated.member_id not in group.members or _subscription(updated) != _subscription(
            member
        )
        if updated != member or updated.member_id not in group.members:
            group.put_member(updated)
            self._ops.append(*records.member_record(group.group_id, updated))
        metadata = self._subscription_metadata(group, topics)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            self._ops.append(*records.subscription_metadata_record(group))
            bump = True
        if bump:
            group.group_epoch += 1
            self._ops.append(*records.group_epoch_record(group))
        if group.target_assignment_epoch < group.group_epoch:
            self._compute_target_assignment(group, topics)
        before = group.members[updated.member_id]
        after = self._reconcile(group, before, hb.owned)
        self._schedule_session(group, after, self._session_timeout_ms(hb, overrides))
        send = (
            joining
            or after.assignment != before.assignment
            or (hb.owned is not None and hb.owned != after.assignment.assigned)
        )
        return HeartbeatResult(
            member_id=after.member_id,
            member_epoch=after.member_epoch,
            heartbeat_interval_ms=_int(
                overrides, HEARTBEAT_INTERVAL, self.config.consumer_heartbeat_interval_ms
            ),
            assignment=dict(after.assignment.assigned) if send else None,
        )

    def _session_timeout_ms(self, hb: ConsumerHeartbeat, overrides: GroupOverrides) -> int:
        """A classic member keeps its JoinGroup's session timeout."""
        if hb.classic is not None:
            return hb.classic.session_timeout_ms
        return _int(overrides, SESSION_TIMEOUT, self.config.consumer_session_timeout_ms)

    def _reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        owned: Mapping[bytes, frozenset[int]] | None,
    ) -> ConsumerGroupMember:
        next_assignment = reconcile(
            member.assignment,
            group.target_assignment_epoch,
            group.target_assignment.get(member.member_id, {}),
            owned,
            lambda t, p: group.is_free(member.member_id, t, p),
        )
        if next_assignment == member.assignment:
            return member
        group.set_assignment(member, next_assignment)
        self._ops.append(
            *records.current_assignment_record(group.group_id, member.member_id, next_assignment)
        )
        key = ("consumer-rebalance", group.group_id, member.member_id)
        if next_assignment.state is MemberState.UNREVOKED_PARTITIONS:
            self.timers.set(key, self._ops.now_ms + member.rebalance_timeout_ms)
        else:
            self.timers.cancel(key)
        return group.members[member.member_id]

    def _topics_of(self, member: ConsumerGroupMember, topics: TopicsView) -> set[str]:
        """The member's explicit topics plus those its regex matches in full (RE2/J's
        ``matches``); internal topics are never matched. A regex is evaluated once per
        view of the topics, so again only when topics are created or deleted, not at
        every heartbeat of every member."""
        names = set(member.subscribed_topic_names)
        regex = member.subscribed_topic_regex
        if regex:
            if topics is not self._regex_view:
                self._regex_view, self._regex_matches = topics, {}
            matched = self._regex_matches.get(regex)
            if matched is None:
                pattern = re.compile(regex)
                matched = frozenset(
                    n for n in topics if not n.startswith("__") and pattern.fullmatch(n)
                )
                self._regex_matches[regex] = matched
            names.update(matched)
        return names

    def _subscription_metadata(
        self, group: ConsumerGroup, topics: TopicsView
    ) -> dict[str, TopicMetadata]:
        names = set()
        for m in group.members.values():
            names.update(self._topics_of(m, topics))
        return {n: topics[n] for n in sorted(names) if n in topics}

    def _compute_target_assignment(self, group: ConsumerGroup, topics: TopicsView) -> None:
        """Kafka's TargetAssignmentBuilder: run the group's assignor over all members and
        write the members whose target changed, then the new target epoch."""
        assignor = group.preferred_assignor(self.config.consumer_assignors[0])
        members = [
            AssignmentMember(
                m.member_id,
                m.instance_id,
                frozenset(topics[n].topic_id for n in self._topics_of(m, topics) if n in topics),
                group.target_assignment.get(m.member_id, {}),
                m.rack_id,
            )
            for m in group.members.values()
        ]
        partitions = {t.topic_id: t.num_partitions for t in group.subscription_metadata.values()}
        racks = {
            t.topic_id: topics[name].partition_racks
            for name, t in group.subscription_metadata.items()
            if name in topics and topics[name].partition_racks
        }
        target = ASSIGNORS[assignor](members, partitions, racks)
        for member_id, assignment in target.items():
            if group.target_assignment.get(member_id) != assignment:
                group.target_assignment[member_id] = assignment
                self._ops.append(
                    *records.target_member_record(group.group_id, member_id, assignment)
                )
        group.target_assignment_epoch = group.group_epoch
        self._ops.append(*records.target_epoch_record(group))

    # Leaving, timeouts

    def _leave(self, hb: ConsumerHeartbeat) -> HeartbeatResult:
        group = self.groups.get(hb.group_id)
        member = group.members.get(hb.member_id) if group is not None else None
        if group is None or member is None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {hb.member_id} is not a member of group {hb.group_id}.",
            )
        if hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            self.release_static(group, member)
        else:
            self._fence(group, member.member_id)
        return HeartbeatResult(member_id=hb.member_id, member_epoch=hb.member_epoch)

    def release_static(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """A static member leaving temporarily (or a classic static member restarted, whose
        old self cannot leave) keeps its target assignment until it rejoins or its
        session expires; its partitions are released now."""
        assignment = replace(
            member.assignment,
            member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
            assigned={},
            pending_revocation={},
        )
        group.set_assignment(member, assignment)
        self._ops.append(
            *records.current_assignment_record(group.group_id, member.member_id, assignment)
        )

    def _fence(self, group: ConsumerGroup, member_id: str) -> None:
        """Remove a member and bump the group epoch so the others take its partitions."""
        self._remove_member(group, member_id)
        group.group_epoch += 1
        self._ops.append(*records.group_epoch_record(group))

    def _remove_member(self, group: ConsumerGroup, member_id: str) -> None:
        group.remove_member(member_id)
        for record in records.tombstones(group.group_id, member_id):
            self._ops.append(*record)
        for kind in MEMBER_TIMERS:
            self.timers.cancel((kind, group.group_id, member_id))

    def _schedule_session(
        self, group: ConsumerGroup, member: ConsumerGroupMember, timeout_ms: int
    ) -> None:
        self.timers.set(
            ("consumer-session", group.group_id, member.member_id), self._ops.now_ms + timeout_ms
        )

    def touch_session(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """A classic member's SyncGroup or Heartbeat keeps its session alive."""
        if member.classic is not None:
            self._schedule_session(group, member, member.classic.session_timeout_ms)

    def fence(self, group: ConsumerGroup, member_id: str) -> None:
        """A classic member's LeaveGroup: it goes and the others take its partitions."""
        self._fence(group, member_id)

    def adopt(self, group: ConsumerGroup) -> None:
        """Install a group converted from a classic one: write its records (Kafka's
        createConsumerGroupRecords) and start each member's session."""
        self.groups[group.group_id] = group
        group_id = group.group_id
        for member in group.members.values():
            self._ops.append(*records.member_record(group_id, member))
        self._ops.append(*records.group_epoch_record(group))
        self._ops.append(*records.subscription_metadata_record(group))
        for member_id, target in group.target_assignment.items():
            self._ops.append(*records.target_member_record(group_id, member_id, target))
        self._ops.append(*records.target_epoch_record(group))
        for member in group.members.values():
            self._ops.append(
                *records.current_assignment_record(group_id, member.member_id, member.assignment)
            )
            self.touch_session(group, member)

    def fire(self, kind: str, group_id: str, member_id: str) -> None:
        """A session or rebalance timeout: the member is fenced."""
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        member = group.members[member_id]
        if kind == "consumer-rebalance" and member.state is not MemberState.UNREVOKED_PARTITIONS:
            return
        self._fence(group, member_id)

    def schedule_loaded(self) -> None:
        """After a load: every member gets a fresh session (as Kafka, on failover); its
        next heartbeat re-arms it with the group's own timeout."""
        for group in self.groups.values():
            for member in group.members.values():
                self._schedule_session(group, member, self.config.consumer_session_timeout_ms)
                self.touch_session(group, member)

    def delete_empty(self, keep: Callable[[str], bool]) -> None:
        """Retention: an empty consumer group goes once ``keep`` (it still has offsets)
        no longer holds, as Kafka deletes an empty group whose offsets expired."""
        for group_id, group in list(self.groups.items()):
            if not group.members and not keep(group_id):
                self.delete(group_id)

    def delete(self, group_id: str) -> None:
        """Tombstone an empty group's records (DeleteGroups, or offsets all gone)."""
        if self.groups.pop(group_id, None) is not None:
            for record in records.group_tombstones(group_id):
                self._ops.append(*record)


def _subscription(m: ConsumerGroupMember) -> tuple[object, ...]:
    return (m.subscribed_topic_names, m.subscribed_topic_regex, m.server_assignor)


def _int(overrides: GroupOverrides, name: str, default: int) -> int:
    value = overrides.get(name)
    return int(value) if value is not None else default


def _within(owned: Mapping[bytes, frozenset[int]], assigned: Assignment) -> bool:
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())
