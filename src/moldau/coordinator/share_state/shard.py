"""The share coordinator's state for one ``__share_group_state`` partition (Kafka's
ShareCoordinatorShard): the durable state of each share-partition it owns.

A share-partition is keyed by (group id, topic id, partition). Its state is the
share-partition start offset, the state epoch, the leader epoch of the last writer and
the batches of in-flight offsets that are not plain AVAILABLE-and-never-delivered (state,
delivery count). The first write of a key, and every ``records_per_snapshot``-th one after,
is a ShareSnapshot record (the whole state); the others are ShareUpdate records carrying
only what the write sent, merged into the state when replayed. Writes from a leader epoch
or state epoch older than the last recorded are fenced, so a deposed share-partition
leader cannot overwrite its successor.

Pure: operations return records (:class:`Effects`) and the answer; the coordinator
runtime writes the records and replays them through :class:`ShareStateLoader` on load.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from moldau.coordinator.effects import CoordinatorRecord, Effects
from moldau.protocol.coordinator_record_serde import (
    SHARE_RECORD_TYPES,
    deserialize,
    serialize_key,
    serialize_value,
)
from moldau.protocol.coordinator_records.share_snapshot_key import ShareSnapshotKey
from moldau.protocol.coordinator_records.share_snapshot_value import ShareSnapshotValue
from moldau.protocol.coordinator_records.share_snapshot_value import (
    StateBatch as SnapshotBatch,
)
from moldau.protocol.coordinator_records.share_update_key import ShareUpdateKey
from moldau.protocol.coordinator_records.share_update_value import ShareUpdateValue
from moldau.protocol.coordinator_records.share_update_value import StateBatch as UpdateBatch
from moldau.protocol.errors import ErrorCode

SNAPSHOT_RECORD_TYPE, UPDATE_RECORD_TYPE = 0, 1
UNINITIALIZED = -1  # a start offset, leader epoch or state epoch not (being) written

ShareKey = tuple[str, bytes, int]  # group id, topic id, partition


@dataclass(frozen=True, slots=True)
class StateBatch:
    """Offsets ``first..last`` in one delivery state (0 available, 2 acknowledged,
    4 archived) with their delivery count (Kafka's PersisterStateBatch)."""

    first: int
    last: int
    state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    """The durable state of one share-partition."""

    snapshot_epoch: int = 0
    state_epoch: int = 0
    leader_epoch: int = UNINITIALIZED
    start_offset: int = UNINITIALIZED
    batches: tuple[StateBatch, ...] = ()


@dataclass(frozen=True, slots=True)
class WriteState:
    """One partition of a WriteShareGroupState request (or of an initialisation)."""

    state_epoch: int
    leader_epoch: int
    start_offset: int  # UNINITIALIZED: unchanged
    batches: tuple[StateBatch, ...] = ()


def combine(
    old: Iterable[StateBatch], new: Iterable[StateBatch], start_offset: int
) -> tuple[StateBatch, ...]:
    """``new`` batches override ``old`` where they overlap; everything below
    ``start_offset`` is dropped and neighbours alike are merged (Kafka's
    PersisterStateBatchCombiner)."""
    fresh = sorted(new, key=lambda b: b.first)
    out: list[StateBatch] = []
    for b in old:
        pieces = [b]
        for n in fresh:
            cut: list[StateBatch] = []
            for p in pieces:
                if n.last < p.first or n.first > p.last:
                    cut.append(p)
                    continue
                if p.first < n.first:
                    cut.append(replace(p, last=n.first - 1))
                if p.last > n.last:
                    cut.append(replace(p, first=n.last + 1))
            pieces = cut
        out.extend(pieces)
    out.extend(fresh)
    out.sort(key=lambda b: b.first)
    merged: list[StateBatch] = []
    for b in out:
        if b.last < start_offset:
            continue
        if b.first < start_offset:
            b = replace(b, first=start_offset)
        if merged and _joins(merged[-1], b):
            merged[-1] = replace(merged[-1], last=b.last)
        else:
            merged.append(b)
    return tuple(merged)


def _joins(a: StateBatch, b: StateBatch) -> bool:
    return a.last + 1 == b.first and (a.state, a.delivery_count) == (b.state, b.delivery_count)


class ShareCoordinatorShard:
    """The share-partitions of one ``__share_group_state`` partition."""

    def __init__(self, records_per_snapshot: int = 500) -> None:
        self.records_per_snapshot = records_per_snapshot
        self.states: dict[ShareKey, ShareGroupOffset] = {}
        self.updates: dict[ShareKey, int] = {}  # ShareUpdate records since the snapshot

    # -- runtime protocol ----------------------------------------------------------
    def next_timer_ms(self) -> int | None:
        return None

    def tick(self, now_ms: int) -> Effects:
        return Effects()

    def snapshot(self, keys: Iterable[str] | None, /) -> Any:
        """For an undo: the maps are copied (their values are immutable)."""
        return dict(self.states), dict(self.updates)

    def restore(self, snapshot: Any, /) -> None:
        self.states, self.updates = dict(snapshot[0]), dict(snapshot[1])

    # -- reading -------------------------------------------------------------------
    def read(self, key: ShareKey, leader_epoch: int) -> tuple[ErrorCode, ShareGroupOffset]:
        """ReadShareGroupState (Kafka 4.1's readStateAndMaybeUpdateLeaderEpoch): state
        that does not exist (never initialized, or deleted) is INVALID_REQUEST, since the
        group coordinator initializes it before any leader reads it; a reader from an
        older leader epoch than the last writer's is fenced."""
        state = self.states.get(key)
        if state is None:
            return ErrorCode.INVALID_REQUEST, ShareGroupOffset()
        if leader_epoch != UNINITIALIZED and state.leader_epoch > leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, state
        return ErrorCode.NONE, state

    def read_summary(self, key: ShareKey) -> ShareGroupOffset:
        """ReadShareGroupStateSummary: state that does not exist reads as uninitialized
        (start offset -1), which is not an error there."""
        return self.states.get(key, ShareGroupOffset())

    # -- writing -------------------------------------------------------------------
    def write(self, key: ShareKey, data: WriteState) -> tuple[ErrorCode, Effects]:
        """WriteShareGroupState: one record, a snapshot or an update. As Kafka 4.1, only
        state that exists is written (INVALID_REQUEST otherwise): the group coordinator
        initializes it, so a leader still holding state that was deleted cannot bring it
        back."""
        current = self.states.get(key)
        if current is None:
            return ErrorCode.INVALID_REQUEST, Effects()
        if current.leader_epoch > data.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, Effects()
        if current.state_epoch > data.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH, Effects()
        if self.updates.get(key, 0) >= self.records_per_snapshot:
            start = (
                current.start_offset if data.start_offset == UNINITIALIZED else data.start_offset
            )
            state = ShareGroupOffset(
                current.snapshot_epoch + 1,
                data.state_epoch if data.state_epoch != UNINITIALIZED else current.state_epoch,
                data.leader_epoch if data.leader_epoch != UNINITIALIZED else current.leader_epoch,
                start,
                combine(current.batches, data.batches, start),
            )
            record = snapshot_record(key, state)
        else:
            record = update_record(key, current.snapshot_epoch, data)
        self._replay(record)
        return ErrorCode.NONE, Effects(records=[record])

    def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> Effects:
        """InitializeShareGroupState: start over at ``start_offset`` in a new state epoch
        (a fresh snapshot: batches from the previous epoch are gone)."""
        current = self.states.get(key, ShareGroupOffset())
        state = ShareGroupOffset(
            current.snapshot_epoch + 1 if key in self.states else 0,
            state_epoch,
            current.leader_epoch,
            start_offset,
        )
        record = snapshot_record(key, state)
        self._replay(record)
        return Effects(records=[record])

    def delete(self, key: ShareKey) -> Effects:
        """DeleteShareGroupState: tombstones for both record types of the key."""
        if key not in self.states:
            return Effects()
        records = [
            CoordinatorRecord(serialize_key(_key(t, key), t), None)
            for t in (SNAPSHOT_RECORD_TYPE, UPDATE_RECORD_TYPE)
        ]
        for r in records:
            self._replay(r)
        return Effects(records=records)

    def remove_topics(self, topic_ids: Collection[bytes]) -> Effects:
        """Topics were deleted: tombstones for every share-partition of theirs (Kafka's
        maybeCleanupShareState), so a topic created again under the name starts afresh
        and nothing of the old one stays in ``__share_group_state``."""
        records = [
            r
            for key in [k for k in self.states if k[1] in topic_ids]
            for r in self.delete(key).records
        ]
        return Effects(records=records)

    # -- replay --------------------------------------------------------------------
    def _replay(self, record: CoordinatorRecord) -> None:
        replay(self, record.key, record.value)


def _key(record_type: int, key: ShareKey) -> ShareSnapshotKey | ShareUpdateKey:
    cls = ShareSnapshotKey if record_type == SNAPSHOT_RECORD_TYPE else ShareUpdateKey
    return cls(group_id=key[0], topic_id=key[1], partition=key[2])


def snapshot_record(key: ShareKey, state: ShareGroupOffset) -> CoordinatorRecord:
    value = ShareSnapshotValue(
        snapshot_epoch=state.snapshot_epoch,
        state_epoch=state.state_epoch,
        leader_epoch=state.leader_epoch,
        start_offset=state.start_offset,
        state_batches=[
            SnapshotBatch(b.first, b.last, b.state, b.delivery_count) for b in state.batches
        ],
    )
    return CoordinatorRecord(
        serialize_key(_key(SNAPSHOT_RECORD_TYPE, key), SNAPSHOT_RECORD_TYPE),
        serialize_value(value, 0),
    )


def update_record(key: ShareKey, snapshot_epoch: int, data: WriteState) -> CoordinatorRecord:
    value = ShareUpdateValue(
        snapshot_epoch=snapshot_epoch,
        leader_epoch=data.leader_epoch,
        start_offset=data.start_offset,
        state_batches=[
            UpdateBatch(b.first, b.last, b.state, b.delivery_count) for b in data.batches
        ],
    )
    return CoordinatorRecord(
        serialize_key(_key(UPDATE_RECORD_TYPE, key), UPDATE_RECORD_TYPE),
        serialize_value(value, 0),
    )


def replay(shard: ShareCoordinatorShard, key: bytes, value: bytes | None) -> None:
    """Apply one ``__share_group_state`` record (load, and each write as it is made)."""
    record = deserialize(SHARE_RECORD_TYPES, key, value)
    k = record.key
    share_key: ShareKey = (k.group_id, k.topic_id, k.partition)
    v = record.value
    if v is None:  # a tombstone
        shard.states.pop(share_key, None)
        shard.updates.pop(share_key, None)
        return
    batches = tuple(
        StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in v.state_batches
    )
    if record.record_type == SNAPSHOT_RECORD_TYPE:
        shard.states[share_key] = ShareGroupOffset(
            v.snapshot_epoch,
            v.state_epoch,
            v.leader_epoch,
            v.start_offset,
            combine((), batches, v.start_offset),
        )
        shard.updates[share_key] = 0
        return
    current = shard.states.get(share_key, ShareGroupOffset())
    start = current.start_offset if v.start_offset == UNINITIALIZED else v.start_offset
    shard.states[share_key] = ShareGroupOffset(
        current.snapshot_epoch,
        current.state_epoch,
        max(current.leader_epoch, v.leader_epoch),
        start,
        combine(current.batches, batches, start),
    )
    shard.updates[share_key] = shard.updates.get(share_key, 0) + 1


@dataclass
class ShareStateLoader:
    """Rebuilds a shard from its partition's log (the runtime's ShardLoader)."""

    records_per_snapshot: int = 500
    shard: ShareCoordinatorShard = field(init=False)

    def __post_init__(self) -> None:
        self.shard = ShareCoordinatorShard(self.records_per_snapshot)

    def replay(self, key: bytes, value: bytes | None, producer_id: int = -1) -> None:
        replay(self.shard, key, value)

    def replay_marker(self, producer_id: int, committed: bool) -> None:
        """The share coordinator writes no transactions."""

    def finish(self, now_ms: int) -> ShareCoordinatorShard:
        return self.shard
