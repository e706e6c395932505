"""Offsets committed inside a transaction (TxnOffsetCommit), pending until it ends.

Kafka keeps them apart from the committed offsets: OffsetFetch does not see them (with
``require_stable`` it answers UNSTABLE_OFFSET_COMMIT for their partitions), the COMMIT
marker makes them the committed offsets and the ABORT marker drops them. A plain commit
of the same partition written after the transactional one wins, as the later record in
the log does in Kafka; a tombstone of the partition drops it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .offsets_records import OffsetAndMetadata
from .results import TopicPartition


@dataclass
class PendingOffset:
    value: OffsetAndMetadata
    superseded: bool = False  # a plain commit of the partition came after it


@dataclass
class PendingTxnOffsets:
    """One group's pending transactional offsets, by producer id."""

    by_producer: dict[int, dict[TopicPartition, PendingOffset]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.by_producer)

    def __contains__(self, producer_id: object) -> bool:
        return producer_id in self.by_producer

    def add(self, producer_id: int, tp: TopicPartition, value: OffsetAndMetadata) -> None:
        self.by_producer.setdefault(producer_id, {})[tp] = PendingOffset(value)

    def supersede(self, tp: TopicPartition) -> None:
        for pending in self.by_producer.values():
            if tp in pending:
                pending[tp].superseded = True

    def discard(self, tp: TopicPartition) -> None:
        """A tombstone of the partition: no open transaction holds its offset any more (the
        transactions stay open, their markers still to come)."""
        for pending in self.by_producer.values():
            pending.pop(tp, None)

    def has(self, tp: TopicPartition) -> bool:
        return any(tp in pending for pending in self.by_producer.values())

    def partitions(self) -> set[TopicPartition]:
        """The partitions some open transaction holds an offset of."""
        return {tp for pending in self.by_producer.values() for tp in pending}

    def complete(
        self, producer_id: int, committed: bool
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The producer's transaction ended: the offsets that become committed."""
        pending = self.by_producer.pop(producer_id, {})
        if not committed:
            return {}
        return {tp: p.value for tp, p in pending.items() if not p.superseded}
