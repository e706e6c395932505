"""Metadata images: deltas copy only what changed, and what a change means for a node."""

from __future__ import annotations

from moldau.metadata.image import NO_LEADER_CHANGE, MetadataImage
from moldau.metadata.publisher import local_changes
from moldau.metadata.records import (
    BrokerEndpoint,
    ConfigRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)

A, B = b"a" * 16, b"b" * 16


def part(topic_id: bytes, p: int, replicas: list[int], leader: int) -> PartitionRecord:
    return PartitionRecord(
        partition_id=p,
        topic_id=topic_id,
        replicas=replicas,
        isr=replicas,
        leader=leader,
        leader_epoch=0,
        partition_epoch=0,
    )


def change(
    topic_id: bytes, p: int, leader: int = NO_LEADER_CHANGE, **fields
) -> PartitionChangeRecord:
    return PartitionChangeRecord(partition_id=p, topic_id=topic_id, leader=leader, **fields)


def config(resource_type: int, resource: str, name: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(resource_type=resource_type, resource_name=resource, name=name, value=value)


def base() -> MetadataImage:
    return MetadataImage().apply(
        [
            TopicRecord(name="a", topic_id=A),
            part(A, 0, [1, 2], 1),
            part(A, 1, [2, 1], 2),
            TopicRecord(name="b", topic_id=B),
            part(B, 0, [3], 3),
        ],
        offset=4,
    )


def test_untouched_topics_and_partitions_keep_their_objects() -> None:
    old = base()
    new = old.apply([part(B, 1, [1], 1)], offset=5)
    assert new.topics["a"] is old.topics["a"]
    assert new.topics["b"].partitions[0] is old.topics["b"].partitions[0]
    assert sorted(new.topics["b"].partitions) == [0, 1]
    assert (old.offset, new.offset) == (4, 5)


def test_many_partitions_in_one_batch() -> None:
    old = base()
    new = old.apply([part(B, p, [1], 1) for p in range(1, 10_001)])
    assert len(new.topics["b"].partitions) == 10_001
    assert len(old.topics["b"].partitions) == 1  # the old image is unchanged


def test_partition_change_bumps_epochs_as_kafka_does() -> None:
    image = base()
    isr_only = image.apply([change(A, 0, isr=[1])])
    p = isr_only.topics["a"].partitions[0]
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (1, (1,), 0, 1)
    new_leader = isr_only.apply([change(A, 0, 2, isr=[2])])
    p = new_leader.topics["a"].partitions[0]
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (2, (2,), 1, 2)


def test_configs_brokers_and_removal() -> None:
    image = base().apply(
        [
            config(2, "a", "retention.ms", "5"),
            config(4, "", "log.retention.ms", "7"),
            RegisterBrokerRecord(
                broker_id=1,
                end_points=[BrokerEndpoint(name="PLAINTEXT", host="h", port=1)],
                rack="r1",
                fenced=False,
            ),
            FenceBrokerRecord(id=1),
            RemoveTopicRecord(topic_id=B),
        ]
    )
    assert image.topics["a"].configs == {"retention.ms": "5"}
    assert image.broker_configs[""] == {"log.retention.ms": "7"}
    assert image.brokers[1].fenced and image.brokers[1].rack == "r1"
    assert "b" not in image.topics and B not in image.topics_by_id
    again = image.apply([TopicRecord(name="b", topic_id=b"c" * 16)])
    assert again.topics["b"].partitions == {} and again.topics["b"].configs == {}


def test_local_changes() -> None:
    old = base()
    new = old.apply(
        [
            change(A, 1, 1),  # node 1 takes over a-1
            RemoveTopicRecord(topic_id=B),
            config(2, "a", "retention.ms", "5"),
        ]
    )
    for_1 = local_changes(old, new, 1)
    assert list(for_1.leaders) == [("a", 1)] and not for_1.followers
    assert for_1.config_changed == {"a"}
    for_3 = local_changes(old, new, 3)
    assert for_3.deletes == {("b", 0): B}
    for_2 = local_changes(old, new, 2)
    assert list(for_2.followers) == [("a", 1)]
    assert not local_changes(new, new, 1)
