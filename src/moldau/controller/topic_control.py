"""The controller's decisions: validate an admin operation against the current image and
answer with the metadata records that carry it out (or an error).

Pure: nothing here writes or waits. The broker appends the records to the metadata log
and applies them; a Raft quorum can later replicate the same records unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from moldau.config.group import validate_group_configs
from moldau.config.topic import LogConfig, validate_remote_storage
from moldau.controller.configs import Changes, apply_changes
from moldau.controller.placement import place
from moldau.ids import SYSTEM_IDS, IdSource
from moldau.metadata.image import BROKER_RESOURCE, GROUP_RESOURCE, TOPIC_RESOURCE, MetadataImage
from moldau.metadata.records import (
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from moldau.metadata.topics import topic_name_error
from moldau.protocol.errors import ErrorCode, KafkaError

PRODUCER_ID_BLOCK = 1000


@dataclass
class Outcome:
    """An operation's answer: an error (code + message) or the records to commit."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    records: list[MetadataRecord] = field(default_factory=list)


BrokerConfigCheck = Callable[[str, str | None, bool], str | None]
"""Why a dynamic broker config cannot be set to a value for one broker (True) or the
cluster default (False); None: it can."""


def _no_dynamic_broker_configs(key: str, value: str | None, per_broker: bool) -> str | None:
    return f"Cannot update these configs dynamically: Set({key})"


