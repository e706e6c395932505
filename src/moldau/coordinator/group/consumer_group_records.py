"""KIP-848 consumer groups in ``__consumer_offsets``: Kafka's coordinator records
(record types 3-8) written as a group changes and replayed while a shard loads.

ConsumerGroupMetadata (group epoch), ConsumerGroupPartitionMetadata (subscribed topics),
ConsumerGroupMemberMetadata (a member's subscription), ConsumerGroupTargetAssignment
Metadata/Member (the target and its epoch), ConsumerGroupCurrentMemberAssignment (a
member's epochs and partitions). A tombstone removes what its key names.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from moldau.protocol import coordinator_record_serde as serde
from moldau.protocol.coordinator_records import (
    consumer_group_current_member_assignment_value as cma,
)
from moldau.protocol.coordinator_records import consumer_group_member_metadata_value as cmm
from moldau.protocol.coordinator_records import consumer_group_partition_metadata_value as cpm
from moldau.protocol.coordinator_records import consumer_group_target_assignment_member_value as tam
from moldau.protocol.coordinator_records.consumer_group_current_member_assignment_key import (
    ConsumerGroupCurrentMemberAssignmentKey,
)
from moldau.protocol.coordinator_records.consumer_group_member_metadata_key import (
    ConsumerGroupMemberMetadataKey,
)
from moldau.protocol.coordinator_records.consumer_group_metadata_key import (
    ConsumerGroupMetadataKey,
)
from moldau.protocol.coordinator_records.consumer_group_metadata_value import (
    ConsumerGroupMetadataValue,
)
from moldau.protocol.coordinator_records.consumer_group_partition_metadata_key import (
    ConsumerGroupPartitionMetadataKey,
)
from moldau.protocol.coordinator_records.consumer_group_target_assignment_member_key import (
    ConsumerGroupTargetAssignmentMemberKey,
)
from moldau.protocol.coordinator_records.consumer_group_target_assignment_metadata_key import (
    ConsumerGroupTargetAssignmentMetadataKey,
)
from moldau.protocol.coordinator_records.consumer_group_target_assignment_metadata_value import (
    ConsumerGroupTargetAssignmentMetadataValue,
)

from .assignors import Assignment
from .consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    TopicMetadata,
)
from .reconciliation import MemberAssignment, MemberState

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_RECORD_TYPES = range(GROUP_METADATA, CURRENT_MEMBER_ASSIGNMENT + 1)

Record = tuple[bytes, bytes | None]

_STATES = {
    MemberState.STABLE: 1,
    MemberState.UNREVOKED_PARTITIONS: 2,
    MemberState.UNRELEASED_PARTITIONS: 3,
    MemberState.UNKNOWN: 127,
}
_STATE_OF = {v: k for k, v in _STATES.items()}


def _record(record_type: int, key: Any, value: Any | None) -> Record:
    return (
        serde.serialize_key(key, record_type),
        None if value is None else serde.serialize_value(value, 0),
    )


def group_epoch_record(group: ConsumerGroup) -> Record:
    return _record(
        GROUP_METADATA,
        ConsumerGroupMetadataKey(group.group_id),
        ConsumerGroupMetadataValue(epoch=group.group_epoch),
    )


def subscription_metadata_record(group: ConsumerGroup) -> Record:
    topics = [
        cpm.TopicMetadata(topic_id=t.topic_id, topic_name=t.name, num_partitions=t.num_partitions)
        for t in sorted(group.subscription_metadata.values(), key=lambda t: t.name)
    ]
    return _record(
        PARTITION_METADATA,
        ConsumerGroupPartitionMetadataKey(group.group_id),
        cpm.ConsumerGroupPartitionMetadataValue(topics=topics),
    )


def member_record(group_id: str, member: ConsumerGroupMember) -> Record:
    return _record(
        MEMBER_METADATA,
        ConsumerGroupMemberMetadataKey(group_id, member.member_id),
        cmm.ConsumerGroupMemberMetadataValue(
            instance_id=member.instance_id,
            rack_id=member.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=list(member.subscribed_topic_names),
            subscribed_topic_regex=member.subscribed_topic_regex,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            server_assignor=member.server_assignor,
            classic_member_metadata=_classic_value(member.classic),
        ),
    )


def _classic_value(classic: ClassicMemberMetadata | None) -> cmm.ClassicMemberMetadata | None:
    if classic is None:
        return None
    return cmm.ClassicMemberMetadata(
        session_timeout_ms=classic.session_timeout_ms,
        supported_protocols=[
            cmm.ClassicProtocol(name=name, metadata=data) for name, data in classic.protocols
        ],
    )


def _classic(value: cmm.ClassicMemberMetadata | None) -> ClassicMemberMetadata | None:
    if value is None:
        return None
    return ClassicMemberMetadata(
        value.session_timeout_ms,
        tuple((p.name, bytes(p.metadata)) for p in value.supported_protocols),
    )


def target_epoch_record(group: ConsumerGroup) -> Record:
    return _record(
        TARGET_ASSIGNMENT_METADATA,
        ConsumerGroupTargetAssignmentMetadataKey(group.group_id),
        ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=group.target_assignment_epoch),
    )


def target_member_record(group_id: str, member_id: str, target: Assignment | None) -> Record:
    value = None
    if target is not None:
        value = tam.ConsumerGroupTargetAssignmentMemberValue(
            topic_partitions=[
                tam.TopicPartition(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(target.items())
            ]
        )
    return _record(
        TARGET_ASSIGNMENT_MEMBER, ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), value
    )


def current_assignment_record(group_id: str, member_id: str, a: MemberAssignment | None) -> Record:
    value = None
    if a is not None:
        value = cma.ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=a.member_epoch,
            previous_member_epoch=a.previous_member_epoch,
            state=_STATES[a.state],
            assigned_partitions=_topic_partitions(a.assigned),
            partitions_pending_revocation=_topic_partitions(a.pending_revocation),
        )
    return _record(
        CURRENT_MEMBER_ASSIGNMENT,
        ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id),
        value,
    )


def tombstones(group_id: str, member_id: str) -> list[Record]:
    """A member gone: its current assignment, target and metadata (Kafka's order)."""
    return [
        current_assignment_record(group_id, member_id, None),
        target_member_record(group_id, member_id, None),
        _record(MEMBER_METADATA, ConsumerGroupMemberMetadataKey(group_id, member_id), None),
    ]


def group_tombstones(group_id: str) -> list[Record]:
    return [
        _record(
            TARGET_ASSIGNMENT_METADATA, ConsumerGroupTargetAssignmentMetadataKey(group_id), None
        ),
        _record(PARTITION_METADATA, ConsumerGroupPartitionMetadataKey(group_id), None),
        _record(GROUP_METADATA, ConsumerGroupMetadataKey(group_id), None),
    ]


def _topic_partitions(a: Assignment) -> list[cma.TopicPartitions]:
    return [cma.TopicPartitions(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(a.items())]


def _assignment(entries: Any) -> Assignment:
    return {e.topic_id: frozenset(e.partitions) for e in entries if e.partitions}


def replay(groups: dict[str, ConsumerGroup], record_type: int, key: Any, value: Any | None) -> None:
    """Apply one consumer-group record to the groups being loaded."""
    group_id = key.group_id
    group = groups.get(group_id)
    if group is None:
        if value is None:
            return
        group = groups[group_id] = ConsumerGroup(group_id)
    if record_type == GROUP_METADATA:
        if value is None:
            del groups[group_id]
        else:
            group.group_epoch = value.epoch
    elif record_type == PARTITION_METADATA:
        group.subscription_metadata = (
            {}
            if value is None
            else {
                t.topic_name: TopicMetadata(t.topic_id, t.topic_name, t.num_partitions)
                for t in value.topics
            }
        )
    elif record_type == TARGET_ASSIGNMENT_METADATA:
        group.target_assignment_epoch = 0 if value is None else value.assignment_epoch
    elif record_type == TARGET_ASSIGNMENT_MEMBER:
        if value is None:
            group.target_assignment.pop(key.member_id, None)
        else:
            group.target_assignment[key.member_id] = _assignment(value.topic_partitions)
    else:
        _replay_member(group, record_type, key.member_id, value)


def _replay_member(group: ConsumerGroup, record_type: int, member_id: str, value: Any) -> None:
    member = group.members.get(member_id)
    if record_type == MEMBER_METADATA:
        if value is None:
            group.remove_member(member_id)
            return
        fields = {
            "instance_id": value.instance_id,
            "rack_id": value.rack_id,
            "client_id": value.client_id,
            "client_host": value.client_host,
            "subscribed_topic_names": tuple(value.subscribed_topic_names),
            "subscribed_topic_regex": value.subscribed_topic_regex,
            "rebalance_timeout_ms": value.rebalance_timeout_ms,
            "server_assignor": value.server_assignor,
            "classic": _classic(value.classic_member_metadata),
        }
        group.put_member(
            ConsumerGroupMember(member_id, **fields)
            if member is None
            else replace(member, **fields)
        )
    elif record_type == CURRENT_MEMBER_ASSIGNMENT:
        if member is None:
            member = ConsumerGroupMember(member_id)
        assignment = (
            MemberAssignment()
            if value is None
            else MemberAssignment(
                value.member_epoch,
                value.previous_member_epoch,
                _STATE_OF.get(value.state, MemberState.UNKNOWN),
                _assignment(value.assigned_partitions),
                _assignment(value.partitions_pending_revocation),
            )
        )
        group.set_assignment(member, assignment)
