"""The controller's decisions and the image they produce, driven without any IO."""

from __future__ import annotations

import base64

from moldau.controller.topic_control import PRODUCER_ID_BLOCK, TopicControl
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import RegisterBrokerRecord, decode_record, encode_record
from moldau.metadata.topics import topic_name_error
from moldau.protocol.errors import ErrorCode


def make() -> tuple[TopicControl, MetadataImage]:
    """A controller and the image of a one-broker cluster (broker 1, registered and live)."""
    broker = RegisterBrokerRecord(broker_id=1, fenced=False)
    return TopicControl(node_id=1, broker_props={}, default_partitions=3), MetadataImage().apply(
        [broker]
    )


def test_create_topic_records_build_the_image():
    c, image = make()
    outcome = c.create_topic(image, "orders", 4, 1, {"retention.ms": "1000"})
    assert outcome.error == ErrorCode.NONE
    image = image.apply(outcome.records, offset=7)
    topic = image.topics["orders"]
    assert sorted(topic.partitions) == [0, 1, 2, 3]
    assert all(p.leader == 1 and p.isr == (1,) for p in topic.partitions.values())
    assert topic.configs == {"retention.ms": "1000"}
    assert image.topics_by_id[topic.topic_id] == "orders"
    assert image.offset == 7


def test_default_partitions_and_errors():
    c, image = make()
    image = image.apply(c.create_topic(image, "a").records)
    assert len(image.topics["a"].partitions) == 3
    assert c.create_topic(image, "a").error == ErrorCode.TOPIC_ALREADY_EXISTS
    assert c.create_topic(image, "b", 0).error == ErrorCode.INVALID_PARTITIONS
    assert c.create_topic(image, "b", 1, 3).error == ErrorCode.INVALID_REPLICATION_FACTOR
    assert c.create_topic(image, "b", 1, 1, {"retention.ms": "x"}).error == ErrorCode.INVALID_CONFIG
    assert c.create_topic(image, "b", 1, 1, {"no.such": "1"}).error == ErrorCode.INVALID_CONFIG
    assert c.create_topic(image, "bad name").error == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_topic_name_rules():
    assert topic_name_error("a.b_c-9") is None
    assert topic_name_error("") and topic_name_error("..") and topic_name_error("x" * 250)
    assert topic_name_error("a/b")


def test_delete_and_recreate_gets_a_new_id():
    c, image = make()
    image = image.apply(c.create_topic(image, "t", 1).records)
    old_id = image.topics["t"].topic_id
    image = image.apply(c.delete_topic(image, "t").records)
    assert "t" not in image.topics and old_id not in image.topics_by_id
    assert c.delete_topic(image, "t").error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    image = image.apply(c.create_topic(image, "t", 1).records)
    assert image.topics["t"].topic_id != old_id


def test_create_partitions_only_grows():
    c, image = make()
    image = image.apply(c.create_topic(image, "t", 2).records)
    assert c.create_partitions(image, "t", 2).error == ErrorCode.INVALID_PARTITIONS
    assert c.create_partitions(image, "t", 1).error == ErrorCode.INVALID_PARTITIONS
    image = image.apply(c.create_partitions(image, "t", 5).records)
    assert sorted(image.topics["t"].partitions) == [0, 1, 2, 3, 4]


def test_alter_configs_replace_and_incremental():
    c, image = make()
    image = image.apply(c.create_topic(image, "t", 1, 1, {"retention.ms": "1000"}).records)
    image = image.apply(
        c.alter_topic_configs(image, "t", {"segment.bytes": "100000"}, replace=False).records
    )
    assert image.topics["t"].configs == {"retention.ms": "1000", "segment.bytes": "100000"}
    image = image.apply(
        c.alter_topic_configs(image, "t", {"retention.ms": None}, replace=False).records
    )
    assert image.topics["t"].configs == {"segment.bytes": "100000"}
    image = image.apply(
        c.alter_topic_configs(image, "t", {"cleanup.policy": "compact"}, replace=True).records
    )
    assert image.topics["t"].configs == {"cleanup.policy": "compact"}
    bad = c.alter_topic_configs(image, "t", {"segment.bytes": "-5"}, replace=False)
    assert bad.error == ErrorCode.INVALID_CONFIG


def test_producer_id_blocks_never_overlap():
    c, image = make()
    first, outcome = c.allocate_producer_ids(image)
    image = image.apply(outcome.records)
    second, _ = c.allocate_producer_ids(image)
    assert len(first) == PRODUCER_ID_BLOCK and second.start == first.stop


def test_records_survive_encoding():
    c, image = make()
    records = c.create_topic(image, "t", 2, 1, {"retention.ms": "5"}).records
    decoded = [decode_record(*encode_record(r)) for r in records]
    assert decoded == records
    assert image.apply(decoded).topics["t"].configs == {"retention.ms": "5"}


def test_legacy_json_records_are_read() -> None:
    """Data dirs of the first releases stored JSON records (key = type name)."""
    topic_id = b"\x01" * 16
    encoded = '{"$b": "' + base64.b64encode(topic_id).decode() + '"}'
    legacy = [
        (b"ClusterIdRecord", b'{"cluster_id": "abc"}'),
        (b"TopicRecord", ('{"name": "t", "topic_id": ' + encoded + "}").encode()),
        (
            b"PartitionRecord",
            (
                '{"topic_id": ' + encoded + ', "partition_id": 0, "replicas": [1], "isr": [1], '
                '"leader": 1, "leader_epoch": 0, "partition_epoch": 0}'
            ).encode(),
        ),
        (
            b"RegisterBrokerRecord",
            b'{"broker_id": 1, "endpoints": [{"name": "PLAINTEXT", "host": "h", "port": 9}], '
            b'"rack": null}',
        ),
    ]
    records = [r for r in (decode_record(k, v) for k, v in legacy) if r is not None]
    image = MetadataImage().apply(records)
    assert image.topics["t"].partitions[0].leader == 1
    assert image.brokers[1].endpoint().port == 9 and not image.brokers[1].fenced
