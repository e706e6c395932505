"""A metadata image as the records that rebuild it: the body of a KRaft snapshot.

Replaying `image_to_records(image)` onto an empty image gives `image` back (its
`cluster_id`, which comes from `meta.properties`, and the log offset aside): brokers,
topics with their configs and partitions, broker and group configs, ACLs, SCRAM
credentials, client quotas, finalized features and the next producer id. A
config resource whose every key was deleted (an empty mapping) has no record, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Iterator

from moldau.metadata.image import BROKER_RESOURCE, GROUP_RESOURCE, TOPIC_RESOURCE, MetadataImage
from moldau.metadata.records import (
    BrokerEndpoint,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
)

NO_BROKER = -1


def image_to_records(image: MetadataImage) -> list[MetadataRecord]:
    return list(_records(image))


def _records(image: MetadataImage) -> Iterator[MetadataRecord]:
    for name, level in image.features.items():  # first, as in Kafka's snapshots
        yield FeatureLevelRecord(name=name, feature_level=level)
    for broker in image.brokers.values():
        yield RegisterBrokerRecord(
            broker_id=broker.broker_id,
            incarnation_id=broker.incarnation_id,
            broker_epoch=broker.epoch,
            end_points=[
                BrokerEndpoint(name=e.listener, host=e.host, port=e.port) for e in broker.endpoints
            ],
            rack=broker.rack,
            fenced=broker.fenced,
            in_controlled_shutdown=broker.in_controlled_shutdown,
        )
    for topic in image.topics.values():
        yield TopicRecord(name=topic.name, topic_id=topic.topic_id)
        for key, value in topic.configs.items():
            yield ConfigRecord(
                resource_type=TOPIC_RESOURCE, resource_name=topic.name, name=key, value=value
            )
        for p in topic.partitions.values():
            yield PartitionRecord(
                partition_id=p.partition_id,
                topic_id=topic.topic_id,
                replicas=list(p.replicas),
                isr=list(p.isr),
                removing_replicas=list(p.removing_replicas),
                adding_replicas=list(p.adding_replicas),
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
            )
    for name, configs in image.broker_configs.items():
        for key, value in configs.items():
            yield ConfigRecord(
                resource_type=BROKER_RESOURCE, resource_name=name, name=key, value=value
            )
    for name, configs in image.group_configs.items():
        for key, value in configs.items():
            yield ConfigRecord(
                resource_type=GROUP_RESOURCE, resource_name=name, name=key, value=value
            )
    yield from image.security.records()  # ACLs, SCRAM credentials, client quotas
    if image.next_producer_id:
        yield ProducerIdsRecord(
            broker_id=NO_BROKER, broker_epoch=-1, next_producer_id=image.next_producer_id
        )
