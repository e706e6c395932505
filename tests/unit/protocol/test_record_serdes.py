"""KRaft metadata records and coordinator records: Kafka's framing, byte for byte.

Expected bytes are derived by hand from Kafka's schemas and serdes (MetadataRecordSerde:
uvarint frame version 1, uvarint api key, uvarint version, body; CoordinatorRecordSerde:
int16 record type + key, int16 version + value).
"""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.protocol import coordinator_record_serde as coord
from moldau.protocol.coordinator_records import GROUP_RECORD_TYPES, TRANSACTION_RECORD_TYPES
from moldau.protocol.coordinator_records.consumer_group_member_metadata_value import (
    ClassicMemberMetadata,
    ConsumerGroupMemberMetadataValue,
)
from moldau.protocol.coordinator_records.group_metadata_key import GroupMetadataKey
from moldau.protocol.coordinator_records.group_metadata_value import (
    GroupMetadataValue,
    MemberMetadata,
)
from moldau.protocol.coordinator_records.offset_commit_key import OffsetCommitKey
from moldau.protocol.coordinator_records.offset_commit_value import OffsetCommitValue
from moldau.protocol.coordinator_records.transaction_log_key import TransactionLogKey
from moldau.protocol.coordinator_records.transaction_log_value import (
    PartitionsSchema,
    TransactionLogValue,
)
from moldau.protocol.metadata_record_serde import (
    MetadataRecordError,
    UnknownMetadataRecordError,
    decode_metadata_record,
    encode_metadata_record,
)
from moldau.protocol.metadata_records import RECORDS
from moldau.protocol.metadata_records.feature_level_record import FeatureLevelRecord
from moldau.protocol.metadata_records.no_op_record import NoOpRecord
from moldau.protocol.metadata_records.partition_change_record import PartitionChangeRecord
from moldau.protocol.metadata_records.partition_record import PartitionRecord
from moldau.protocol.metadata_records.producer_ids_record import ProducerIdsRecord
from moldau.protocol.metadata_records.register_broker_record import (
    BrokerEndpoint,
    RegisterBrokerRecord,
)
from moldau.protocol.metadata_records.topic_record import TopicRecord
from moldau.protocol.primitives import ProtocolDecodeError

from .schema_strategies import message_strategy

UUID = bytes(range(16))


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s16(text: str) -> bytes:
    return i16(len(text)) + text.encode()


# -- metadata records ---------------------------------------------------------------


def test_topic_record_bytes():
    wire = encode_metadata_record(TopicRecord(name="foo", topic_id=UUID))
    # frame 1, TopicRecord = api key 2, v0; compact string "foo"; uuid; no tagged fields
    assert wire == b"\x01\x02\x00" + b"\x04foo" + UUID + b"\x00"
    assert decode_metadata_record(wire) == TopicRecord(name="foo", topic_id=UUID)


def test_partition_record_bytes_per_version():
    record = PartitionRecord(
        partition_id=0,
        topic_id=UUID,
        replicas=[1, 2],
        isr=[1],
        leader=1,
        leader_epoch=0,
        partition_epoch=0,
    )
    body_v0 = (
        i32(0)
        + UUID
        + (b"\x03" + i32(1) + i32(2))  # replicas, compact length 2 + 1
        + (b"\x02" + i32(1))  # isr
        + b"\x01"  # removing replicas: empty
        + b"\x01"  # adding replicas: empty
        + (i32(1) + i32(0) + i32(0))  # leader, leader epoch, partition epoch
    )
    assert encode_metadata_record(record, 0) == b"\x01\x03\x00" + body_v0 + b"\x00"
    # v1 adds the (untagged) directories array after the partition epoch
    assert encode_metadata_record(record, 1) == b"\x01\x03\x01" + body_v0 + b"\x01" + b"\x00"
    # a non-default LeaderRecoveryState is tagged field 0 (one int8)
    record.leader_recovery_state = 1
    wire = encode_metadata_record(record, 2)
    assert wire == b"\x01\x03\x02" + body_v0 + b"\x01" + b"\x01" + b"\x00\x01\x01"
    assert decode_metadata_record(wire) == record


def test_partition_change_record_tags_in_order():
    change = PartitionChangeRecord(partition_id=3, topic_id=UUID, isr=[1], leader=2)
    wire = encode_metadata_record(change, 0)
    assert wire == (
        b"\x01\x05\x00"
        + i32(3)
        + UUID
        + b"\x02"  # two tagged fields
        + (b"\x00\x05" + b"\x02" + i32(1))  # tag 0 (Isr), 5 bytes
        + (b"\x01\x04" + i32(2))  # tag 1 (Leader), 4 bytes
    )
    decoded = decode_metadata_record(wire)
    assert decoded.isr == [1] and decoded.leader == 2 and decoded.replicas is None


