"""Share groups in ``__consumer_offsets``: Kafka's share-group coordinator records
(record types 9-15), so a share group survives its coordinator's restart or move with its
members' epochs and assignments.

ShareGroupMetadata (group epoch), ShareGroupPartitionMetadata (the subscribed topics' ids
and partition counts), ShareGroupMemberMetadata (a member's subscription),
ShareGroupTargetAssignmentMetadata/Member (the target and its epoch),
ShareGroupCurrentMemberAssignment (a member's epochs and partitions) and
ShareGroupStatePartitionMetadata (the share-partitions whose state is initialized,
initializing or deleting). A tombstone removes what its key names.

Writes are differences: :func:`changes` compares a group's :func:`view` before and after
an operation. Membership is soft state, so a record that fails to be written costs at
most a rejoin: a member not written is unknown after a restart (it rejoins), a member
whose tombstone was lost comes back and expires after its session timeout, an epoch not
written fences the member once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from moldau.coordinator.effects import CoordinatorRecord
from moldau.coordinator.share.group import Assignment, ShareGroup, ShareMember, TopicPartitions
from moldau.protocol import coordinator_record_serde as serde
from moldau.protocol.coordinator_records import GROUP_RECORD_TYPES
from moldau.protocol.coordinator_records import share_group_current_member_assignment_value as cma
from moldau.protocol.coordinator_records import share_group_partition_metadata_value as spm
from moldau.protocol.coordinator_records import share_group_state_partition_metadata_value as ssp
from moldau.protocol.coordinator_records import share_group_target_assignment_member_value as tam
from moldau.protocol.coordinator_records.share_group_current_member_assignment_key import (
    ShareGroupCurrentMemberAssignmentKey,
)
from moldau.protocol.coordinator_records.share_group_member_metadata_key import (
    ShareGroupMemberMetadataKey,
)
from moldau.protocol.coordinator_records.share_group_member_metadata_value import (
    ShareGroupMemberMetadataValue,
)
from moldau.protocol.coordinator_records.share_group_metadata_key import ShareGroupMetadataKey
from moldau.protocol.coordinator_records.share_group_metadata_value import (
    ShareGroupMetadataValue,
)
from moldau.protocol.coordinator_records.share_group_partition_metadata_key import (
    ShareGroupPartitionMetadataKey,
)
from moldau.protocol.coordinator_records.share_group_state_partition_metadata_key import (
    ShareGroupStatePartitionMetadataKey,
)
from moldau.protocol.coordinator_records.share_group_target_assignment_member_key import (
    ShareGroupTargetAssignmentMemberKey,
)
from moldau.protocol.coordinator_records.share_group_target_assignment_metadata_key import (
    ShareGroupTargetAssignmentMetadataKey,
)
from moldau.protocol.coordinator_records.share_group_target_assignment_metadata_value import (
    ShareGroupTargetAssignmentMetadataValue,
)

PARTITION_METADATA, MEMBER_METADATA, GROUP_METADATA = 9, 10, 11
TARGET_ASSIGNMENT_METADATA, TARGET_ASSIGNMENT_MEMBER = 12, 13
CURRENT_MEMBER_ASSIGNMENT, STATE_PARTITION_METADATA = 14, 15
SHARE_GROUP_RECORD_TYPES = range(PARTITION_METADATA, STATE_PARTITION_METADATA + 1)
STABLE = 1  # Kafka's MemberState.STABLE: a share member has nothing to reconcile

Parts = tuple[tuple[bytes, tuple[int, ...]], ...]  # (topic id, partitions), sorted
Named = tuple[tuple[bytes, str, tuple[int, ...]], ...]  # (topic id, name, partitions)


@dataclass(frozen=True, slots=True)
class MemberView:
    metadata: tuple[str | None, str, str, tuple[str, ...]]  # rack, client id, host, topics
    target: Parts | None
    current: tuple[int, int, Parts]  # member epoch, previous epoch, assigned partitions


@dataclass(frozen=True, slots=True)
class GroupView:
    """What of a group is durable, to compare before and after an operation."""

    epoch: int
    topics: tuple[tuple[str, bytes, int], ...]  # name, id, partitions
    assignment_epoch: int
    state_partitions: tuple[Named, Named, tuple[tuple[bytes, str], ...]]
    members: dict[str, MemberView] = field(default_factory=dict)


def _parts(group: ShareGroup, assignment: Assignment) -> Parts:
    """By topic id; a topic no longer subscribed is left out (the member's next
    heartbeat hands it an assignment without it)."""
    ids = {name: tid for name, (tid, _) in group.topics.items()}
    return tuple(
        sorted((ids[t], tuple(sorted(ps))) for t, ps in assignment.items() if ps and t in ids)
    )


def _named(tps: TopicPartitions) -> Named:
    return tuple(sorted((tid, name, tuple(sorted(ps))) for tid, (name, ps) in tps.items()))


def view(group: ShareGroup | None) -> GroupView | None:
    if group is None:
        return None
    members = {}
    for m in group.members.values():
        target = group.target.get(m.member_id)
        members[m.member_id] = MemberView(
            (m.rack_id, m.client_id, m.client_host, m.subscribed),
            None if target is None else _parts(group, target),
            (m.member_epoch, m.previous_member_epoch, _parts(group, m.assignment)),
        )
    return GroupView(
        group.group_epoch,
        tuple(sorted((name, tid, n) for name, (tid, n) in group.topics.items())),
        group.assignment_epoch,
        (
            _named(group.initializing),
            _named(group.initialized),
            tuple(sorted(group.deleting.items())),
        ),
        members,
    )


def _record(record_type: int, key: Any, value: Any | None) -> CoordinatorRecord:
    return CoordinatorRecord(
        serde.serialize_key(key, record_type),
        None if value is None else serde.serialize_value(value, 0),
    )


def changes(
    group_id: str, before: GroupView | None, after: GroupView | None
) -> list[CoordinatorRecord]:
    """The records that take the durable group from ``before`` to ``after``, in Kafka's
    order: a member's metadata before the group epoch it bumps, the target before the
    assignments taken from it; tombstones of a member from its assignment back."""
    old_members = before.members if before is not None else {}
    new_members = after.members if after is not None else {}
    records: list[CoordinatorRecord] = []
    for member_id, m in new_members.items():
        old = old_members.get(member_id)
        if old is None or old.metadata != m.metadata:
            records.append(_member_record(group_id, member_id, m))
    for member_id in old_members.keys() - new_members.keys():
        records += [
            _record(CURRENT_MEMBER_ASSIGNMENT, _current_key(group_id, member_id), None),
            _record(TARGET_ASSIGNMENT_MEMBER, _target_key(group_id, member_id), None),
            _record(MEMBER_METADATA, _member_key(group_id, member_id), None),
        ]
    if after is None:
        if before is not None:
            records += [
                _record(
                    STATE_PARTITION_METADATA, ShareGroupStatePartitionMetadataKey(group_id), None
                ),
                _record(
                    TARGET_ASSIGNMENT_METADATA,
                    ShareGroupTargetAssignmentMetadataKey(group_id),
                    None,
                ),
                _record(PARTITION_METADATA, ShareGroupPartitionMetadataKey(group_id), None),
                _record(GROUP_METADATA, ShareGroupMetadataKey(group_id), None),
            ]
        return records
    if before is None or before.topics != after.topics:
        records.append(_partition_metadata_record(group_id, after))
    if before is None or before.epoch != after.epoch:
        group_epoch = ShareGroupMetadataValue(epoch=after.epoch)
        records.append(_record(GROUP_METADATA, ShareGroupMetadataKey(group_id), group_epoch))
    for member_id, m in new_members.items():
        old = old_members.get(member_id)
        if m.target is not None and (old is None or old.target != m.target):
            target = tam.ShareGroupTargetAssignmentMemberValue(
                [tam.TopicPartition(t, list(ps)) for t, ps in m.target]
            )
            records.append(
                _record(TARGET_ASSIGNMENT_MEMBER, _target_key(group_id, member_id), target)
            )
    if before is None or before.assignment_epoch != after.assignment_epoch:
        target_epoch = ShareGroupTargetAssignmentMetadataValue(after.assignment_epoch)
        key = ShareGroupTargetAssignmentMetadataKey(group_id)
        records.append(_record(TARGET_ASSIGNMENT_METADATA, key, target_epoch))
    for member_id, m in new_members.items():
        old = old_members.get(member_id)
        if old is None or old.current != m.current:
            epoch, previous, parts = m.current
            current = cma.ShareGroupCurrentMemberAssignmentValue(
                epoch, previous, STABLE, [cma.TopicPartitions(t, list(ps)) for t, ps in parts]
            )
            records.append(
                _record(CURRENT_MEMBER_ASSIGNMENT, _current_key(group_id, member_id), current)
            )
    before_state = before.state_partitions if before is not None else ((), (), ())
    if before_state != after.state_partitions:
        records.append(_state_partitions_record(group_id, after))
    return records


def _member_key(group_id: str, member_id: str) -> ShareGroupMemberMetadataKey:
    return ShareGroupMemberMetadataKey(group_id=group_id, member_id=member_id)


def _target_key(group_id: str, member_id: str) -> ShareGroupTargetAssignmentMemberKey:
    return ShareGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id)


def _current_key(group_id: str, member_id: str) -> ShareGroupCurrentMemberAssignmentKey:
    return ShareGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id)


def _member_record(group_id: str, member_id: str, m: MemberView) -> CoordinatorRecord:
    rack, client_id, host, topics = m.metadata
    value = ShareGroupMemberMetadataValue(
        rack_id=rack, client_id=client_id, client_host=host, subscribed_topic_names=list(topics)
    )
    return _record(MEMBER_METADATA, _member_key(group_id, member_id), value)


def _partition_metadata_record(group_id: str, g: GroupView) -> CoordinatorRecord:
    value = spm.ShareGroupPartitionMetadataValue(
        [spm.TopicMetadata(tid, name, n) for name, tid, n in g.topics]
    )
    return _record(PARTITION_METADATA, ShareGroupPartitionMetadataKey(group_id), value)


def _state_partitions_record(group_id: str, g: GroupView) -> CoordinatorRecord:
    initializing, initialized, deleting = g.state_partitions
    value = ssp.ShareGroupStatePartitionMetadataValue(
        [ssp.TopicPartitionsInfo(t, name, list(ps)) for t, name, ps in initializing],
        [ssp.TopicPartitionsInfo(t, name, list(ps)) for t, name, ps in initialized],
        [ssp.TopicInfo(t, name) for t, name in deleting],
    )
    return _record(STATE_PARTITION_METADATA, ShareGroupStatePartitionMetadataKey(group_id), value)


@dataclass(slots=True)
class _Loading:
    """One group's records while they are replayed."""

    epoch: int | None = None
    topics: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    assignment_epoch: int | None = None
    members: dict[str, ShareMember] = field(default_factory=dict)
    targets: dict[str, list[Any]] = field(default_factory=dict)  # member -> topic partitions
    current: dict[str, Any] = field(default_factory=dict)  # member -> its assignment value
    state_partitions: Any = None


