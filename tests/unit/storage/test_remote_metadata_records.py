"""``__remote_log_metadata`` values: Kafka's bytes (framing and field layout written out by
hand from its schemas), round trips, bad input refused, and Kafka's choice of metadata
partition (expected values computed with Kafka's own Utils.murmur2 and Objects.hash)."""

from __future__ import annotations

import struct
import uuid

import pytest

from moldau.protocol.metadata_record_serde import encode_metadata_record
from moldau.protocol.remote_log_metadata_records import RECORDS
from moldau.protocol.remote_log_metadata_records.remote_log_segment_metadata_snapshot_record import (
    RemoteLogSegmentMetadataSnapshotRecord,
)
from moldau.storage.remote.metadata_records import (
    MetadataRecordError,
    UnknownMetadataRecordError,
    deserialize,
    metadata_partition,
    murmur2,
    serialize,
)
from moldau.storage.remote.segment import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)

TOPIC_ID = uuid.UUID("5d2e4a1c-9f3b-4e8a-b7c6-1a2b3c4d5e6f")
SEGMENT_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
TP = TopicIdPartition(TOPIC_ID, "orders", 7)
SID = RemoteLogSegmentId(TOPIC_ID, "orders", 7, SEGMENT_ID)


def tp_struct() -> bytes:
    """TopicIdPartitionEntry, flexible: compact string, uuid, int32, no tagged fields."""
    return bytes([len("orders") + 1]) + b"orders" + TOPIC_ID.bytes + struct.pack(">i", 7) + b"\0"


def segment_id_struct() -> bytes:
    return tp_struct() + SEGMENT_ID.bytes + b"\0"


def test_segment_metadata_bytes_are_kafkas():
    md = RemoteLogSegmentMetadata(
        SID, 1000, 1999, 1_700_000_000_123, 2, 1_700_000_000_456, 1_048_576, {3: 1500, 1: 1000}
    )
    expected = (
        b"\x01\x00\x00"  # frame version 1, api key 0, version 0
        + segment_id_struct()
        + struct.pack(">qqiqq", 1000, 1999, 2, 1_700_000_000_123, 1_700_000_000_456)
        + b"\x03"  # two leader epochs, in epoch order
        + struct.pack(">iq", 1, 1000)
        + b"\0"
        + struct.pack(">iq", 3, 1500)
        + b"\0"
        + struct.pack(">i", 1_048_576)
        + b"\0"  # no custom metadata
        + b"\x00"  # COPY_SEGMENT_STARTED
        + b"\0"
    )
    assert serialize(md) == expected
    assert deserialize(expected) == md


def test_update_and_partition_delete_bytes_are_kafkas():
    update = RemoteLogSegmentMetadataUpdate(
        SID, 1_700_000_000_999, RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 2, b"\xca\xfe"
    )
    expected = (
        b"\x01\x01\x00"
        + segment_id_struct()
        + struct.pack(">iq", 2, 1_700_000_000_999)
        + b"\x03\xca\xfe"  # custom metadata: compact bytes
        + b"\x01"
        + b"\0"
    )
    assert serialize(update) == expected
    assert deserialize(expected) == update
    delete = RemotePartitionDeleteMetadata(
        TP, RemotePartitionDeleteState.DELETE_PARTITION_STARTED, 1_700_000_001_000, 3
    )
    expected = b"\x01\x02\x00" + tp_struct() + struct.pack(">iqb", 3, 1_700_000_001_000, 1) + b"\0"
    assert serialize(delete) == expected
    assert deserialize(expected) == delete


def test_every_state_round_trips():
    for state in RemoteLogSegmentState:
        md = RemoteLogSegmentMetadata(SID, 0, 0, -1, 0, 0, 0, {0: 0}, state, b"")
        assert deserialize(serialize(md)) == md
    for pstate in RemotePartitionDeleteState:
        pd = RemotePartitionDeleteMetadata(TP, pstate, 0, -1)
        assert deserialize(serialize(pd)) == pd


def test_bad_values_are_refused_with_a_decode_error():
    good = serialize(RemotePartitionDeleteMetadata(TP, RemotePartitionDeleteState(0), 0, 1))
    with pytest.raises(MetadataRecordError):
        deserialize(good[:-3])  # truncated
    with pytest.raises(MetadataRecordError):
        deserialize(good + b"\0")  # garbage after the record
    with pytest.raises(MetadataRecordError):
        deserialize(good[:-2] + b"\x09\0")  # no such partition delete state
    with pytest.raises(UnknownMetadataRecordError):
        deserialize(b"\x01\x09\x00")  # unknown record type
    snapshot = encode_metadata_record(RemoteLogSegmentMetadataSnapshotRecord(), 0, RECORDS)
    with pytest.raises(UnknownMetadataRecordError, match="not an event"):
        deserialize(snapshot)
    md = serialize(RemoteLogSegmentMetadata(SID, 5, 9, 0, 0, 0, 0, {0: 5}))
    no_epochs = md.replace(struct.pack(">iq", 0, 5) + b"\0", b"").replace(b"\x02", b"\x01", 1)
    with pytest.raises(MetadataRecordError):
        deserialize(no_epochs)


def test_murmur2_is_kafkas():
    # Kafka's UtilsTest.testMurmur2 cases.
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


@pytest.mark.parametrize(
    ("topic_id", "expected"),
    [
        ("00000000-0000-0000-0000-000000000001", [35, 6, 46, 43, 27]),
        ("5d2e4a1c-9f3b-4e8a-b7c6-1a2b3c4d5e6f", [37, 14, 38, 48, 30]),
        ("ffffffff-ffff-ffff-8000-000000000000", [2, 48, 22, 15, 49]),
    ],
)
def test_metadata_partition_is_kafkas(topic_id, expected):
    """Computed with Kafka's RemoteLogMetadataTopicPartitioner arithmetic on the JVM
    (Utils.toPositive(Utils.murmur2(Objects.hash(lsb, msb, partition))) % 50)."""
    partitions = [0, 1, 7, 49, 1000]
    got = [
        metadata_partition(TopicIdPartition(uuid.UUID(topic_id), "t", p), 50) for p in partitions
    ]
    assert got == expected