class TopicControl:
    """Decides topics and their partitions, topic and broker configs, and producer-id
    blocks; ``broker_props`` supplies topic config defaults."""

    def __init__(
        self,
        node_id: int,
        broker_props: Mapping[str, str],
        default_partitions: int,
        check_broker_config: BrokerConfigCheck = _no_dynamic_broker_configs,
        default_replication_factor: int = 1,
        max_broker_partitions: int = 200_000,
        remote_storage_system_enable: bool = False,
        ids: IdSource = SYSTEM_IDS,
        group_bounds: Mapping[str, str] | None = None,
    ):
        self.node_id = node_id
        self.broker_props = broker_props
        self.default_partitions = default_partitions
        self.default_replication_factor = default_replication_factor
        self.max_broker_partitions = max_broker_partitions
        self.check_broker_config = check_broker_config
        self.remote_storage_system_enable = remote_storage_system_enable
        self.ids = ids  # topic ids
        self.group_bounds = group_bounds or {}  # group.*.min/max.* keys bounding group configs

    def validate_topic_configs(
        self, configs: Mapping[str, str], existing: Mapping[str, str] | None = None
    ) -> LogConfig:
        """The topic's effective config; InvalidConfigError (INVALID_CONFIG) names a bad
        value, and tiered storage settings are checked as Kafka checks them."""
        config = LogConfig.from_props(configs, self.broker_props)
        validate_remote_storage(
            config,
            system_enabled=self.remote_storage_system_enable,
            was_enabled=(existing or {}).get("remote.storage.enable", "").lower() == "true",
        )
        return config

    def create_topic(
        self,
        image: MetadataImage,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        assignments: Mapping[int, list[int]] | None = None,
    ) -> Outcome:
        if (msg := topic_name_error(name)) is not None:
            return Outcome(ErrorCode.INVALID_TOPIC_EXCEPTION, msg)
        if name in image.topics:
            return Outcome(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                return Outcome(
                    ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            error = _check_assignment(image, assignments)
            if error is not None:
                return Outcome(ErrorCode.INVALID_REPLICA_ASSIGNMENT, error)
            replicas = [list(assignments[p]) for p in sorted(assignments)]
        else:
            if num_partitions == -1:
                num_partitions = self.default_partitions
            if num_partitions <= 0:
                return Outcome(
                    ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
                )
            if replication_factor == -1:
                replication_factor = self.default_replication_factor
            if replication_factor <= 0:
                return Outcome(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    "Replication factor must be larger than 0.",
                )
            try:
                self._check_room(image, num_partitions * replication_factor)
                replicas = place(
                    live_racks(image), num_partitions, replication_factor, _placed(image)
                )
            except KafkaError as e:
                return Outcome(e.code, str(e))
        configs = dict(configs or {})
        try:
            self.validate_topic_configs(configs)
        except KafkaError as e:
            return Outcome(ErrorCode.INVALID_CONFIG, str(e))
        topic_id = self.ids.uuid4().bytes
        records: list[MetadataRecord] = [TopicRecord(name=name, topic_id=topic_id)]
        records += [
            ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=name, name=k, value=v)
            for k, v in sorted(configs.items())
        ]
        records += _partitions(topic_id, 0, replicas)
        return Outcome(records=records)

    def _check_room(self, image: MetadataImage, new_replicas: int) -> None:
        """``max.broker.partitions`` (KIP-578): refuse, before any work, a request whose
        replicas cannot fit on the live brokers, so no single request can swamp them."""
        live = live_racks(image)
        used = sum(len(p.replicas) for t in image.topics.values() for p in t.partitions.values())
        room = self.max_broker_partitions * len(live) - used
        if new_replicas > room:
            raise KafkaError(
                f"Adding {new_replicas} partition replicas would exceed the limit of "
                f"{self.max_broker_partitions} per broker (max.broker.partitions) on the "
                f"{len(live)} live broker(s), which hold {used} now.",
                ErrorCode.POLICY_VIOLATION,
            )

    def delete_topic(self, image: MetadataImage, name: str) -> Outcome:
        topic = image.topics.get(name)
        if topic is None:
            return Outcome(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )
        return Outcome(records=[RemoveTopicRecord(topic_id=topic.topic_id)])

    def create_partitions(self, image: MetadataImage, name: str, count: int) -> Outcome:
        topic = image.topics.get(name)
        if topic is None:
            return Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        current = len(topic.partitions)
        if count < current:
            return Outcome(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {current} partitions, which is higher than the "
                f"requested {count}.",
            )
        if count == current:
            return Outcome(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        factor = len(next(iter(topic.partitions.values())).replicas)
        try:
            self._check_room(image, (count - current) * factor)
            replicas = place(live_racks(image), count - current, factor, _placed(image))
        except KafkaError as e:
            return Outcome(e.code, str(e))
        return Outcome(records=_partitions(topic.topic_id, current, replicas))

    def alter_topic_configs(
        self, image: MetadataImage, name: str, changes: Changes, *, replace: bool
    ) -> Outcome:
        """Set (value) or delete (None) topic configs; ``replace`` drops keys not named."""
        topic = image.topics.get(name)
        if topic is None:
            return Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        new = apply_changes(topic.configs, changes, replace=replace)
        try:
            self.validate_topic_configs(new, topic.configs)
        except KafkaError as e:
            return Outcome(ErrorCode.INVALID_CONFIG, str(e))
        return Outcome(records=_config_records(TOPIC_RESOURCE, name, topic.configs, new))

    def alter_broker_configs(
        self, image: MetadataImage, name: str, changes: Changes, *, replace: bool
    ) -> Outcome:
        """Dynamic broker configs for broker ``name`` or, with "", the cluster default.
        Only the keys Kafka treats as dynamic can be set; the message names the others."""
        if name and not (name.isdigit() and int(name) >= 0):
            return Outcome(ErrorCode.INVALID_REQUEST, f"Invalid broker id: {name}")
        current = image.broker_configs.get(name, {})
        new = apply_changes(current, changes, replace=replace)
        refused = [
            msg
            for key in sorted(changes)
            if (msg := self.check_broker_config(key, changes[key], bool(name))) is not None
        ]
        if refused:
            return Outcome(ErrorCode.INVALID_REQUEST, "; ".join(refused))
        return Outcome(records=_config_records(BROKER_RESOURCE, name, current, new))

    def alter_group_configs(
        self, image: MetadataImage, name: str, changes: Changes, *, replace: bool
    ) -> Outcome:
        """Per-group configs (Kafka's GroupConfig); the group need not exist yet."""
        if not name:
            return Outcome(ErrorCode.INVALID_REQUEST, "Group name must not be empty.")
        current = image.group_configs.get(name, {})
        new = apply_changes(current, changes, replace=replace)
        try:
            validate_group_configs(new, self.group_bounds)
        except KafkaError as e:
            return Outcome(e.code, str(e))
        return Outcome(records=_config_records(GROUP_RESOURCE, name, current, new))

    def alter_configs_refused(self, resource_type: int) -> Outcome:
        return Outcome(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}.")

    def allocate_producer_ids(
        self, image: MetadataImage, broker_id: int | None = None
    ) -> tuple[range, Outcome]:
        """Reserve a block of producer ids; the record makes the reservation durable."""
        start = image.next_producer_id
        block = range(start, start + PRODUCER_ID_BLOCK)
        broker = self.node_id if broker_id is None else broker_id
        epoch = image.brokers[broker].epoch if broker in image.brokers else -1
        return block, Outcome(
            records=[
                ProducerIdsRecord(broker_id=broker, broker_epoch=epoch, next_producer_id=block.stop)
            ]
        )


def _config_records(
    resource_type: int, name: str, old: Mapping[str, str], new: Mapping[str, str]
) -> list[MetadataRecord]:
    records: list[MetadataRecord] = [
        ConfigRecord(resource_type=resource_type, resource_name=name, name=k, value=None)
        for k in old
        if k not in new
    ]
    records += [
        ConfigRecord(resource_type=resource_type, resource_name=name, name=k, value=v)
        for k, v in new.items()
        if old.get(k) != v
    ]
    return records


def live_racks(image: MetadataImage) -> dict[int, str | None]:
    """Brokers that may get new replicas (alive: unfenced, not shutting down)."""
    return {b.broker_id: b.rack for b in image.brokers.values() if b.alive}


def _placed(image: MetadataImage) -> int:
    """The cluster-wide leader cursor: how many partitions exist."""
    return sum(len(t.partitions) for t in image.topics.values())


def _check_assignment(image: MetadataImage, assignments: Mapping[int, list[int]]) -> str | None:
    if sorted(assignments) != list(range(len(assignments))):
        return "Replica assignments must name partitions 0..n-1"
    sizes = {len(r) for r in assignments.values()}
    if len(sizes) != 1 or 0 in sizes:
        return "All partitions must have the same, non-zero number of replicas"
    for partition, replicas in assignments.items():
        if len(set(replicas)) != len(replicas):
            return f"Duplicate brokers in the assignment of partition {partition}"
        unknown = [b for b in replicas if b not in image.brokers]
        if unknown:
            return f"Unknown broker(s) {unknown} in the assignment of partition {partition}"
    return None


def _partitions(topic_id: bytes, first: int, replicas: list[list[int]]) -> list[MetadataRecord]:
    return [
        PartitionRecord(
            partition_id=first + i,
            topic_id=topic_id,
            replicas=r,
            isr=r,
            leader=r[0],
            leader_epoch=0,
            partition_epoch=0,
        )
        for i, r in enumerate(replicas)
    ]
