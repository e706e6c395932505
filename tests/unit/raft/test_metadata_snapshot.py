"""Metadata snapshots: an image as records replays to the same image, and a snapshot file
(header, records, footer) reads back as those records."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage
from moldau.metadata.records import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from moldau.metadata.security import (
    ClientQuotaRecord,
    EntityData,
    StandardAcl,
    UserScramCredentialRecord,
)
from moldau.metadata.snapshot import image_to_records
from moldau.protocol.metadata_record_serde import encode_metadata_record
from moldau.raft.driver import encode_snapshot, read_snapshot_records
from moldau.raft.records import (
    ControlRecordType,
    SnapshotFormatError,
    control_type,
    iter_snapshot_batches,
    snapshot_bytes,
)
from moldau.records.batch import scan_batches
from moldau.records.record import decode_all


def replay(batches: list[tuple[list[MetadataRecord], int]]) -> MetadataImage:
    """The image of a log: batches of (records, last offset) applied in order."""
    image = MetadataImage()
    for records, offset in batches:
        image = image.apply(records, offset)
    return image


def round_trip(image: MetadataImage) -> MetadataImage:
    return replay([(image_to_records(image), image.offset)])


def without_empty_broker_configs(image: MetadataImage) -> MetadataImage:
    """A broker config resource whose every key was deleted has no record (as in Kafka)."""
    kept = {name: c for name, c in image.broker_configs.items() if c}
    return replace(image, broker_configs=MappingProxyType(kept))


def rich_image() -> MetadataImage:
    t1, t2 = b"\x01" * 16, b"\x02" * 16
    records: list[MetadataRecord] = [
        RegisterBrokerRecord(
            broker_id=1,
            incarnation_id=b"\x09" * 16,
            broker_epoch=7,
            end_points=[
                BrokerEndpoint(name="PLAINTEXT", host="h1", port=9092),
                BrokerEndpoint(name="SSL", host="h1", port=9093),
            ],
            rack="r1",
            fenced=False,
        ),
        RegisterBrokerRecord(broker_id=2, broker_epoch=9, rack=None, fenced=True),
        BrokerRegistrationChangeRecord(broker_id=1, in_controlled_shutdown=1),
        TopicRecord(name="orders", topic_id=t1),
        ConfigRecord(
            resource_type=TOPIC_RESOURCE, resource_name="orders", name="retention.ms", value="1000"
        ),
        PartitionRecord(
            partition_id=0,
            topic_id=t1,
            replicas=[1, 2],
            isr=[1, 2],
            leader=1,
            leader_epoch=3,
            partition_epoch=5,
        ),
        PartitionRecord(
            partition_id=1,
            topic_id=t1,
            replicas=[2, 1],
            isr=[2],
            leader=2,
            leader_epoch=0,
            partition_epoch=0,
        ),
        PartitionChangeRecord(
            partition_id=1,
            topic_id=t1,
            replicas=[2, 1, 3],
            adding_replicas=[3],
            removing_replicas=[1],
        ),
        TopicRecord(name="__consumer_offsets", topic_id=t2),
        PartitionRecord(
            partition_id=0,
            topic_id=t2,
            replicas=[1],
            isr=[1],
            leader=1,
            leader_epoch=0,
            partition_epoch=0,
        ),
        ConfigRecord(
            resource_type=BROKER_RESOURCE, resource_name="", name="log.retention.ms", value="5"
        ),
        ConfigRecord(resource_type=BROKER_RESOURCE, resource_name="1", name="a", value="b"),
        ProducerIdsRecord(broker_id=1, broker_epoch=7, next_producer_id=5000),
        StandardAcl(2, "orders", 3, "User:alice", "*", 3, 3).to_record(b"\x05" * 16),
        UserScramCredentialRecord(
            name="alice", mechanism=1, salt=b"s", stored_key=b"k", server_key=b"v", iterations=4096
        ),
        ClientQuotaRecord(
            entity=[EntityData(entity_type="user", entity_name="alice")],
            key="producer_byte_rate",
            value=1024.0,
        ),
    ]
    return replay([(records, 41)])


def test_a_rich_image_survives_the_round_trip() -> None:
    image = rich_image()
    part = image.partition("orders", 1)
    assert part is not None and part.adding_replicas == (3,) and part.removing_replicas == (1,)
    assert image.brokers[1].in_controlled_shutdown and image.brokers[2].fenced
    security = image.security
    assert len(security.acls) == len(security.scram) == len(security.quotas) == 1
    again = round_trip(image)
    assert again == image
    assert again.topics_by_id == image.topics_by_id and again.offset == 41


def test_a_snapshot_file_holds_header_records_footer() -> None:
    image = rich_image()
    data = encode_snapshot(image, epoch=6, last_timestamp=1234)
    batches = decode_all(data)
    kinds = [control_type(records[0]) if info.is_control else None for info, records in batches]
    assert kinds[0] == ControlRecordType.SNAPSHOT_HEADER
    assert kinds[-1] == ControlRecordType.SNAPSHOT_FOOTER
    assert all(k is None for k in kinds[1:-1])
    assert {info.partition_leader_epoch for info, _ in batches} == {6}
    all_offsets = [r.offset for _, records in batches for r in records]
    assert all_offsets == list(range(len(all_offsets))), "numbered from 0 like Kafka's"
    assert read_snapshot_records(data) == image_to_records(image)


def test_big_snapshots_span_several_batches_and_damage_is_detected() -> None:
    values = [bytes([i % 256]) * 1000 for i in range(3000)]
    data = snapshot_bytes(values, epoch=2, last_contained_timestamp=0)
    infos = scan_batches(data, strict=False)
    assert len(infos) > 3
    assert [r.value for rs in iter_snapshot_batches(data) for r in rs] == values
    no_footer = data[: infos[-1].position]
    with pytest.raises(SnapshotFormatError, match="SNAPSHOT_FOOTER"):
        list(iter_snapshot_batches(no_footer))
    flipped = bytearray(data)
    flipped[infos[1].position + 100] ^= 1
    with pytest.raises(Exception, match="CRC"):
        list(iter_snapshot_batches(flipped))


topic_ids = st.sampled_from([bytes([i]) * 16 for i in range(1, 5)])
broker_ids = st.integers(0, 4)
replica_lists = st.lists(broker_ids, max_size=4, unique=True)
names = st.sampled_from(["a", "b", "c", "d"])
values = st.one_of(st.none(), st.text(max_size=5))


def topics(draw: st.DrawFn) -> MetadataRecord:
    topic_id = draw(topic_ids)
    return TopicRecord(name="t" + topic_id.hex()[:2], topic_id=topic_id)


records = st.one_of(
    st.builds(
        RegisterBrokerRecord,
        broker_id=broker_ids,
        broker_epoch=st.integers(0, 100),
        incarnation_id=st.binary(min_size=16, max_size=16),
        end_points=st.lists(
            st.builds(BrokerEndpoint, name=names, host=names, port=st.integers(1, 65535)),
            max_size=2,
        ),
        rack=st.one_of(st.none(), names),
        fenced=st.booleans(),
        in_controlled_shutdown=st.booleans(),
    ),
    st.builds(
        BrokerRegistrationChangeRecord,
        broker_id=broker_ids,
        fenced=st.sampled_from([-1, 0, 1]),
        in_controlled_shutdown=st.sampled_from([0, 1]),
    ),
    st.builds(FenceBrokerRecord, id=broker_ids),
    st.builds(UnfenceBrokerRecord, id=broker_ids),
    st.builds(UnregisterBrokerRecord, broker_id=broker_ids),
    st.composite(topics)(),
    st.builds(RemoveTopicRecord, topic_id=topic_ids),
    st.builds(
        PartitionRecord,
        partition_id=st.integers(0, 3),
        topic_id=topic_ids,
        replicas=replica_lists,
        isr=replica_lists,
        removing_replicas=replica_lists,
        adding_replicas=replica_lists,
        leader=st.integers(-1, 4),
        leader_epoch=st.integers(0, 9),
        partition_epoch=st.integers(0, 9),
    ),
    st.builds(
        PartitionChangeRecord,
        partition_id=st.integers(0, 3),
        topic_id=topic_ids,
        isr=st.one_of(st.none(), replica_lists),
        leader=st.integers(-2, 4),
        replicas=st.one_of(st.none(), replica_lists),
        removing_replicas=st.one_of(st.none(), replica_lists),
        adding_replicas=st.one_of(st.none(), replica_lists),
    ),
    st.builds(
        ConfigRecord,
        resource_type=st.sampled_from([TOPIC_RESOURCE, BROKER_RESOURCE]),
        resource_name=st.sampled_from(["", "1", "t01", "t02", "t03"]),
        name=names,
        value=values,
    ),
    st.builds(ProducerIdsRecord, broker_id=broker_ids, next_producer_id=st.integers(0, 10**6)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(records, min_size=1, max_size=8), max_size=12))
def test_any_image_replays_from_its_records(batches: list[list[MetadataRecord]]) -> None:
    image = replay([(batch, i) for i, batch in enumerate(batches)])
    assert round_trip(image) == without_empty_broker_configs(image)
    data = encode_snapshot(image, epoch=1, last_timestamp=0)
    assert [encode_metadata_record(r) for r in read_snapshot_records(data)] == [
        encode_metadata_record(r) for r in image_to_records(image)
    ]