def _topic_partitions(entries: Iterable[Any]) -> TopicPartitions:
    return {e.topic_id: (e.topic_name, frozenset(e.partitions)) for e in entries}


def restore(
    records: Iterable[tuple[bytes, bytes | None]], now_ms: int, session_ms: Callable[[str], int]
) -> dict[str, ShareGroup]:
    """Groups from their records, oldest first. A member comes back with its epochs and
    assignment and a fresh session, so its next heartbeat goes on where it left off. A
    member with no assignment record (written before Moldau wrote them) comes back at the
    group's epoch; with no topics recorded, its first heartbeat looks them up again,
    which bumps the epoch and hands every member a new assignment."""
    loading: dict[str, _Loading] = {}
    for key, value in records:
        record = serde.deserialize(GROUP_RECORD_TYPES, key, value)
        k, kind = record.key, record.record_type
        v: Any = record.value
        if kind == GROUP_METADATA and v is None:
            loading.pop(k.group_id, None)
            continue
        g = loading.setdefault(k.group_id, _Loading())
        if kind == GROUP_METADATA:
            g.epoch = v.epoch
        elif kind == PARTITION_METADATA:
            g.topics = (
                {}
                if v is None
                else {t.topic_name: (t.topic_id, t.num_partitions) for t in v.topics}
            )
        elif kind == TARGET_ASSIGNMENT_METADATA:
            g.assignment_epoch = None if v is None else v.assignment_epoch
        elif kind == STATE_PARTITION_METADATA:
            g.state_partitions = v
        elif kind == MEMBER_METADATA:
            if v is None:
                g.members.pop(k.member_id, None)
            else:
                g.members[k.member_id] = ShareMember(
                    k.member_id,
                    0,
                    v.client_id,
                    v.client_host,
                    v.rack_id,
                    tuple(v.subscribed_topic_names),
                    0,
                )
        elif kind == TARGET_ASSIGNMENT_MEMBER:
            _put(g.targets, k.member_id, None if v is None else v.topic_partitions)
        elif kind == CURRENT_MEMBER_ASSIGNMENT:
            _put(g.current, k.member_id, v)
    return {
        group_id: _group(group_id, g, now_ms + session_ms(group_id))
        for group_id, g in loading.items()
        if g.epoch is not None
    }


