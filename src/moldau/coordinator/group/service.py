"""The group coordinator as the handlers see it (Kafka's GroupCoordinatorService).

Routes each group to the shard of its ``__consumer_offsets`` partition (Java's
``hashCode`` of the group id, as every Kafka client and broker computes it) and runs the
pure :class:`GroupCoordinator` of that shard through the coordinator runtime, so records
are committed before answers leave. A shard this node does not lead answers
NOT_COORDINATOR; one still loading, COORDINATOR_LOAD_IN_PROGRESS; the errors come back in
the results, shaped as each API reports them.
"""

from __future__ import annotations

import copy
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from moldau.clock import Scheduler
from moldau.coordinator.effects import Effects
from moldau.coordinator.group.config import GroupConfig
from moldau.coordinator.group.consumer_group import ConsumerGroup
from moldau.coordinator.group.consumer_groups import (
    ConsumerHeartbeat,
    GroupOverrides,
    HeartbeatResult,
    TopicsView,
)
from moldau.coordinator.group.coordinator import GroupCoordinator
from moldau.coordinator.group.loader import GroupLoader
from moldau.coordinator.group.offsets import OffsetMetadataManager
from moldau.coordinator.group.partitioning import partition_for_group
from moldau.coordinator.group.results import (
    GroupDescription,
    GroupOverview,
    JoinGroupResult,
    MemberIdentity,
    OffsetCommit,
    PartitionOffset,
    SyncGroupResult,
    TopicPartition,
)
from moldau.coordinator.runtime import CoordinatorRuntime
from moldau.metadata.topics import OFFSETS_TOPIC
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.replica_manager import ReplicaManager
from moldau.stats.counters import GroupStats
from moldau.stats.timing import parked

log = logging.getLogger(__name__)


class _Loader:
    """Builds a shard's coordinator from its partition's records."""

    def __init__(self, config: GroupConfig, stats: GroupStats) -> None:
        self.config = config
        self.stats = stats
        self.groups = GroupLoader()

    def replay(self, key: bytes, value: bytes | None, producer_id: int = -1) -> None:
        self.groups.replay(key, value, producer_id)

    def replay_marker(self, producer_id: int, committed: bool) -> None:
        self.groups.replay_marker(producer_id, committed)

    def finish(self, now_ms: int) -> GroupCoordinator:
        coordinator = GroupCoordinator(self.config, now_ms=now_ms, stats=self.stats)
        coordinator.finish_load(self.groups, now_ms)
        return coordinator