def test_small_records_bytes():
    assert encode_metadata_record(NoOpRecord()) == b"\x01\x14\x00\x00"
    pid = ProducerIdsRecord(broker_id=1, broker_epoch=5, next_producer_id=1000)
    assert encode_metadata_record(pid) == b"\x01\x0f\x00" + i32(1) + i64(5) + i64(1000) + b"\x00"
    level = FeatureLevelRecord(name="metadata.version", feature_level=21)
    assert encode_metadata_record(level) == (
        b"\x01\x0c\x00" + b"\x11metadata.version" + i16(21) + b"\x00"
    )


def test_register_broker_record_v3():
    record = RegisterBrokerRecord(
        broker_id=1,
        incarnation_id=UUID,
        broker_epoch=7,
        end_points=[BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0)],
        features=[],
        rack=None,
        fenced=False,
        log_dirs=[UUID],
    )
    wire = encode_metadata_record(record)
    assert wire == (
        b"\x01\x00\x03"
        + i32(1)
        + b"\x00"  # IsMigratingZkBroker (v2+)
        + UUID
        + i64(7)
        + (b"\x02" + b"\x0aPLAINTEXT" + b"\x02h" + struct.pack(">Hh", 9092, 0) + b"\x00")
        + b"\x01"  # features: empty
        + b"\x00"  # rack: null
        + b"\x00"  # fenced
        + b"\x00"  # in controlled shutdown (v1+)
        + (b"\x01" + b"\x00\x11" + b"\x02" + UUID)  # one tagged field: 0 (LogDirs), 17 bytes
    )
    assert decode_metadata_record(wire) == record


def test_unknown_frames_types_and_versions_are_named():
    with pytest.raises(UnknownMetadataRecordError, match="frame version 15"):
        decode_metadata_record(b"\x0f")
    with pytest.raises(UnknownMetadataRecordError, match="frame version 0"):
        decode_metadata_record(b"\x00\x02\x00")
    with pytest.raises(UnknownMetadataRecordError, match="type 16383"):
        decode_metadata_record(b"\x01\xff\x7f\x00\x80")
    with pytest.raises(UnknownMetadataRecordError, match="version 9 of TopicRecord"):
        decode_metadata_record(b"\x01\x02\x09" + b"\x04foo" + UUID + b"\x00")


def test_malformed_metadata_records_are_refused():
    with pytest.raises(MetadataRecordError, match="frame version"):
        decode_metadata_record(b"\x80\x80\x80\x80\x80\x80")
    with pytest.raises(MetadataRecordError, match="type"):
        decode_metadata_record(b"\x01\x80\x80\x80\x80\x80\x80")
    with pytest.raises(MetadataRecordError, match="too large"):
        decode_metadata_record(b"\x01\x08\xff\xff\xff\x7f\x80")
    with pytest.raises(MetadataRecordError, match="failed to deserialize RegisterBrokerRecord"):
        decode_metadata_record(b"\x01\x00\x00\x80")
    with pytest.raises(MetadataRecordError, match="1 byte"):
        decode_metadata_record(encode_metadata_record(NoOpRecord()) + b"\x00")
    assert issubclass(MetadataRecordError, ValueError)
    assert not issubclass(MetadataRecordError, UnknownMetadataRecordError)


def test_encode_refuses_what_kafka_would_not_write():
    with pytest.raises(TypeError):
        encode_metadata_record(OffsetCommitKey())
    with pytest.raises(ValueError):
        encode_metadata_record(TopicRecord(), 1)


def test_registry_covers_every_metadata_schema():
    assert RECORDS[2] is TopicRecord and RECORDS[3] is PartitionRecord
    assert all(key == cls.API_KEY for key, cls in RECORDS.items())
    assert len(RECORDS) == 25


@pytest.mark.parametrize("api_key", sorted(RECORDS))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_metadata_record_round_trips(api_key, data):
    cls = RECORDS[api_key]
    version = data.draw(st.integers(cls.MIN_VERSION, cls.MAX_VERSION))
    record = data.draw(message_strategy(cls.__name__, version))
    wire = encode_metadata_record(record, version)
    assert wire[:2] == bytes([1, api_key])  # every api key is below 128: one varint byte
    again = encode_metadata_record(decode_metadata_record(wire), version)
    assert again == wire


@given(st.binary(max_size=64))
@settings(max_examples=300, deadline=None)
def test_random_bytes_are_records_or_metadata_errors(data):
    with contextlib.suppress(MetadataRecordError):
        decode_metadata_record(b"\x01" + data)


# -- coordinator records ------------------------------------------------------------


def test_offset_commit_record_bytes():
    key = coord.serialize_key(OffsetCommitKey(group="g", topic="t", partition=3))
    assert key == i16(1) + s16("g") + s16("t") + i32(3)  # Kafka writes record type 1
    value = OffsetCommitValue(offset=42, leader_epoch=7, metadata="m", commit_timestamp=99)
    assert coord.serialize_value(value, 3) == i16(3) + i64(42) + i32(7) + s16("m") + i64(99)
    flexible = coord.serialize_value(value, 4)
    assert flexible == i16(4) + i64(42) + i32(7) + b"\x02m" + i64(99) + b"\x00"
    record = coord.deserialize(GROUP_RECORD_TYPES, key, flexible)
    assert (record.record_type, record.value_version) == (1, 4)
    assert record.key == OffsetCommitKey(group="g", topic="t", partition=3)
    assert record.value == value


