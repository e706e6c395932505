"""`__consumer_offsets` record keys and values, byte-compatible with what Kafka writes.

Keys: record type 0/1 = OffsetCommitKey {group, topic, partition}, 2 = GroupMetadataKey
{group}. Values: OffsetCommitValue v0-v4 and GroupMetadataValue v0-v4 are read (later
versions as v4, KIP-915); v3 is written (OffsetCommitValue v1 when a v2-v4 commit carried a
retention time, as Kafka does). A tombstone is a key with a null value. The codecs are
generated from Kafka's schemas; this module maps them to the coordinator's own values.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.protocol import coordinator_record_serde as serde
from moldau.protocol.coordinator_records import GROUP_RECORD_TYPES
from moldau.protocol.coordinator_records import group_metadata_key as gmk
from moldau.protocol.coordinator_records import group_metadata_value as gmv
from moldau.protocol.coordinator_records import offset_commit_key as ock
from moldau.protocol.coordinator_records import offset_commit_value as ocv

OFFSET_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed offset; `expire_timestamp` only for v2-v4 commits with a retention time."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int | None = None


@dataclass(frozen=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadataValue, ...]


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    return serde.serialize_key(ock.OffsetCommitKey(group, topic, partition), OFFSET_KEY_VERSION)


def encode_group_key(group: str) -> bytes:
    return serde.serialize_key(gmk.GroupMetadataKey(group), GROUP_METADATA_KEY_VERSION)


def decode_key(data: bytes) -> OffsetKey | GroupMetadataKey | None:
    """None for record types this coordinator does not own (e.g. KIP-848 records)."""
    try:
        _, key = serde.deserialize_key(GROUP_RECORD_TYPES, data)
    except serde.UnknownRecordTypeError:
        return None
    if isinstance(key, ock.OffsetCommitKey):
        return OffsetKey(key.group, key.topic, key.partition)
    if isinstance(key, gmk.GroupMetadataKey):
        return GroupMetadataKey(key.group)
    return None


def encode_offset_value(value: OffsetAndMetadata) -> bytes:
    record = ocv.OffsetCommitValue(
        offset=value.offset,
        leader_epoch=value.leader_epoch,
        metadata=value.metadata,
        commit_timestamp=value.commit_timestamp,
    )
    version = OFFSET_VALUE_VERSION
    if value.expire_timestamp is not None:
        record.expire_timestamp = value.expire_timestamp
        version = OFFSET_VALUE_VERSION_WITH_EXPIRE
    return serde.serialize_value(record, version)


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    version, value = serde.deserialize_value(GROUP_RECORD_TYPES, OFFSET_KEY_VERSION, data)
    return OffsetAndMetadata(
        value.offset,
        value.leader_epoch,
        value.metadata,
        value.commit_timestamp,
        value.expire_timestamp if version == OFFSET_VALUE_VERSION_WITH_EXPIRE else None,
    )


def encode_group_value(value: GroupMetadataValue) -> bytes:
    record = gmv.GroupMetadataValue(
        protocol_type=value.protocol_type,
        generation=value.generation,
        protocol=value.protocol,
        leader=value.leader,
        current_state_timestamp=value.current_state_timestamp,
        members=[
            gmv.MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout,
                session_timeout=m.session_timeout,
                subscription=m.subscription,
                assignment=m.assignment,
            )
            for m in value.members
        ],
    )
    return serde.serialize_value(record, GROUP_METADATA_VALUE_VERSION)


def decode_group_value(data: bytes) -> GroupMetadataValue:
    version, value = serde.deserialize_value(GROUP_RECORD_TYPES, GROUP_METADATA_KEY_VERSION, data)
    return GroupMetadataValue(
        value.protocol_type,
        value.generation,
        value.protocol,
        value.leader,
        value.current_state_timestamp,
        tuple(
            MemberMetadataValue(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout if version >= 1 else m.session_timeout,  # v0 had one
                m.session_timeout,
                m.subscription,
                m.assignment,
            )
            for m in value.members
        ),
    )
