"""The metadata image: cluster state as the fold of the metadata log.

Images are never mutated; applying records yields a new image that shares untouched
parts with the old one, so request handlers can read a consistent snapshot without locks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from moldau.controller.records import (
    ClusterIdRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


@dataclass(frozen=True)
class PartitionImage:
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int


@dataclass(frozen=True)
class TopicImage:
    name: str
    topic_id: bytes
    partitions: Mapping[int, PartitionImage] = field(default_factory=dict)
    configs: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


@dataclass(frozen=True)
class BrokerImage:
    broker_id: int
    endpoints: tuple[tuple[str, str, int], ...]  # (listener name, host, port)
    rack: str | None


@dataclass(frozen=True)
class MetadataImage:
    cluster_id: str = ""
    topics: Mapping[str, TopicImage] = field(default_factory=dict)
    topics_by_id: Mapping[bytes, str] = field(default_factory=dict)
    brokers: Mapping[int, BrokerImage] = field(default_factory=dict)
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    next_producer_id: int = 0
    offset: int = -1  # last metadata log offset applied

    def apply(self, records: list[MetadataRecord], offset: int = -1) -> MetadataImage:
        topics = dict(self.topics)
        by_id = dict(self.topics_by_id)
        brokers = dict(self.brokers)
        broker_configs = dict(self.broker_configs)
        image = self
        for rec in records:
            if isinstance(rec, TopicRecord):
                topics[rec.name] = TopicImage(rec.name, rec.topic_id, MappingProxyType({}))
                by_id[rec.topic_id] = rec.name
            elif isinstance(rec, PartitionRecord):
                topic = topics[by_id[rec.topic_id]]
                parts = dict(topic.partitions)
                parts[rec.partition_id] = PartitionImage(
                    rec.partition_id,
                    tuple(rec.replicas),
                    tuple(rec.isr),
                    rec.leader,
                    rec.leader_epoch,
                    rec.partition_epoch,
                )
                topics[topic.name] = replace(topic, partitions=MappingProxyType(parts))
            elif isinstance(rec, RemoveTopicRecord):
                name = by_id.pop(rec.topic_id, None)
                if name is not None:
                    topics.pop(name, None)
            elif isinstance(rec, ConfigRecord):
                if rec.resource_type == TOPIC_RESOURCE:
                    topic = topics.get(rec.resource_name)
                    if topic is None:
                        continue
                    topics[topic.name] = replace(
                        topic, configs=_set(topic.configs, rec.name, rec.value)
                    )
                else:
                    current = broker_configs.get(rec.resource_name, {})
                    broker_configs[rec.resource_name] = _set(current, rec.name, rec.value)
            elif isinstance(rec, ProducerIdsRecord):
                image = replace(image, next_producer_id=rec.next_producer_id)
            elif isinstance(rec, ClusterIdRecord):
                image = replace(image, cluster_id=rec.cluster_id)
            elif isinstance(rec, RegisterBrokerRecord):
                brokers[rec.broker_id] = BrokerImage(
                    rec.broker_id,
                    tuple((e["name"], e["host"], e["port"]) for e in rec.endpoints),
                    rec.rack,
                )
        return replace(
            image,
            topics=MappingProxyType(topics),
            topics_by_id=MappingProxyType(by_id),
            brokers=MappingProxyType(brokers),
            broker_configs=MappingProxyType(broker_configs),
            offset=max(offset, self.offset),
        )


def _set(configs: Mapping[str, str], key: str, value: str | None) -> Mapping[str, str]:
    out = dict(configs)
    if value is None:
        out.pop(key, None)
    else:
        out[key] = value
    return MappingProxyType(out)