class GroupCoordinatorService:
    def __init__(
        self,
        config: GroupConfig,
        num_partitions: int,
        replica_manager: ReplicaManager,
        scheduler: Scheduler,
        ensure_topic: Callable[[], Awaitable[None]],
    ) -> None:
        self.config = config
        self.num_partitions = num_partitions
        self.clock = scheduler.clock
        self.ensure_topic = ensure_topic
        self.stats = GroupStats()
        self.runtime: CoordinatorRuntime[GroupCoordinator] = CoordinatorRuntime(
            OFFSETS_TOPIC,
            replica_manager,
            scheduler,
            lambda p: _Loader(config, self.stats),
            write_timeout_ms=config.offsets_commit_timeout_ms,
        )

    def partition_for(self, group_id: str) -> int:
        return partition_for_group(group_id, self.num_partitions)

    async def _write(
        self,
        group_id: str,
        op: Callable[[GroupCoordinator], tuple[Any, Effects]],
        keys: Iterable[str] | None = None,
    ) -> Any:
        return await self.runtime.write(
            self.partition_for(group_id), op, [group_id] if keys is None else keys
        )

    async def _parked(self, group_id: str, call: Callable[[GroupCoordinator, Any], Effects]) -> Any:
        """Run an operation that answers through a parked request (Join/SyncGroup)."""
        request_id, fut = self.runtime.park(self.partition_for(group_id))
        try:
            await self._write(group_id, lambda c: (None, call(c, request_id)))
        except KafkaError:
            self.runtime.forget(request_id)
            raise
        return await parked(fut)  # the request's remote time

    # -- membership ----------------------------------------------------------------
    async def join(self, group_id: str, **kwargs: Any) -> JoinGroupResult:
        try:
            return await self._parked(
                group_id,
                lambda c, rid: c.join_group(rid, self.clock.now_ms(), group_id=group_id, **kwargs),
            )
        except KafkaError as e:
            return JoinGroupResult(e.code, member_id=kwargs.get("member_id", ""))

    async def sync(self, group_id: str, **kwargs: Any) -> SyncGroupResult:
        try:
            return await self._parked(
                group_id,
                lambda c, rid: c.sync_group(rid, self.clock.now_ms(), group_id=group_id, **kwargs),
            )
        except KafkaError as e:
            return SyncGroupResult(e.code)

    async def heartbeat(self, group_id: str, **kwargs: Any) -> ErrorCode:
        try:
            return await self._write(
                group_id,
                lambda c: (
                    c.heartbeat(self.clock.now_ms(), group_id=group_id, **kwargs),
                    Effects(),
                ),
            )
        except KafkaError as e:
            return e.code

    async def leave(
        self, group_id: str, members: Sequence[MemberIdentity]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        def op(c: GroupCoordinator) -> tuple[Any, Effects]:
            error, errors, effects = c.leave_group(self.clock.now_ms(), group_id, members)
            return (error, errors), effects

        try:
            result: tuple[ErrorCode, list[ErrorCode]] = await self._write(group_id, op)
            return result
        except KafkaError as e:
            return e.code, []

    async def consumer_group_heartbeat(
        self, heartbeat: ConsumerHeartbeat, topics: TopicsView, overrides: GroupOverrides
    ) -> HeartbeatResult:
        """ConsumerGroupHeartbeat (KIP-848); coordinator errors come back in the result.
        ``overrides``: the group's configs in the metadata image."""
        try:
            result: HeartbeatResult = await self._write(
                heartbeat.group_id,
                lambda c: c.consumer_group_heartbeat(
                    self.clock.now_ms(), heartbeat, topics, overrides
                ),
            )
            return result
        except KafkaError as e:
            return HeartbeatResult(e.code, None, heartbeat.member_id or None)

    def describe_consumer_group(self, group_id: str) -> ConsumerGroup | ErrorCode:
        """A copy of the consumer group; GROUP_ID_NOT_FOUND when there is none here."""
        try:
            group = self.runtime.read(
                self.partition_for(group_id), lambda c: c.consumer_groups.get(group_id)
            )
        except KafkaError as e:
            return e.code
        return ErrorCode.GROUP_ID_NOT_FOUND if group is None else copy.deepcopy(group)

    # -- offsets -------------------------------------------------------------------
    async def commit_offsets(
        self, group_id: str, offsets: Sequence[OffsetCommit], **kwargs: Any
    ) -> dict[TopicPartition, ErrorCode]:
        return await self._commit(OffsetMetadataManager.commit_offsets, group_id, offsets, kwargs)

    async def _commit(
        self,
        commit: Callable[..., tuple[Any, Effects]],
        group_id: str,
        offsets: Sequence[OffsetCommit],
        kwargs: dict[str, Any],
    ) -> dict[TopicPartition, ErrorCode]:
        """An offset commit (plain or transactional): an error fails every partition."""

        def op(c: GroupCoordinator) -> tuple[Any, Effects]:
            return commit(
                c.offsets, self.clock.now_ms(), group_id=group_id, offsets=offsets, **kwargs
            )

        try:
            result: dict[TopicPartition, ErrorCode] = await self._write(group_id, op)
            return result
        except KafkaError as e:
            return {(o.topic, o.partition): e.code for o in offsets}

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> list[PartitionOffset]:
        """Raises KafkaError (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, and for a
        KIP-848 member UNKNOWN_MEMBER_ID or STALE_MEMBER_EPOCH)."""

        def read(c: GroupCoordinator) -> list[PartitionOffset]:
            if member_epoch >= 0:  # -1: not a member (admin tools)
                error = c.offsets.validate_member(group_id, member_id or "", member_epoch)
                if error is not None:
                    raise KafkaError(f"OffsetFetch of group {group_id}", error)
            return c.offsets.fetch_offsets(group_id, partitions, require_stable)

        return self.runtime.read(self.partition_for(group_id), read)

    # -- transactions ----------------------------------------------------------------
    async def txn_commit_offsets(
        self, group_id: str, offsets: Sequence[OffsetCommit], **kwargs: Any
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: pending in the producer's transaction until its marker."""
        return await self._commit(
            OffsetMetadataManager.txn_commit_offsets, group_id, offsets, kwargs
        )

    async def complete_transaction(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
    ) -> None:
        """Write a transaction's marker to this ``__consumer_offsets`` partition (the
        WriteTxnMarkers handler); its offsets become visible or go. Raises KafkaError."""
        keys = self.runtime.read(partition, lambda c: c.offsets.groups_with_pending(producer_id))
        now = self.clock.now_ms()
        await self.runtime.write(
            partition,
            lambda c: (
                None,
                c.offsets.complete_transaction(
                    now, producer_id, producer_epoch, committed, coordinator_epoch
                ),
            ),
            keys,
        )

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        def op(c: GroupCoordinator) -> tuple[Any, Effects]:
            error, results, effects = c.offsets.delete_offsets(
                self.clock.now_ms(), group_id, partitions
            )
            return (error, results), effects

        try:
            result: tuple[ErrorCode, dict[TopicPartition, ErrorCode]] = await self._write(
                group_id, op
            )
            return result
        except KafkaError as e:
            return e.code, {}

    async def on_partitions_deleted(self, partitions: Iterable[TopicPartition]) -> None:
        """Deleted topics' partitions (Kafka's onPartitionsDeleted): every shard this node
        leads tombstones its groups' offsets of them; a shard that cannot write now keeps
        them (logged)."""
        deleted = frozenset(partitions)
        for partition in self.runtime.active_partitions():
            try:
                groups = self.runtime.read(
                    partition, lambda c: c.offsets.groups_with_offsets(deleted)
                )
                if not groups:
                    continue

                def op(c: GroupCoordinator, groups: list[str] = groups) -> tuple[None, Effects]:
                    return None, c.offsets.on_partitions_deleted(
                        self.clock.now_ms(), groups, deleted
                    )

                await self.runtime.write(partition, op, groups)
                log.info(
                    "deleted %d groups' offsets of deleted partitions in %s-%d",
                    len(groups),
                    OFFSETS_TOPIC,
                    partition,
                )
            except KafkaError as e:
                log.warning(
                    "deleting offsets of deleted partitions from %s-%d failed: %s",
                    OFFSETS_TOPIC,
                    partition,
                    e.code.name,
                )

    # -- admin ---------------------------------------------------------------------
    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        by_partition: dict[int, list[str]] = defaultdict(list)
        for group_id in group_ids:
            by_partition[self.partition_for(group_id)].append(group_id)
        results: dict[str, ErrorCode] = {}
        for partition, ids in by_partition.items():

            def op(c: GroupCoordinator, ids: list[str] = ids) -> tuple[Any, Effects]:
                return c.delete_groups(self.clock.now_ms(), ids)

            try:
                results.update(await self.runtime.write(partition, op, ids))
            except KafkaError as e:
                results.update(dict.fromkeys(ids, e.code))
        return {g: results[g] for g in group_ids}

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[GroupOverview]:
        wanted, kinds = list(states), list(types)
        return [g for c in self.runtime.active_shards() for g in c.list_groups(wanted, kinds)]

    def describe_group(self, group_id: str) -> GroupDescription | ErrorCode:
        try:
            return self.runtime.read(
                self.partition_for(group_id), lambda c: c.describe_group(group_id)
            )
        except KafkaError as e:
            return e.code
