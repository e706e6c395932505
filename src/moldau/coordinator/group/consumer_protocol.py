"""Just enough of the consumer protocol (subscription/assignment v0-3) to know topics.

The coordinator needs subscribed topics for OffsetDelete (GROUP_SUBSCRIBED_TO_TOPIC) and
offset expiry of Stable groups; `groups describe` needs assigned partitions. Topics come
first in every version, so the trailing version-specific fields are never read.
"""

from __future__ import annotations

from .byte_reader import ByteReader

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscription_topics(data: bytes) -> list[str]:
    """Topics of a ConsumerProtocolSubscription; raises ValueError when malformed."""
    reader = ByteReader(data)
    reader.int16()
    return [reader.string() for _ in range(reader.array_length())]


def assignment_partitions(data: bytes) -> dict[str, list[int]]:
    """Assigned partitions by topic of a ConsumerProtocolAssignment; ValueError when malformed."""
    reader = ByteReader(data)
    reader.int16()
    assigned: dict[str, list[int]] = {}
    for _ in range(reader.array_length()):
        topic = reader.string()
        assigned.setdefault(topic, []).extend(reader.int32() for _ in range(reader.array_length()))
    return assigned
