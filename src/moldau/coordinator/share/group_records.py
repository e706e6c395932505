"""Share-group membership in ``__consumer_offsets`` (Kafka's ShareGroupMetadata and
ShareGroupMemberMetadata records), so a share group survives its coordinator's restart
or move: the group epoch and each member with its subscriptions.

Writes are differences: :func:`changes` compares a group before and after an operation.
Membership is soft state, so a record that fails to be written costs at most a rejoin:
a member not written is unknown after a restart (it rejoins), a member whose tombstone
was lost comes back and expires after its session timeout, and a group epoch behind the
members' fences them into rejoining.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from moldau.coordinator.effects import CoordinatorRecord
from moldau.coordinator.share.group import ShareGroup, ShareMember
from moldau.protocol import coordinator_record_serde as serde
from moldau.protocol.coordinator_records import GROUP_RECORD_TYPES
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

MEMBER_METADATA_TYPE, GROUP_METADATA_TYPE = 10, 11  # the keys' record types (versions)
SHARE_GROUP_RECORD_TYPES = frozenset({MEMBER_METADATA_TYPE, GROUP_METADATA_TYPE})

MemberView = tuple[str | None, str, str, tuple[str, ...]]  # rack, client id, host, topics
GroupView = tuple[int, dict[str, MemberView]]


def view(group: ShareGroup | None) -> GroupView | None:
    """What of a group is durable, to compare before and after an operation."""
    if group is None:
        return None
    return group.group_epoch, {
        m.member_id: (m.rack_id, m.client_id, m.client_host, m.subscribed)
        for m in group.members.values()
    }


def changes(
    group_id: str, before: GroupView | None, after: GroupView | None
) -> list[CoordinatorRecord]:
    """The records that take the durable group from ``before`` to ``after``."""
    old_epoch, old_members = before if before is not None else (-1, {})
    new_epoch, new_members = after if after is not None else (-1, {})
    records = [
        _member_record(group_id, member_id, m)
        for member_id, m in new_members.items()
        if old_members.get(member_id) != m
    ]
    records += [
        CoordinatorRecord(_member_key(group_id, member_id), None)
        for member_id in old_members.keys() - new_members.keys()
    ]
    if after is not None and new_epoch != old_epoch:
        value = ShareGroupMetadataValue(epoch=new_epoch)
        records.append(CoordinatorRecord(_group_key(group_id), serde.serialize_value(value, 0)))
    return records


def _group_key(group_id: str) -> bytes:
    return serde.serialize_key(ShareGroupMetadataKey(group_id=group_id), GROUP_METADATA_TYPE)


def _member_key(group_id: str, member_id: str) -> bytes:
    key = ShareGroupMemberMetadataKey(group_id=group_id, member_id=member_id)
    return serde.serialize_key(key, MEMBER_METADATA_TYPE)


def _member_record(group_id: str, member_id: str, m: MemberView) -> CoordinatorRecord:
    rack, client_id, host, topics = m
    value = ShareGroupMemberMetadataValue(
        rack_id=rack, client_id=client_id, client_host=host, subscribed_topic_names=list(topics)
    )
    return CoordinatorRecord(_member_key(group_id, member_id), serde.serialize_value(value, 0))


def restore(
    records: Iterable[tuple[bytes, bytes | None]], now_ms: int, session_ms: Callable[[str], int]
) -> dict[str, ShareGroup]:
    """Groups from their records, oldest first. A member comes back at the group's epoch
    (so its next heartbeat is accepted) with a fresh session; its assignment is computed
    again on the first heartbeat (the topics are looked up again, which bumps the epoch
    and hands every member the new assignment)."""
    epochs: dict[str, int] = {}
    members: dict[str, dict[str, ShareMember]] = {}
    for key, value in records:
        record = serde.deserialize(GROUP_RECORD_TYPES, key, value)
        k, v = record.key, record.value
        if record.record_type == GROUP_METADATA_TYPE:
            if v is None:
                epochs.pop(k.group_id, None)
                members.pop(k.group_id, None)
            else:
                epochs[k.group_id] = v.epoch
        elif record.record_type == MEMBER_METADATA_TYPE:
            known = members.setdefault(k.group_id, {})
            if v is None:
                known.pop(k.member_id, None)
            else:
                known[k.member_id] = ShareMember(
                    k.member_id,
                    0,
                    v.client_id,
                    v.client_host,
                    v.rack_id,
                    tuple(v.subscribed_topic_names),
                    0,
                )
    groups: dict[str, ShareGroup] = {}
    for group_id, epoch in epochs.items():
        timeout = session_ms(group_id)
        group = groups[group_id] = ShareGroup(group_id, epoch, assignment_epoch=epoch)
        for m in members.get(group_id, {}).values():
            m.member_epoch = epoch
            m.deadline_ms = now_ms + timeout
            group.members[m.member_id] = m
    return groups
