"""The share coordinator as the handlers see it (Kafka's ShareCoordinatorService).

Routes each share-partition key to its ``__share_group_state`` partition with Kafka's
partitioner (Java's ``hashCode`` of ``"groupId:topicId:partition"``, the topic id as
Kafka prints it) and runs the pure :class:`ShareCoordinatorShard` of that partition on
the coordinator runtime, so a write is answered only once its record is committed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from moldau.clock import Scheduler
from moldau.config.broker import BrokerConfig
from moldau.coordinator.effects import Effects
from moldau.coordinator.group.partitioning import java_string_hash
from moldau.coordinator.runtime import CoordinatorRuntime
from moldau.coordinator.share_state.shard import (
    ShareCoordinatorShard,
    ShareGroupOffset,
    ShareKey,
    ShareStateLoader,
    WriteState,
)
from moldau.metadata.topics import SHARE_STATE_TOPIC
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.replica_manager import ReplicaManager
from moldau.storage.partition_metadata import topic_id_str

log = logging.getLogger(__name__)

__all__ = ["SHARE_STATE_TOPIC", "ShareCoordinatorConfig", "ShareCoordinatorService"]


@dataclass(frozen=True)
class ShareCoordinatorConfig:
    """Kafka's ``share.coordinator.*`` broker settings."""

    num_partitions: int = 50
    records_per_snapshot: int = 500
    write_timeout_ms: int = 5_000

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ShareCoordinatorConfig:
        return cls(
            config.int("share.coordinator.state.topic.num.partitions"),
            config.int("share.coordinator.snapshot.update.records.per.snapshot"),
            config.int("share.coordinator.write.timeout.ms"),
        )


def partition_for(key: ShareKey, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(SharePartitionKey.asCoordinatorKey().hashCode()) % n``."""
    group_id, topic_id, partition = key
    coordinator_key = f"{group_id}:{topic_id_str(topic_id)}:{partition}"
    return (java_string_hash(coordinator_key) & 0x7FFFFFFF) % num_partitions


class ShareCoordinatorService:
    def __init__(
        self,
        config: ShareCoordinatorConfig,
        replica_manager: ReplicaManager,
        scheduler: Scheduler,
        ensure_topic: Callable[[], Awaitable[None]],
    ) -> None:
        self.config = config
        self.ensure_topic = ensure_topic
        self.runtime: CoordinatorRuntime[ShareCoordinatorShard] = CoordinatorRuntime(
            SHARE_STATE_TOPIC,
            replica_manager,
            scheduler,
            lambda partition: ShareStateLoader(config.records_per_snapshot),
            write_timeout_ms=config.write_timeout_ms,
        )

    def partition_for(self, key: ShareKey) -> int:
        return partition_for(key, self.config.num_partitions)

    async def read(self, key: ShareKey, leader_epoch: int) -> tuple[ErrorCode, ShareGroupOffset]:
        """ReadShareGroupState of one share-partition, once the shard's last write is
        committed (an op with no records waits for it)."""
        try:
            return await self.runtime.write(
                self.partition_for(key),
                lambda shard: (shard.read(key, leader_epoch), Effects()),
            )
        except KafkaError as e:
            return e.code, ShareGroupOffset()

    async def read_summary(self, key: ShareKey) -> tuple[ErrorCode, ShareGroupOffset]:
        """ReadShareGroupStateSummary: start offset -1 where no state exists."""
        try:
            return await self.runtime.write(
                self.partition_for(key),
                lambda shard: ((ErrorCode.NONE, shard.read_summary(key)), Effects()),
            )
        except KafkaError as e:
            return e.code, ShareGroupOffset()

    async def write(self, key: ShareKey, data: WriteState) -> ErrorCode:
        return await self._write(key, lambda shard: shard.write(key, data))

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> ErrorCode:
        return await self._write(
            key, lambda shard: (ErrorCode.NONE, shard.initialize(key, state_epoch, start_offset))
        )

    async def delete(self, key: ShareKey) -> ErrorCode:
        return await self._write(key, lambda shard: (ErrorCode.NONE, shard.delete(key)))

    async def on_topics_deleted(self, topic_ids: Collection[bytes]) -> None:
        """Forget the state of deleted topics in every shard this node leads (Kafka's
        onTopicsDeleted); a shard that cannot write now keeps it (logged)."""
        for partition in self.runtime.active_partitions():
            try:
                await self.runtime.write(
                    partition, lambda shard: (None, shard.remove_topics(topic_ids))
                )
            except KafkaError as e:
                log.warning(
                    "removing deleted topics' share state from %s-%d failed: %s",
                    SHARE_STATE_TOPIC,
                    partition,
                    e.code.name,
                )

    async def _write(
        self, key: ShareKey, op: Callable[[ShareCoordinatorShard], tuple[ErrorCode, Effects]]
    ) -> ErrorCode:
        try:
            return await self.runtime.write(self.partition_for(key), op)
        except KafkaError as e:
            return e.code
