"""`__consumer_offsets` record keys and values, byte-compatible with what Kafka writes.

Keys: version 0/1 = OffsetCommitKey {group, topic, partition}, version 2 =
GroupMetadataKey {group}. Values: OffsetCommitValue v0-v4 and GroupMetadataValue v0-v4 are
read; v3 is written (OffsetCommitValue v1 when a v2-v4 commit carried a retention time,
as Kafka does). A tombstone is a key with a null value. These are stored records, not RPC
messages, so they are hand-coded here rather than generated.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .byte_reader import ByteReader

OFFSET_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3
_FLEXIBLE_VALUE_VERSION = 4

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


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


def _string(value: str | None) -> bytes:
    if value is None:
        return _INT16.pack(-1)
    data = value.encode()
    return _INT16.pack(len(data)) + data


def _bytes(value: bytes) -> bytes:
    return _INT32.pack(len(value)) + value


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    return (
        _INT16.pack(OFFSET_KEY_VERSION) + _string(group) + _string(topic) + _INT32.pack(partition)
    )


def encode_group_key(group: str) -> bytes:
    return _INT16.pack(GROUP_METADATA_KEY_VERSION) + _string(group)


def decode_key(data: bytes) -> OffsetKey | GroupMetadataKey | None:
    """None for key versions this coordinator does not own (e.g. KIP-848 records)."""
    reader = ByteReader(data)
    version = reader.int16()
    if version in (0, 1):
        return OffsetKey(reader.string(), reader.string(), reader.int32())
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(reader.string())
    return None


def encode_offset_value(value: OffsetAndMetadata) -> bytes:
    if value.expire_timestamp is not None:
        return b"".join(
            (
                _INT16.pack(OFFSET_VALUE_VERSION_WITH_EXPIRE),
                _INT64.pack(value.offset),
                _string(value.metadata),
                _INT64.pack(value.commit_timestamp),
                _INT64.pack(value.expire_timestamp),
            )
        )
    return b"".join(
        (
            _INT16.pack(OFFSET_VALUE_VERSION),
            _INT64.pack(value.offset),
            _INT32.pack(value.leader_epoch),
            _string(value.metadata),
            _INT64.pack(value.commit_timestamp),
        )
    )


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    reader = ByteReader(data)
    version = reader.int16()
    if not 0 <= version <= _FLEXIBLE_VALUE_VERSION:
        raise ValueError(f"unknown offset commit value version {version}")
    reader.flexible = version >= _FLEXIBLE_VALUE_VERSION
    offset = reader.int64()
    leader_epoch = reader.int32() if version >= 3 else -1
    metadata = reader.string()
    commit_timestamp = reader.int64()
    expire_timestamp = reader.int64() if version == 1 else None
    reader.skip_tagged_fields()
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def encode_group_value(value: GroupMetadataValue) -> bytes:
    parts = [
        _INT16.pack(GROUP_METADATA_VALUE_VERSION),
        _string(value.protocol_type),
        _INT32.pack(value.generation),
        _string(value.protocol),
        _string(value.leader),
        _INT64.pack(value.current_state_timestamp),
        _INT32.pack(len(value.members)),
    ]
    for member in value.members:
        parts += (
            _string(member.member_id),
            _string(member.group_instance_id),
            _string(member.client_id),
            _string(member.client_host),
            _INT32.pack(member.rebalance_timeout),
            _INT32.pack(member.session_timeout),
            _bytes(member.subscription),
            _bytes(member.assignment),
        )
    return b"".join(parts)


def decode_group_value(data: bytes) -> GroupMetadataValue:
    reader = ByteReader(data)
    version = reader.int16()
    if not 0 <= version <= _FLEXIBLE_VALUE_VERSION:
        raise ValueError(f"unknown group metadata value version {version}")
    reader.flexible = version >= _FLEXIBLE_VALUE_VERSION
    protocol_type = reader.string()
    generation = reader.int32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    current_state_timestamp = reader.int64() if version >= 2 else -1
    members = tuple(_decode_member(reader, version) for _ in range(reader.array_length()))
    reader.skip_tagged_fields()
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, current_state_timestamp, members
    )


def _decode_member(reader: ByteReader, version: int) -> MemberMetadataValue:
    member_id = reader.string()
    group_instance_id = reader.nullable_string() if version >= 3 else None
    client_id = reader.string()
    client_host = reader.string()
    rebalance_timeout = reader.int32() if version >= 1 else None
    session_timeout = reader.int32()
    subscription = reader.bytes()
    assignment = reader.bytes()
    reader.skip_tagged_fields()
    return MemberMetadataValue(
        member_id,
        group_instance_id,
        client_id,
        client_host,
        session_timeout if rebalance_timeout is None else rebalance_timeout,
        session_timeout,
        subscription,
        assignment,
    )
