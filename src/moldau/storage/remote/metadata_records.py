"""The values of ``__remote_log_metadata``, byte for byte as Kafka writes them.

Kafka's RemoteLogMetadataSerde frames each event like a KRaft metadata record (unsigned
varints: frame version 1, api key, version; then the message), with the record types of
``storage/src/main/resources/message/``: RemoteLogSegmentMetadataRecord (0, a copy started),
RemoteLogSegmentMetadataUpdateRecord (1, a segment's later states),
RemotePartitionDeleteMetadataRecord (2) and RemoteLogSegmentMetadataSnapshotRecord (3, which
Kafka never writes to the topic: reading one is refused like an unknown type). Records have
no key; the event of a user partition goes to the metadata partition Kafka's
RemoteLogMetadataTopicPartitioner picks (:func:`metadata_partition`), so all events of one
partition stay in order in one metadata partition, and Kafka brokers and ours agree on it.
"""

from __future__ import annotations

import uuid
from typing import Any

from moldau.protocol.metadata_record_serde import (
    MetadataRecordError,
    UnknownMetadataRecordError,
    decode_metadata_record,
    encode_metadata_record,
)
from moldau.protocol.remote_log_metadata_records import RECORDS
from moldau.protocol.remote_log_metadata_records import (
    remote_log_segment_metadata_record as segment_record,
)
from moldau.protocol.remote_log_metadata_records import (
    remote_log_segment_metadata_update_record as update_record,
)
from moldau.protocol.remote_log_metadata_records import (
    remote_partition_delete_metadata_record as delete_record,
)
from moldau.storage.remote.segment import (
    RemoteLogMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)

REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"
DEFAULT_METADATA_TOPIC_PARTITIONS = 50

__all__ = [
    "DEFAULT_METADATA_TOPIC_PARTITIONS",
    "REMOTE_LOG_METADATA_TOPIC",
    "MetadataRecordError",
    "UnknownMetadataRecordError",
    "deserialize",
    "metadata_partition",
    "murmur2",
    "serialize",
]


# Each generated module has its own copy of the structs the schemas share.
def _tp_entry(tp: TopicIdPartition, module: Any) -> Any:
    return module.TopicIdPartitionEntry(name=tp.topic, id=tp.topic_id.bytes, partition=tp.partition)


def _segment_id_entry(sid: RemoteLogSegmentId, module: Any) -> Any:
    return module.RemoteLogSegmentIdEntry(
        topic_id_partition=_tp_entry(sid.topic_id_partition, module), id=sid.id.bytes
    )


def _tp(entry: Any) -> TopicIdPartition:
    return TopicIdPartition(uuid.UUID(bytes=entry.id), entry.name, entry.partition)


def _segment_id(entry: Any) -> RemoteLogSegmentId:
    tp = _tp(entry.topic_id_partition)
    return RemoteLogSegmentId(tp.topic_id, tp.topic, tp.partition, uuid.UUID(bytes=entry.id))


def serialize(metadata: RemoteLogMetadata) -> bytes:
    """One ``__remote_log_metadata`` value, as Kafka's RemoteLogMetadataSerde writes it."""
    record: Any
    if isinstance(metadata, RemoteLogSegmentMetadata):
        record = segment_record.RemoteLogSegmentMetadataRecord(
            remote_log_segment_id=_segment_id_entry(metadata.segment_id, segment_record),
            start_offset=metadata.start_offset,
            end_offset=metadata.end_offset,
            broker_id=metadata.broker_id,
            max_timestamp_ms=metadata.max_timestamp_ms,
            event_timestamp_ms=metadata.event_timestamp_ms,
            segment_leader_epochs=[
                segment_record.SegmentLeaderEpochEntry(leader_epoch=e, offset=o)
                for e, o in metadata.segment_leader_epochs.items()
            ],
            segment_size_in_bytes=metadata.segment_size_bytes,
            custom_metadata=metadata.custom_metadata,
            remote_log_segment_state=int(metadata.state),
        )
    elif isinstance(metadata, RemoteLogSegmentMetadataUpdate):
        record = update_record.RemoteLogSegmentMetadataUpdateRecord(
            remote_log_segment_id=_segment_id_entry(metadata.segment_id, update_record),
            broker_id=metadata.broker_id,
            event_timestamp_ms=metadata.event_timestamp_ms,
            custom_metadata=metadata.custom_metadata,
            remote_log_segment_state=int(metadata.state),
        )
    elif isinstance(metadata, RemotePartitionDeleteMetadata):
        record = delete_record.RemotePartitionDeleteMetadataRecord(
            topic_id_partition=_tp_entry(metadata.topic_id_partition, delete_record),
            broker_id=metadata.broker_id,
            event_timestamp_ms=metadata.event_timestamp_ms,
            remote_partition_delete_state=int(metadata.state),
        )
    else:
        raise TypeError(f"not remote log metadata: {metadata!r}")
    return encode_metadata_record(record, 0, RECORDS)


