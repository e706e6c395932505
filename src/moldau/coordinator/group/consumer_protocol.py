"""Just enough of the consumer protocol to know topics.

KIP-848 groups are described to DescribeGroups in these blobs too (as Kafka does, so
classic tools read them). The coordinator needs subscribed topics for OffsetDelete (GROUP_SUBSCRIBED_TO_TOPIC) and
offset expiry of Stable groups; `groups describe` needs assigned partitions. The blobs are
decoded with the generated ConsumerProtocolSubscription/Assignment codecs; as Kafka's
ConsumerProtocol does, a version newer than we know is read with the newest layout.
"""

from __future__ import annotations

import struct
from typing import Any

from moldau.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from moldau.protocol.messages.consumer_protocol_assignment import (
    TopicPartition as AssignedPartitions,
)
from moldau.protocol.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
)

CONSUMER_PROTOCOL_TYPE = "consumer"

_VERSION = struct.Struct(">h")


def _decode(cls: Any, data: bytes) -> Any:
    """Raises ValueError (ProtocolDecodeError) when malformed."""
    if len(data) < 2:
        raise ValueError("consumer protocol blob shorter than its version")
    (version,) = _VERSION.unpack_from(data)
    if version < 0:
        raise ValueError(f"consumer protocol version {version}")
    return cls.decode(memoryview(data), min(version, cls.MAX_VERSION), 2)[0]


def subscription_topics(data: bytes) -> list[str]:
    """Topics of a ConsumerProtocolSubscription; raises ValueError when malformed."""
    topics: list[str] = _decode(ConsumerProtocolSubscription, data).topics
    return topics


def decode_subscription(data: bytes) -> ConsumerProtocolSubscription:
    """The whole ConsumerProtocolSubscription (topics, owned partitions, rack); ValueError
    when malformed."""
    subscription: ConsumerProtocolSubscription = _decode(ConsumerProtocolSubscription, data)
    return subscription


def protocol_version(data: bytes) -> int:
    """A blob's version, capped to the newest we write (a classic member is answered in
    the version it speaks)."""
    if len(data) < 2:
        return 0
    return max(0, min(_VERSION.unpack_from(data)[0], ConsumerProtocolAssignment.MAX_VERSION))


def assignment_partitions(data: bytes) -> dict[str, list[int]]:
    """Assigned partitions by topic of a ConsumerProtocolAssignment; ValueError when malformed."""
    assigned: dict[str, list[int]] = {}
    for tp in _decode(ConsumerProtocolAssignment, data).assigned_partitions:
        assigned.setdefault(tp.topic, []).extend(tp.partitions)
    return assigned


def _encode(message: Any, version: int) -> bytes:
    return _VERSION.pack(version) + b"".join(bytes(part) for part in message.encode(version))


def encode_subscription(topics: list[str], rack_id: str | None) -> bytes:
    """A ConsumerProtocolSubscription v3 (topics and rack)."""
    return _encode(ConsumerProtocolSubscription(topics=topics, rack_id=rack_id), 3)


def encode_assignment(assigned: dict[str, list[int]], version: int = 3) -> bytes:
    """A ConsumerProtocolAssignment (v3 unless asked) of partitions by topic name."""
    return _encode(
        ConsumerProtocolAssignment(
            assigned_partitions=[
                AssignedPartitions(topic=t, partitions=sorted(ps))
                for t, ps in sorted(assigned.items())
            ]
        ),
        version,
    )
