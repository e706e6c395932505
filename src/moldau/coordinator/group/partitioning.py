"""Which `__consumer_offsets` partition (and so which coordinator) owns a group.

Must equal Kafka's `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions` so that
offsets written by Kafka, and clients' expectations, land on the same partition.
"""

from __future__ import annotations

OFFSETS_TOPIC_NUM_PARTITIONS = 50


def java_string_hash(value: str) -> int:
    """Java's String.hashCode: over UTF-16 code units with int32 overflow."""
    units = value.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_group(group_id: str, num_partitions: int = OFFSETS_TOPIC_NUM_PARTITIONS) -> int:
    """Kafka's abs is `n & 0x7fffffff` (Integer.MIN_VALUE maps to 0, not overflow)."""
    return (java_string_hash(group_id) & 0x7FFFFFFF) % num_partitions