def test_group_metadata_record_bytes():
    assert coord.serialize_key(GroupMetadataKey(group="g")) == i16(2) + s16("g")
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=1,
        protocol=None,
        leader=None,
        current_state_timestamp=5,
        members=[
            MemberMetadata(
                member_id="m",
                group_instance_id=None,
                client_id="c",
                client_host="/h",
                rebalance_timeout=30,
                session_timeout=10,
                subscription=b"s",
                assignment=b"",
            )
        ],
    )
    assert coord.serialize_value(value, 3) == (
        i16(3)
        + s16("consumer")
        + i32(1)
        + i16(-1)
        + i16(-1)
        + i64(5)
        + i32(1)
        + s16("m")
        + i16(-1)
        + s16("c")
        + s16("/h")
        + i32(30)
        + i32(10)
        + i32(1)
        + b"s"
        + i32(0)
    )


def test_transaction_log_record_bytes():
    key = coord.serialize_key(TransactionLogKey(transactional_id="tx"))
    assert key == i16(0) + s16("tx")
    value = TransactionLogValue(
        producer_id=5,
        producer_epoch=1,
        transaction_timeout_ms=60_000,
        transaction_status=1,
        transaction_partitions=[PartitionsSchema(topic="t", partition_ids=[0, 2])],
        transaction_last_update_timestamp_ms=10,
        transaction_start_timestamp_ms=9,
    )
    body = i64(5) + i16(1) + i32(60_000) + b"\x01"
    v0 = i16(0) + body + i32(1) + s16("t") + i32(2) + i32(0) + i32(2) + i64(10) + i64(9)
    assert coord.serialize_value(value, 0) == v0
    value.client_transaction_version = 2
    value.previous_producer_id = 4
    partitions = b"\x02" + b"\x02t" + b"\x03" + i32(0) + i32(2) + b"\x00"  # compact, no tags
    tags = b"\x02" + (b"\x00\x08" + i64(4)) + (b"\x02\x02" + i16(2))  # tags 0 and 2
    v1 = i16(1) + body + partitions + i64(10) + i64(9) + tags
    assert coord.serialize_value(value, 1) == v1
    record = coord.deserialize(TRANSACTION_RECORD_TYPES, key, v1)
    assert record.value == value and record.key.transactional_id == "tx"
    empty = TransactionLogValue(producer_id=5, transaction_partitions=None)
    decoded = coord.deserialize(TRANSACTION_RECORD_TYPES, key, coord.serialize_value(empty, 0))
    assert decoded.value.transaction_partitions is None


def test_tombstones_unknown_types_and_future_versions():
    key = coord.serialize_key(GroupMetadataKey(group="g"))
    tombstone = coord.deserialize(GROUP_RECORD_TYPES, key, None)
    assert tombstone.value is None and tombstone.key.group == "g"
    with pytest.raises(coord.UnknownRecordTypeError) as e:
        coord.deserialize(GROUP_RECORD_TYPES, i16(16) + s16("g"), None)
    assert e.value.record_type == 16
    with pytest.raises(coord.UnknownRecordTypeError):
        coord.deserialize(TRANSACTION_RECORD_TYPES, key, None)
    # KIP-915: a newer value version is read with the newest layout we know
    value = OffsetCommitValue(offset=1, metadata="", commit_timestamp=2)
    v5 = i16(5) + coord.serialize_value(value, 4)[2:]
    assert coord.deserialize_value(GROUP_RECORD_TYPES, 1, v5) == (5, value)
    with pytest.raises(ProtocolDecodeError):
        coord.deserialize_value(GROUP_RECORD_TYPES, 1, i16(-1) + i64(0))
    with pytest.raises(ProtocolDecodeError, match="version"):
        coord.deserialize_key(GROUP_RECORD_TYPES, b"\x00")


def test_absent_nullable_tagged_struct_reads_as_null():
    """ClassicMemberMetadata is a nullable tagged struct whose default is JSON null: a
    consumer-protocol member's record omits the tag and reads back None, while a present
    one, even with no protocol, keeps its value."""
    member_metadata = 5  # ConsumerGroupMemberMetadata's record type

    def round_trip(value: ConsumerGroupMemberMetadataValue) -> ConsumerGroupMemberMetadataValue:
        data = coord.serialize_value(value, 0)
        return coord.deserialize_value(GROUP_RECORD_TYPES, member_metadata, data)[1]

    plain = ConsumerGroupMemberMetadataValue(client_id="c", client_host="/h")
    assert plain.classic_member_metadata is None
    assert coord.serialize_value(plain, 0).endswith(b"\x00")  # no tagged field written
    assert round_trip(plain).classic_member_metadata is None
    empty = ConsumerGroupMemberMetadataValue(classic_member_metadata=ClassicMemberMetadata())
    assert round_trip(empty).classic_member_metadata == ClassicMemberMetadata()
