"""Rebuilding a shard's groups from ``__consumer_offsets`` while it loads."""

from __future__ import annotations

from moldau.coordinator.share.group_records import SHARE_GROUP_RECORD_TYPES
from moldau.protocol import coordinator_record_serde as serde
from moldau.protocol.coordinator_records import GROUP_RECORD_TYPES

from . import consumer_group_records
from .consumer_group import ConsumerGroup
from .offsets_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetAndMetadata,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from .results import TopicPartition
from .txn_offsets import PendingTxnOffsets


class GroupLoader:
    """Replays `__consumer_offsets` records, oldest first, while a shard loads."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self.metadata: dict[str, GroupMetadataValue] = {}
        self.pending: dict[str, PendingTxnOffsets] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        # Share groups' records, oldest first, for the share-group service to restore.
        self.share_group_records: list[tuple[bytes, bytes | None]] = []

    def replay(self, key: bytes, value: bytes | None, producer_id: int = -1) -> None:
        """Apply one record (``producer_id`` >= 0: a transactional offset commit, pending
        until its marker); raises ValueError if it does not decode."""
        if len(key) >= 2 and int.from_bytes(key[:2], "big") in (
            consumer_group_records.CONSUMER_GROUP_RECORD_TYPES
        ):
            record = serde.deserialize(GROUP_RECORD_TYPES, key, value)
            consumer_group_records.replay(
                self.consumer_groups, record.record_type, record.key, record.value
            )
            return
        if len(key) >= 2 and int.from_bytes(key[:2], "big") in SHARE_GROUP_RECORD_TYPES:
            self.share_group_records.append((key, value))
            return
        decoded = decode_key(key)
        if isinstance(decoded, OffsetKey):
            tp = (decoded.topic, decoded.partition)
            pending = self.pending.get(decoded.group)
            if producer_id >= 0:
                if value is not None:
                    pending = self.pending.setdefault(decoded.group, PendingTxnOffsets())
                    pending.add(producer_id, tp, decode_offset_value(value))
                return
            committed = self.offsets.setdefault(decoded.group, {})
            if value is None:
                committed.pop(tp, None)
                if pending is not None:
                    pending.discard(tp)
            else:
                committed[tp] = decode_offset_value(value)
                if pending is not None:
                    pending.supersede(tp)
        elif isinstance(decoded, GroupMetadataKey):
            if value is None:
                self.metadata.pop(decoded.group, None)
            else:
                self.metadata[decoded.group] = decode_group_value(value)

    def replay_marker(self, producer_id: int, committed: bool) -> None:
        for group, pending in self.pending.items():
            if producer_id in pending:
                done = pending.complete(producer_id, committed)
                self.offsets.setdefault(group, {}).update(done)
