"""Keys and values of `__consumer_offsets` and `__transaction_state`, framed as Kafka 4.0's
CoordinatorRecordSerde writes them.

A key is an int16 record type followed by the key message read at that version (so the
record type is the key's version: OffsetCommitKey is 0 or 1, GroupMetadataKey 2, ...); a
value is an int16 version followed by the value message at that version; a tombstone has
no value. As Kafka's generated readers do, a value version above the highest known is read
with the highest known layout (KIP-915: later versions only add tagged fields).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from moldau.protocol.coordinator_records import (
    GROUP_RECORD_TYPES,
    SHARE_RECORD_TYPES,
    TRANSACTION_RECORD_TYPES,
)
from moldau.protocol.primitives import ProtocolDecodeError

__all__ = [
    "GROUP_RECORD_TYPES",
    "SHARE_RECORD_TYPES",
    "TRANSACTION_RECORD_TYPES",
    "CoordinatorRecord",
    "UnknownRecordTypeError",
    "deserialize",
    "deserialize_key",
    "deserialize_value",
    "serialize_key",
    "serialize_value",
]

_VERSION = struct.Struct(">h")

# Record type -> (key class, value class): GROUP_RECORD_TYPES as Kafka's
# GroupCoordinatorRecordSerde, TRANSACTION_RECORD_TYPES as its TransactionLog,
# SHARE_RECORD_TYPES as ShareCoordinatorRecordSerde (`__share_group_state`).
RecordTypes = dict[int, Any]


class UnknownRecordTypeError(ProtocolDecodeError):
    """A key whose record type this coordinator does not know (Kafka's
    UnknownRecordTypeException); loaders skip such records."""

    def __init__(self, record_type: int) -> None:
        super().__init__(f"unknown coordinator record type {record_type}")
        self.record_type = record_type


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    record_type: int  # the key's version
    key: Any
    value_version: int  # -1 for a tombstone
    value: Any | None  # None: a tombstone


def _message_bytes(version: int, message: Any) -> bytes:
    out = bytearray(_VERSION.pack(version))
    for part in message.encode(version):  # coordinator records carry no record sets
        out += part
    return bytes(out)


def serialize_key(key: Any, record_type: int | None = None) -> bytes:
    """The key, prefixed with its record type (default: the key's highest version, which
    is what Kafka writes: OffsetCommitKey 1, GroupMetadataKey 2, TransactionLogKey 0)."""
    return _message_bytes(type(key).MAX_VERSION if record_type is None else record_type, key)


def serialize_value(value: Any, version: int) -> bytes:
    """The value prefixed with ``version`` (a tombstone is a record with no value)."""
    return _message_bytes(version, value)


def _read_version(view: memoryview, what: str) -> int:
    if len(view) < 2:
        raise ProtocolDecodeError(f"could not read version from the {what}")
    version: int = _VERSION.unpack_from(view, 0)[0]
    return version


def deserialize_key(types: RecordTypes, data: bytes | bytearray | memoryview) -> tuple[int, Any]:
    """(record type, key); raises UnknownRecordTypeError or ProtocolDecodeError."""
    view = memoryview(data)
    record_type = _read_version(view, "key")
    if record_type not in types:
        raise UnknownRecordTypeError(record_type)
    key, _ = types[record_type][0].decode(view, record_type, 2)
    return record_type, key


def deserialize_value(
    types: RecordTypes, record_type: int, data: bytes | bytearray | memoryview
) -> tuple[int, Any]:
    """(value version, value) for a key of ``record_type``."""
    if record_type not in types:
        raise UnknownRecordTypeError(record_type)
    cls = types[record_type][1]
    view = memoryview(data)
    version = _read_version(view, "value")
    if version < cls.MIN_VERSION:
        raise ProtocolDecodeError(f"unknown {cls.__name__} version {version}")
    value, _ = cls.decode(view, min(version, cls.MAX_VERSION), 2)
    return version, value


def deserialize(
    types: RecordTypes,
    key: bytes | bytearray | memoryview,
    value: bytes | bytearray | memoryview | None,
) -> CoordinatorRecord:
    """One record of a coordinator log, as Kafka's CoordinatorRecordSerde.deserialize."""
    record_type, key_message = deserialize_key(types, key)
    if value is None:
        return CoordinatorRecord(record_type, key_message, -1, None)
    version, value_message = deserialize_value(types, record_type, value)
    return CoordinatorRecord(record_type, key_message, version, value_message)