def _put(d: dict[str, Any], member_id: str, value: Any | None) -> None:
    if value is None:
        d.pop(member_id, None)
    else:
        d[member_id] = value


def _group(group_id: str, g: _Loading, deadline_ms: int) -> ShareGroup:
    assert g.epoch is not None
    names = {tid: name for name, (tid, _) in g.topics.items()}

    def assignment(entries: Iterable[Any]) -> Assignment:
        return {
            names[e.topic_id]: tuple(sorted(e.partitions))
            for e in entries
            if e.topic_id in names and e.partitions
        }

    group = ShareGroup(
        group_id,
        g.epoch,
        assignment_epoch=g.epoch if g.assignment_epoch is None else g.assignment_epoch,
        topics=dict(g.topics),
        target={m: assignment(tps) for m, tps in g.targets.items() if m in g.members},
    )
    if g.state_partitions is not None:
        sp = g.state_partitions
        group.initializing = _topic_partitions(sp.initializing_topics)
        group.initialized = _topic_partitions(sp.initialized_topics)
        group.deleting = {t.topic_id: t.topic_name for t in sp.deleting_topics}
    for member_id, m in g.members.items():
        current = g.current.get(member_id)
        if current is None:
            m.member_epoch = g.epoch
        else:
            m.member_epoch = current.member_epoch
            m.previous_member_epoch = current.previous_member_epoch
            m.assignment = assignment(current.assigned_partitions)
        m.deadline_ms = deadline_ms
        group.members[member_id] = m
    return group
