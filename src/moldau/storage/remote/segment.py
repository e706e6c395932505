"""The value types of remote log metadata, as Kafka's ``RemoteLogSegmentMetadata`` and
friends (storage/api ``org.apache.kafka.server.log.remote.storage``).

A segment copied to the remote tier is named by a :class:`RemoteLogSegmentId` (its
partition plus a random UUID, so two copies of the same offsets by different leaders never
collide) and goes through the states of :class:`RemoteLogSegmentState`; a partition being
deleted goes through :class:`RemotePartitionDeleteState`. The transition rules are Kafka's:
self transitions are valid (retries and failover replay events).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path


@dataclass(frozen=True, slots=True)
class TopicIdPartition:
    topic_id: uuid.UUID
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic_id}:{self.topic}-{self.partition}"


class RemoteLogSegmentState(enum.IntEnum):
    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3

    @staticmethod
    def is_valid_transition(
        source: RemoteLogSegmentState | None, target: RemoteLogSegmentState
    ) -> bool:
        """Kafka's ``isValidTransition``: None (unknown segment) may only start a copy."""
        if source is None:
            return target is RemoteLogSegmentState.COPY_SEGMENT_STARTED
        return source is target or target in _SEGMENT_NEXT[source]


_SEGMENT_NEXT: dict[RemoteLogSegmentState, frozenset[RemoteLogSegmentState]] = {
    RemoteLogSegmentState.COPY_SEGMENT_STARTED: frozenset(
        {RemoteLogSegmentState.COPY_SEGMENT_FINISHED, RemoteLogSegmentState.DELETE_SEGMENT_STARTED}
    ),
    RemoteLogSegmentState.COPY_SEGMENT_FINISHED: frozenset(
        {RemoteLogSegmentState.DELETE_SEGMENT_STARTED}
    ),
    RemoteLogSegmentState.DELETE_SEGMENT_STARTED: frozenset(
        {RemoteLogSegmentState.DELETE_SEGMENT_FINISHED}
    ),
    RemoteLogSegmentState.DELETE_SEGMENT_FINISHED: frozenset(),
}


class RemotePartitionDeleteState(enum.IntEnum):
    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2

    @staticmethod
    def is_valid_transition(
        source: RemotePartitionDeleteState | None, target: RemotePartitionDeleteState
    ) -> bool:
        """Kafka's ``isValidTransition``: a strictly forward chain, self transitions valid."""
        if source is None:
            return target is RemotePartitionDeleteState.DELETE_PARTITION_MARKED
        return source is target or target == source + 1


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentId:
    topic_id: uuid.UUID
    topic: str
    partition: int
    id: uuid.UUID

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return TopicIdPartition(self.topic_id, self.topic, self.partition)

    @classmethod
    def generate(cls, tp: TopicIdPartition) -> RemoteLogSegmentId:
        return cls(tp.topic_id, tp.topic, tp.partition, uuid.uuid4())

    def __str__(self) -> str:
        return f"{self.topic_id_partition}/{self.id}"


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    """One remote segment: offsets ``start_offset..end_offset`` (both inclusive), the
    leader epochs it spans (epoch -> first offset of that epoch within the segment) and its
    state; ``broker_id`` and ``event_timestamp_ms`` are those of the latest event."""

    segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_bytes: int
    segment_leader_epochs: dict[int, int]
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED
    custom_metadata: bytes | None = None

    def __post_init__(self) -> None:
        if self.start_offset < 0:
            raise ValueError(f"remote segment start offset {self.start_offset} is negative")
        if self.end_offset < self.start_offset:
            raise ValueError(
                f"remote segment end offset {self.end_offset} is below its start offset "
                f"{self.start_offset}"
            )
        if not self.segment_leader_epochs:
            raise ValueError("a remote segment needs at least one leader epoch")
        # Kept sorted by epoch (Kafka's NavigableMap), whatever order the caller used.
        object.__setattr__(
            self, "segment_leader_epochs", dict(sorted(self.segment_leader_epochs.items()))
        )

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.segment_id.topic_id_partition

    def with_update(self, update: RemoteLogSegmentMetadataUpdate) -> RemoteLogSegmentMetadata:
        """Kafka's ``createWithUpdates``: the update's state, broker, time and metadata."""
        if update.segment_id != self.segment_id:
            raise ValueError(f"update for {update.segment_id} applied to {self.segment_id}")
        return replace(
            self,
            broker_id=update.broker_id,
            event_timestamp_ms=update.event_timestamp_ms,
            state=update.state,
            custom_metadata=update.custom_metadata,
        )


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadataUpdate:
    segment_id: RemoteLogSegmentId
    event_timestamp_ms: int
    state: RemoteLogSegmentState
    broker_id: int
    custom_metadata: bytes | None = None

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.segment_id.topic_id_partition


@dataclass(frozen=True, slots=True)
class RemotePartitionDeleteMetadata:
    topic_id_partition: TopicIdPartition
    state: RemotePartitionDeleteState
    event_timestamp_ms: int
    broker_id: int


RemoteLogMetadata = (
    RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate | RemotePartitionDeleteMetadata
)


class IndexType(enum.Enum):
    """The files copied with a segment besides its records (Kafka's
    ``RemoteStorageManager.IndexType``)."""

    OFFSET = "index"
    TIMESTAMP = "timeindex"
    PRODUCER_SNAPSHOT = "snapshot"
    TRANSACTION = "txnindex"
    LEADER_EPOCH = "leader_epoch_checkpoint"

    @property
    def suffix(self) -> str:
        """The object/file name suffix the built-in managers use (Kafka's file suffixes)."""
        return "." + self.value


@dataclass(frozen=True, slots=True)
class LogSegmentData:
    """What one copy uploads: the segment's files on local disk and the leader-epoch
    checkpoint entries covering it (already serialised, Kafka's checkpoint text format).
    The transaction index and producer snapshot may be absent."""

    log_segment: Path
    offset_index: Path
    time_index: Path
    transaction_index: Path | None
    producer_snapshot: Path | None
    leader_epoch_index: bytes = field(repr=False)

    def index_source(self, index_type: IndexType) -> Path | bytes | None:
        """Where ``index_type``'s content comes from (None: the segment has none)."""
        match index_type:
            case IndexType.OFFSET:
                return self.offset_index
            case IndexType.TIMESTAMP:
                return self.time_index
            case IndexType.TRANSACTION:
                return self.transaction_index
            case IndexType.PRODUCER_SNAPSHOT:
                return self.producer_snapshot
            case IndexType.LEADER_EPOCH:
                return self.leader_epoch_index
