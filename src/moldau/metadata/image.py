"""The metadata image: cluster state as the fold of the metadata log.

Images are never mutated. A :class:`MetadataDelta` replays records on top of an image and
builds the next one, copying only what changed: a topic that no record touched keeps its
``TopicImage`` object, a partition keeps its ``PartitionImage``. So applying a batch costs
what it changed (10,000 new partitions are one dict build, not 10,000 copies), readers
get a consistent snapshot without locks, and "what changed" is an identity check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from moldau.metadata.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
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
from moldau.metadata.security import SECURITY_RECORDS, SecurityDelta, SecurityImage
from moldau.metadata.topics import is_internal

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32  # per-group configs (Kafka 4's GroupConfig)
NO_LEADER = -1
NO_LEADER_CHANGE = -2  # PartitionChangeRecord.leader default: keep the leader

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PartitionImage:
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()

    def change(self, rec: PartitionChangeRecord) -> PartitionImage:
        """Kafka's PartitionRegistration.merge: every change bumps the partition epoch; a
        new leader (or a reassignment completing) bumps the leader epoch too."""
        leader = self.leader if rec.leader == NO_LEADER_CHANGE else rec.leader
        replicas = self.replicas if rec.replicas is None else tuple(rec.replicas)
        new_epoch = leader != self.leader or replicas != self.replicas
        return PartitionImage(
            self.partition_id,
            replicas,
            self.isr if rec.isr is None else tuple(rec.isr),
            leader,
            self.leader_epoch + 1 if new_epoch else self.leader_epoch,
            self.partition_epoch + 1,
            self.removing_replicas
            if rec.removing_replicas is None
            else tuple(rec.removing_replicas),
            self.adding_replicas if rec.adding_replicas is None else tuple(rec.adding_replicas),
        )


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: bytes
    partitions: Mapping[int, PartitionImage] = field(default_factory=lambda: _EMPTY)
    configs: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    @property
    def is_internal(self) -> bool:
        return is_internal(self.name)


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class BrokerImage:
    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    fenced: bool = False
    epoch: int = 0
    incarnation_id: bytes = b""
    in_controlled_shutdown: bool = False

    @property
    def alive(self) -> bool:
        """Eligible to lead and to be in an ISR: unfenced and not shutting down."""
        return not self.fenced and not self.in_controlled_shutdown

    def endpoint(self, listener: str | None = None) -> Endpoint | None:
        """The endpoint of ``listener`` (the first one when None)."""
        for e in self.endpoints:
            if listener is None or e.listener == listener:
                return e
        return None

    def address(self, listener: str | None) -> tuple[str, int] | None:
        """Where other brokers reach this one: its ``listener`` endpoint, else its first."""
        e = self.endpoint(listener) or self.endpoint()
        return (e.host, e.port) if e is not None else None


@dataclass(frozen=True, slots=True)
class MetadataImage:
    cluster_id: str = ""
    topics: Mapping[str, TopicImage] = field(default_factory=lambda: _EMPTY)
    topics_by_id: Mapping[bytes, str] = field(default_factory=lambda: _EMPTY)
    brokers: Mapping[int, BrokerImage] = field(default_factory=lambda: _EMPTY)
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    group_configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    next_producer_id: int = 0
    offset: int = -1  # last metadata log offset applied
    security: SecurityImage = field(default_factory=SecurityImage)  # ACLs, SCRAM, quotas
    features: Mapping[str, int] = field(default_factory=lambda: _EMPTY)  # finalized levels

    def apply(self, records: Iterable[MetadataRecord], offset: int = -1) -> MetadataImage:
        delta = MetadataDelta(self)
        for rec in records:
            delta.replay(rec)
        return delta.apply(offset)

    def with_cluster_id(self, cluster_id: str) -> MetadataImage:
        """The cluster id is not a record: it comes from ``meta.properties``."""
        return replace(self, cluster_id=cluster_id)

    def partition(self, topic: str, partition: int) -> PartitionImage | None:
        t = self.topics.get(topic)
        return None if t is None else t.partitions.get(partition)


class MetadataDelta:
    """Records replayed on top of ``image``; :meth:`apply` builds the next image."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._topics: dict[str, TopicImage | None] = {}  # None: removed
        self._partitions: dict[str, dict[int, PartitionImage]] = {}
        self._configs: dict[tuple[int, str], dict[str, str]] = {}
        self._brokers: dict[int, BrokerImage | None] = {}  # None: unregistered
        self._next_producer_id = image.next_producer_id
        self._ids: dict[bytes, str | None] = {}
        self._security = SecurityDelta(image.security)
        self._features: dict[str, int] | None = None

    # -- reading through the delta -------------------------------------------------
    def topic(self, name: str) -> TopicImage | None:
        if name in self._topics:
            return self._topics[name]
        return self.image.topics.get(name)

    def topic_name(self, topic_id: bytes) -> str | None:
        if topic_id in self._ids:
            return self._ids[topic_id]
        return self.image.topics_by_id.get(topic_id)

    def _partitions_of(self, name: str) -> dict[int, PartitionImage]:
        parts = self._partitions.get(name)
        if parts is None:
            topic = self.topic(name)
            parts = self._partitions[name] = dict(topic.partitions) if topic else {}
        return parts

    def _broker(self, broker_id: int) -> BrokerImage | None:
        if broker_id in self._brokers:
            return self._brokers[broker_id]
        return self.image.brokers.get(broker_id)

    # -- replay --------------------------------------------------------------------
    def replay(self, rec: MetadataRecord) -> None:
        if isinstance(rec, TopicRecord):
            self._topics[rec.name] = TopicImage(rec.name, rec.topic_id)
            self._partitions[rec.name] = {}
            self._configs.pop((TOPIC_RESOURCE, rec.name), None)
            self._ids[rec.topic_id] = rec.name
        elif isinstance(rec, PartitionRecord):
            name = self.topic_name(rec.topic_id)
            if name is not None:
                self._partitions_of(name)[rec.partition_id] = PartitionImage(
                    rec.partition_id,
                    tuple(rec.replicas),
                    tuple(rec.isr),
                    rec.leader,
                    rec.leader_epoch,
                    rec.partition_epoch,
                    tuple(rec.removing_replicas),
                    tuple(rec.adding_replicas),
                )
        elif isinstance(rec, PartitionChangeRecord):
            name = self.topic_name(rec.topic_id)
            if name is not None:
                parts = self._partitions_of(name)
                current = parts.get(rec.partition_id)
                if current is not None:
                    parts[rec.partition_id] = current.change(rec)
        elif isinstance(rec, RemoveTopicRecord):
            name = self.topic_name(rec.topic_id)
            if name is not None:
                self._topics[name] = None
                self._partitions.pop(name, None)
                self._configs.pop((TOPIC_RESOURCE, name), None)
                self._ids[rec.topic_id] = None
        elif isinstance(rec, ConfigRecord):
            self._replay_config(rec)
        elif isinstance(rec, ProducerIdsRecord):
            self._next_producer_id = rec.next_producer_id
        elif isinstance(rec, RegisterBrokerRecord):
            self._brokers[rec.broker_id] = BrokerImage(
                rec.broker_id,
                tuple(Endpoint(e.name, e.host, e.port) for e in rec.end_points),
                rec.rack or None,
                rec.fenced,
                rec.broker_epoch,
                rec.incarnation_id,
                rec.in_controlled_shutdown,
            )
        elif isinstance(rec, BrokerRegistrationChangeRecord):
            broker = self._broker(rec.broker_id)
            if broker is not None:
                # fenced: 1 fence, -1 unfence, 0 no change; in_controlled_shutdown: 1 yes
                fenced = broker.fenced if rec.fenced == 0 else rec.fenced == 1
                shutting = broker.in_controlled_shutdown or rec.in_controlled_shutdown == 1
                self._brokers[rec.broker_id] = replace(
                    broker, fenced=fenced, in_controlled_shutdown=shutting
                )
        elif isinstance(rec, UnregisterBrokerRecord):
            if self._broker(rec.broker_id) is not None:
                self._brokers[rec.broker_id] = None
        elif isinstance(rec, FenceBrokerRecord | UnfenceBrokerRecord):
            broker = self._broker(rec.id)
            if broker is not None:
                fenced = isinstance(rec, FenceBrokerRecord)
                self._brokers[rec.id] = replace(broker, fenced=fenced)
        elif isinstance(rec, SECURITY_RECORDS):
            self._security.replay(rec)
        elif isinstance(rec, FeatureLevelRecord):
            if self._features is None:
                self._features = dict(self.image.features)
            if rec.feature_level > 0:
                self._features[rec.name] = rec.feature_level
            else:  # level 0 removes the feature
                self._features.pop(rec.name, None)

    def _replay_config(self, rec: ConfigRecord) -> None:
        key = (rec.resource_type, rec.resource_name)
        configs = self._configs.get(key)
        if configs is None:
            if rec.resource_type == TOPIC_RESOURCE:
                topic = self.topic(rec.resource_name)
                if topic is None:
                    return
                current: Mapping[str, str] = topic.configs
            elif rec.resource_type == GROUP_RESOURCE:
                current = self.image.group_configs.get(rec.resource_name, _EMPTY)
            else:
                current = self.image.broker_configs.get(rec.resource_name, _EMPTY)
            configs = self._configs[key] = dict(current)
        if rec.value is None:
            configs.pop(rec.name, None)
        else:
            configs[rec.name] = rec.value

    # -- the next image ------------------------------------------------------------
    def apply(self, offset: int = -1) -> MetadataImage:
        image = self.image
        topics = dict(image.topics) if self._topics or self._partitions else None
        by_id = dict(image.topics_by_id) if self._ids else None
        if topics is not None:
            for name, topic in self._topics.items():
                if topic is None:
                    topics.pop(name, None)
                else:
                    topics[name] = topic
            for name, parts in self._partitions.items():
                topic = topics.get(name)
                if topic is not None:
                    topics[name] = replace(topic, partitions=MappingProxyType(parts))
        broker_configs = None
        group_configs = None
        for (rtype, rname), configs in self._configs.items():
            frozen = MappingProxyType(configs)
            if rtype == TOPIC_RESOURCE:
                if topics is None:
                    topics = dict(image.topics)
                topic = topics.get(rname)
                if topic is not None:
                    topics[rname] = replace(topic, configs=frozen)
            elif rtype == GROUP_RESOURCE:
                if group_configs is None:
                    group_configs = dict(image.group_configs)
                if configs:
                    group_configs[rname] = frozen
                else:
                    group_configs.pop(rname, None)
            else:
                if broker_configs is None:
                    broker_configs = dict(image.broker_configs)
                broker_configs[rname] = frozen
        if by_id is not None:
            for topic_id, id_name in self._ids.items():
                if id_name is None:
                    by_id.pop(topic_id, None)
                else:
                    by_id[topic_id] = id_name
        brokers = None
        if self._brokers:
            brokers = dict(image.brokers)
            for broker_id, broker in self._brokers.items():
                if broker is None:
                    brokers.pop(broker_id, None)
                else:
                    brokers[broker_id] = broker
        return MetadataImage(
            cluster_id=image.cluster_id,
            topics=image.topics if topics is None else MappingProxyType(topics),
            topics_by_id=image.topics_by_id if by_id is None else MappingProxyType(by_id),
            brokers=image.brokers if brokers is None else MappingProxyType(brokers),
            broker_configs=(
                image.broker_configs if broker_configs is None else MappingProxyType(broker_configs)
            ),
            group_configs=(
                image.group_configs if group_configs is None else MappingProxyType(group_configs)
            ),
            next_producer_id=self._next_producer_id,
            offset=max(offset, image.offset),
            security=self._security.apply(),
            features=image.features if self._features is None else MappingProxyType(self._features),
        )
