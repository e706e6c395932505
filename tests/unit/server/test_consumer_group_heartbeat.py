"""The ConsumerGroupHeartbeat handler's view of the metadata image: topics with their
replicas' racks, which the coordinator's assignors use to keep members on their rack."""

from __future__ import annotations

from moldau.metadata.image import MetadataImage
from moldau.metadata.records import (
    BrokerEndpoint,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from moldau.server.image_topics import ImageTopics

T = b"\x07" * 16


def image(racks: dict[int, str | None]) -> MetadataImage:
    brokers = [
        RegisterBrokerRecord(
            broker_id=b,
            end_points=[BrokerEndpoint(name="PLAINTEXT", host="h", port=b)],
            rack=rack,
            fenced=False,
        )
        for b, rack in racks.items()
    ]
    partitions = [
        PartitionRecord(partition_id=p, topic_id=T, replicas=replicas, isr=replicas, leader=p + 1)
        for p, replicas in enumerate([[1, 2], [2, 3], [3]])
    ]
    return MetadataImage().apply([*brokers, TopicRecord(name="t", topic_id=T), *partitions])


def test_partitions_carry_their_replicas_racks() -> None:
    topic = ImageTopics(image({1: "a", 2: "b", 3: None}))["t"]
    assert (topic.topic_id, topic.num_partitions) == (T, 3)
    assert topic.partition_racks == (frozenset({"a", "b"}), frozenset({"b"}), frozenset())


def test_without_broker_racks_there_are_none_to_compute() -> None:
    assert ImageTopics(image({1: None, 2: None, 3: None}))["t"].partition_racks == ()


def test_one_view_per_image_topics_so_regex_matches_are_cached() -> None:
    first = image({1: "a", 2: "b", 3: "c"})
    view = ImageTopics.of(first)
    assert ImageTopics.of(first) is view
    grown = first.apply([TopicRecord(name="u", topic_id=b"\x08" * 16)])
    assert ImageTopics.of(grown) is not view and "u" in ImageTopics.of(grown)
