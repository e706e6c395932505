"""Committed offsets of a shard's groups (Kafka's OffsetMetadataManager).

Beside the membership state machine (:mod:`.coordinator`, Kafka's GroupMetadataManager):
OffsetCommit, TxnOffsetCommit and the markers that settle them, OffsetFetch,
OffsetDelete, and the retention that expires offsets. Both managers share the shard's
groups and the :class:`OperationEffects` of the operation in progress.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence, Set

from moldau.coordinator.effects import TxnBatch
from moldau.protocol.errors import ErrorCode

from .config import GroupConfig
from .consumer_group import ConsumerGroup
from .consumer_protocol import CONSUMER_PROTOCOL_TYPE
from .group import Group, GroupState
from .member import Member
from .offsets_records import (
    OffsetAndMetadata,
    encode_group_key,
    encode_offset_key,
    encode_offset_value,
)
from .results import (
    Completion,
    Effects,
    OffsetCommit,
    OffsetsRecord,
    PartitionOffset,
    RequestId,
    TopicPartition,
)


class OperationEffects:
    """The clock and effects of the operation in progress, shared by a shard's managers."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms
        self._effects = Effects()

    def begin(self, now_ms: int) -> None:
        self.now_ms = now_ms
        self._effects = Effects()

    def end(self) -> Effects:
        effects, self._effects = self._effects, Effects()
        return effects

    def append(self, key: bytes, value: bytes | None) -> None:
        self._effects.records.append(OffsetsRecord(key, value))

    def complete(self, request_id: RequestId, result: object) -> None:
        self._effects.completions.append(Completion(request_id, result))

    @property
    def has_records(self) -> bool:
        return bool(self._effects.records)

    def frame(self, txn: TxnBatch) -> None:
        """Write this operation's records in (or as the marker of) a transaction."""
        self._effects.txn = txn