def deserialize(value: bytes | bytearray | memoryview) -> RemoteLogMetadata:
    """The event in one value; MetadataRecordError (a ValueError) for bytes that are not
    one, UnknownMetadataRecordError (a subclass) for a type or version this release does
    not read."""
    record = decode_metadata_record(value, RECORDS)
    try:
        if isinstance(record, segment_record.RemoteLogSegmentMetadataRecord):
            return RemoteLogSegmentMetadata(
                segment_id=_segment_id(record.remote_log_segment_id),
                start_offset=record.start_offset,
                end_offset=record.end_offset,
                max_timestamp_ms=record.max_timestamp_ms,
                broker_id=record.broker_id,
                event_timestamp_ms=record.event_timestamp_ms,
                segment_size_bytes=record.segment_size_in_bytes,
                segment_leader_epochs={
                    e.leader_epoch: e.offset for e in record.segment_leader_epochs
                },
                state=RemoteLogSegmentState(record.remote_log_segment_state),
                custom_metadata=record.custom_metadata,
            )
        if isinstance(record, update_record.RemoteLogSegmentMetadataUpdateRecord):
            return RemoteLogSegmentMetadataUpdate(
                segment_id=_segment_id(record.remote_log_segment_id),
                event_timestamp_ms=record.event_timestamp_ms,
                state=RemoteLogSegmentState(record.remote_log_segment_state),
                broker_id=record.broker_id,
                custom_metadata=record.custom_metadata,
            )
        if isinstance(record, delete_record.RemotePartitionDeleteMetadataRecord):
            return RemotePartitionDeleteMetadata(
                _tp(record.topic_id_partition),
                RemotePartitionDeleteState(record.remote_partition_delete_state),
                record.event_timestamp_ms,
                record.broker_id,
            )
    except ValueError as e:  # an unknown state id, offsets out of order, no leader epochs
        raise MetadataRecordError(f"bad {type(record).__name__}: {e}") from e
    raise UnknownMetadataRecordError(
        f"{type(record).__name__} is not an event of {REMOTE_LOG_METADATA_TOPIC}"
    )


def _int32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n & 0x80000000 else n


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (the 32-bit MurmurHash2 of its partitioners), as a signed
    int like Java's."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = data[whole:]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return _int32(h)


def _java_long_hash(v: int) -> int:
    v &= 0xFFFFFFFFFFFFFFFF
    return _int32(v ^ (v >> 32))


def metadata_partition(tp: TopicIdPartition, num_partitions: int) -> int:
    """The ``__remote_log_metadata`` partition holding ``tp``'s events: Kafka's
    RemoteLogMetadataTopicPartitioner, i.e. murmur2 of the big-endian int
    ``Objects.hash(topicId.lsb, topicId.msb, partition)``, made positive, modulo the
    partition count."""
    raw = tp.topic_id.int
    msb, lsb = raw >> 64, raw & 0xFFFFFFFFFFFFFFFF
    h = 1
    for part in (_java_long_hash(lsb), _java_long_hash(msb), tp.partition):
        h = _int32(31 * h + part)
    digest = murmur2(h.to_bytes(4, "big", signed=True))
    return (digest & 0x7FFFFFFF) % num_partitions