class OffsetMetadataManager:
    def __init__(
        self,
        config: GroupConfig,
        groups: dict[str, Group],
        ops: OperationEffects,
        member_active: Callable[[Group, Member], None],
        consumer_groups: Mapping[str, ConsumerGroup],
    ) -> None:
        self.config = config
        self._groups = groups
        self._consumer_groups = consumer_groups
        self._ops = ops
        self._member_active = member_active  # a commit counts as a member's heartbeat

    def commit_offsets(
        self,
        now_ms: int,
        *,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        offsets: Sequence[OffsetCommit],
        retention_time_ms: int = -1,
    ) -> tuple[dict[TopicPartition, ErrorCode], Effects]:
        """OffsetCommit v2+ for already-authorized, existing partitions.

        generation -1 with member id "" is a simple (non-group-managed) commit, accepted only
        while the group has no members. `retention_time_ms` is the v2-v4 field (-1: broker
        default). Later entries for the same partition win.
        """
        self._ops.begin(now_ms)
        consumer = self._consumer_groups.get(group_id)
        if consumer is not None and (consumer.members or generation_id >= 0 or member_id):
            error = _validate_consumer_commit(consumer, member_id, generation_id)
            if error is not None:
                return {(o.topic, o.partition): error for o in offsets}, self._ops.end()
            generation_id = -1  # the offsets' holder below is not a classic member
        group = self._groups.get(group_id)
        if group is None and generation_id < 0:
            group = self._groups[group_id] = Group(group_id, now_ms)
        if consumer is not None and group is not None:
            error = None
        else:
            error = (
                ErrorCode.ILLEGAL_GENERATION
                if group is None
                else _validate_commit(group, member_id, generation_id, group_instance_id)
            )
        if group is None or error is not None:
            refused = error or ErrorCode.ILLEGAL_GENERATION
            return {(o.topic, o.partition): refused for o in offsets}, self._ops.end()
        if group.state is not GroupState.EMPTY and member_id in group.members:
            self._member_active(group, group.members[member_id])
        expire = None if retention_time_ms == -1 else now_ms + retention_time_ms

        def commit(tp: TopicPartition, value: OffsetAndMetadata) -> None:
            group.offsets[tp] = value
            group.pending_txn.supersede(tp)

        return self._write(group_id, offsets, expire, commit), self._ops.end()

    def txn_commit_offsets(
        self,
        now_ms: int,
        *,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        offsets: Sequence[OffsetCommit],
    ) -> tuple[dict[TopicPartition, ErrorCode], Effects]:
        """TxnOffsetCommit: the offsets are written in the producer's transaction and stay
        pending until its marker (``complete_transaction``). As Kafka, a group that does not
        exist is created; a member id or generation, when given, must match (for a KIP-848
        group: the member and its epoch, ILLEGAL_GENERATION when stale)."""
        self._ops.begin(now_ms)
        group = self._groups.get(group_id)
        static = group.static_members.get(group_instance_id or "") if group else None
        consumer = self._consumer_groups.get(group_id)
        error = None
        if consumer is not None:
            if member_id or generation_id >= 0:
                error = _validate_consumer_commit(consumer, member_id, generation_id)
                if error is ErrorCode.STALE_MEMBER_EPOCH:
                    error = ErrorCode.ILLEGAL_GENERATION
        elif static is not None and static != member_id:
            error = ErrorCode.FENCED_INSTANCE_ID
        elif member_id and (group is None or member_id not in group.members):
            error = ErrorCode.UNKNOWN_MEMBER_ID
        elif generation_id >= 0 and (group is None or generation_id != group.generation_id):
            error = ErrorCode.ILLEGAL_GENERATION
        if error is not None:
            return {(o.topic, o.partition): error for o in offsets}, self._ops.end()
        if group is None:
            group = self._groups[group_id] = Group(group_id, now_ms)
        pending = group.pending_txn
        results = self._write(
            group_id, offsets, None, lambda tp, value: pending.add(producer_id, tp, value)
        )
        if self._ops.has_records:
            self._ops.frame(TxnBatch(producer_id, producer_epoch))
        return results, self._ops.end()

    def _write(
        self,
        group_id: str,
        offsets: Sequence[OffsetCommit],
        expire_ms: int | None,
        apply: Callable[[TopicPartition, OffsetAndMetadata], None],
    ) -> dict[TopicPartition, ErrorCode]:
        """Apply and write each offset whose metadata fits ``offset.metadata.max.bytes``."""
        results: dict[TopicPartition, ErrorCode] = {}
        now_ms = self._ops.now_ms
        for o in offsets:
            tp = (o.topic, o.partition)
            metadata = o.metadata or ""
            if len(metadata.encode("utf-16-le")) // 2 > self.config.offset_metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            value = OffsetAndMetadata(o.offset, o.leader_epoch, metadata, now_ms, expire_ms)
            apply(tp, value)
            self._ops.append(encode_offset_key(group_id, *tp), encode_offset_value(value))
            results[tp] = ErrorCode.NONE
        return results

    def groups_with_pending(self, producer_id: int) -> list[str]:
        """Groups holding offsets of the producer's open transaction."""
        return [g.group_id for g in self._groups.values() if producer_id in g.pending_txn]

    def complete_transaction(
        self,
        now_ms: int,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
    ) -> Effects:
        """The transaction coordinator's marker for this partition: writes it, and the
        producer's pending offsets become committed (COMMIT) or go (ABORT)."""
        self._ops.begin(now_ms)
        for group in self._groups.values():
            if producer_id in group.pending_txn:
                group.offsets.update(group.pending_txn.complete(producer_id, committed))
        self._ops.frame(TxnBatch(producer_id, producer_epoch, committed, coordinator_epoch))
        return self._ops.end()

    def validate_member(self, group_id: str, member_id: str, member_epoch: int) -> ErrorCode | None:
        """OffsetFetch v9 of a KIP-848 group member: it must exist at that epoch."""
        consumer = self._consumer_groups.get(group_id)
        if consumer is None:
            return None
        return _validate_consumer_commit(consumer, member_id, member_epoch)

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        require_stable: bool = False,
    ) -> list[PartitionOffset]:
        """OffsetFetch for one group (KIP-709 handlers call it per group); None = all.
        ``require_stable``: partitions with a transactional commit pending are unstable."""
        group = self._groups.get(group_id)
        committed = group.offsets if group is not None else {}
        wanted = committed.keys() if partitions is None else partitions
        results = []
        for topic, partition in wanted:
            o = committed.get((topic, partition))
            if require_stable and group is not None and group.pending_txn.has((topic, partition)):
                results.append(PartitionOffset(topic, partition, -1, -1, "", unstable=True))
            elif o is None:
                results.append(PartitionOffset(topic, partition, -1, -1, ""))
            else:
                results.append(
                    PartitionOffset(topic, partition, o.offset, o.leader_epoch, o.metadata)
                )
        return results

    def delete_offsets(
        self, now_ms: int, group_id: str, partitions: Sequence[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode], Effects]:
        """OffsetDelete (KIP-496): (group error, per-partition errors, effects)."""
        self._ops.begin(now_ms)
        group = self._groups.get(group_id)
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, {}, self._ops.end()
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}, self._ops.end()
        if group.state is GroupState.EMPTY:
            eligible = list(partitions)
            results = {}
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
            results = {
                tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                for tp in partitions
                if group.is_subscribed_to_topic(tp[0])
            }
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}, self._ops.end()
        if eligible:
            removed = {tp: group.offsets.pop(tp) for tp in eligible if tp in group.offsets}
            self.cleanup_group(group, removed)
            results.update(dict.fromkeys(eligible, ErrorCode.NONE))
        return ErrorCode.NONE, results, self._ops.end()

    def groups_with_offsets(self, partitions: Set[TopicPartition]) -> list[str]:
        """Groups holding a committed or pending transactional offset of ``partitions``."""
        return [
            g.group_id
            for g in self._groups.values()
            if not g.offsets.keys().isdisjoint(partitions)
            or not g.pending_txn.partitions().isdisjoint(partitions)
        ]

    def on_partitions_deleted(
        self, now_ms: int, group_ids: Iterable[str], partitions: Set[TopicPartition]
    ) -> Effects:
        """Their topics were deleted (Kafka's onPartitionsDeleted): the groups' committed and
        pending transactional offsets of ``partitions`` are tombstoned, whatever the group's
        state, so a topic created again under the same name is consumed from
        ``auto.offset.reset``. Members keep their assignments: clients rejoin when their
        metadata loses the topic."""
        self._ops.begin(now_ms)
        for group_id in group_ids:
            group = self._groups.get(group_id)
            if group is None:
                continue
            stale = (group.offsets.keys() | group.pending_txn.partitions()) & partitions
            self.cleanup_group(group, {tp: group.offsets.pop(tp, None) for tp in sorted(stale)})
        return self._ops.end()

    def expire_offsets(self) -> None:
        """Retention: drop offsets past ``offsets.retention.minutes`` (Kafka's rules)."""
        retention_ms = self.config.offsets_retention_ms
        for group in list(self._groups.values()):
            self.cleanup_group(group, group.remove_expired_offsets(self._ops.now_ms, retention_ms))

    def cleanup_group(self, group: Group, removed: Mapping[TopicPartition, object]) -> None:
        """Tombstone removed offsets (a tombstone drops the partition's pending transactional
        offset too, as its replay does); an Empty group left without offsets is Dead and goes."""
        for topic, partition in removed:
            group.pending_txn.discard((topic, partition))
            self._ops.append(encode_offset_key(group.group_id, topic, partition), None)
        if group.state is GroupState.EMPTY and not group.offsets and not group.pending_txn:
            del self._groups[group.group_id]
            if group.generation_id > 0:  # generation 0 groups only ever stored offsets
                self._ops.append(encode_group_key(group.group_id), None)


def _validate_consumer_commit(
    group: ConsumerGroup, member_id: str, member_epoch: int
) -> ErrorCode | None:
    """KIP-848: the committing member must exist and be at its current member epoch (a
    classic member of an upgraded group is told ILLEGAL_GENERATION, which it knows)."""
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member_epoch != member.member_epoch:
        return (
            ErrorCode.STALE_MEMBER_EPOCH if member.classic is None else ErrorCode.ILLEGAL_GENERATION
        )
    return None


def _validate_commit(
    group: Group, member_id: str, generation_id: int, group_instance_id: str | None
) -> ErrorCode | None:
    if generation_id >= 0 or member_id or group_instance_id is not None:
        error = group.validate_member(member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if error is None and group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return error
    if group.state is not GroupState.EMPTY:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return None
