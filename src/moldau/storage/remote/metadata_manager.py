"""The remote log metadata manager: Kafka's ``TopicBasedRemoteLogMetadataManager`` with
its IO injected, so it lives below the broker that provides it.

Events are written to ``__remote_log_metadata`` (the partition Kafka's partitioner picks
for the user partition) and take effect only when read back from there, on every broker
alike: a write returns once this broker's own reader has applied it, so what a leader
did is what its followers and its successor see. The broker feeds the reader:

- the user partitions this broker leads or follows are assigned to it
  (:meth:`on_partition_assigned`, by the RemoteLogManager as Kafka's does), which names
  the metadata partitions to read (:meth:`needed_metadata_partitions`, also pushed to
  ``on_needed_change``) and where to read each from (:meth:`position`: a new assignment
  starts its metadata partition over from the beginning, since the events read before
  were not kept for it);
- it hands over every record read, in order (:meth:`on_record`), and says when it reached
  the high watermark (:meth:`on_caught_up`): the caches waiting for that partition are
  then ready, and reads of a cache that is not ready raise
  :class:`RemoteLogMetadataNotReadyError` (retriable; Kafka's REPLICA_NOT_AVAILABLE).

Every method runs on the event loop; the caches it hands out are read there too (their
segment metadata is immutable and may go to worker threads).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from moldau.storage.remote.metadata_cache import RemoteLogMetadataCache
from moldau.storage.remote.metadata_records import (
    DEFAULT_METADATA_TOPIC_PARTITIONS,
    REMOTE_LOG_METADATA_TOPIC,
    MetadataRecordError,
    deserialize,
    metadata_partition,
    serialize,
)
from moldau.storage.remote.segment import (
    RemoteLogMetadata,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemotePartitionDeleteMetadata,
    TopicIdPartition,
)
from moldau.storage.remote.storage_manager import RemoteResourceNotFoundError, RemoteStorageError

log = logging.getLogger(__name__)

# Kafka's remote.log.metadata.consume.wait.ms: how long a write waits to be read back.
DEFAULT_CONSUME_WAIT_MS = 120_000

# Append one value to partition N of __remote_log_metadata; the offset it got, once the
# high watermark has passed it (acks=all).
Publish = Callable[[int, bytes], Awaitable[int]]


class RemoteLogMetadataNotReadyError(RemoteStorageError):
    """The partition's remote log metadata is still being read (retriable)."""


@dataclass
class _Assigned:
    cache: RemoteLogMetadataCache = field(default_factory=RemoteLogMetadataCache)
    ready: bool = False
    applied: int = -1  # the last metadata offset applied to the cache


class TopicBasedRemoteLogMetadataManager:
    def __init__(
        self,
        publish: Publish,
        num_partitions: int = DEFAULT_METADATA_TOPIC_PARTITIONS,
        consume_wait_ms: int = DEFAULT_CONSUME_WAIT_MS,
        on_needed_change: Callable[[set[int]], None] | None = None,
    ) -> None:
        self._publish = publish
        # Told the metadata partitions to read whenever they change (the broker's readers).
        self._on_needed_change = on_needed_change
        self.num_partitions = num_partitions
        self.consume_wait_ms = consume_wait_ms
        self._assigned: dict[TopicIdPartition, _Assigned] = {}
        self._positions: dict[int, int] = {}  # metadata partition -> next offset to read
        self._waiters: dict[int, list[tuple[int, asyncio.Future[None]]]] = {}

    def metadata_partition(self, tp: TopicIdPartition) -> int:
        return metadata_partition(tp, self.num_partitions)

    # -- the feed ------------------------------------------------------------------
    def on_partition_assigned(self, tp: TopicIdPartition) -> None:
        """This broker now leads or follows ``tp``: keep its metadata (Kafka's
        onPartitionLeadershipChanges). Re-reads its metadata partition from the start."""
        if tp in self._assigned:
            return
        self._assigned[tp] = _Assigned()
        self._positions[self.metadata_partition(tp)] = 0
        self._needed_changed()

    def on_partition_unassigned(self, tp: TopicIdPartition) -> None:
        """This broker no longer hosts ``tp`` (Kafka's onStopPartitions)."""
        if self._assigned.pop(tp, None) is None:
            return
        p = self.metadata_partition(tp)
        if p not in self.needed_metadata_partitions():
            self._positions.pop(p, None)
            self._release(p, cancelled=True)
            self._needed_changed()

    def needed_metadata_partitions(self) -> set[int]:
        return {self.metadata_partition(tp) for tp in self._assigned}

    def _needed_changed(self) -> None:
        if self._on_needed_change is not None:
            self._on_needed_change(self.needed_metadata_partitions())

    def position(self, metadata_partition: int) -> int:
        """The next offset of ``metadata_partition`` to hand to :meth:`on_record`."""
        return self._positions.get(metadata_partition, 0)

    def on_record(self, metadata_partition: int, offset: int, value: bytes | None) -> None:
        """One record of ``metadata_partition``, in offset order. A value that is not an
        event this release reads is skipped with a warning: reading must never stop."""
        if metadata_partition not in self._positions:
            return
        self._positions[metadata_partition] = max(self.position(metadata_partition), offset + 1)
        event: RemoteLogMetadata | None = None
        if value is not None:
            try:
                event = deserialize(value)
            except MetadataRecordError as e:
                log.warning(
                    "%s-%d: skipping the record at offset %d: %s",
                    REMOTE_LOG_METADATA_TOPIC,
                    metadata_partition,
                    offset,
                    e,
                )
        if event is not None:
            assigned = self._assigned.get(event.topic_id_partition)
            if assigned is not None and offset > assigned.applied:
                assigned.cache.apply(event)
                assigned.applied = offset
        self._release(metadata_partition)

    def on_caught_up(self, metadata_partition: int, high_watermark: int) -> None:
        """The reader of ``metadata_partition`` has handed over everything below
        ``high_watermark``: the caches that waited for it are ready."""
        if self.position(metadata_partition) < high_watermark:
            return
        for tp, assigned in self._assigned.items():
            if not assigned.ready and self.metadata_partition(tp) == metadata_partition:
                assigned.ready = True

    def _release(self, metadata_partition: int, cancelled: bool = False) -> None:
        waiting = self._waiters.get(metadata_partition)
        if not waiting:
            return
        read = self.position(metadata_partition)
        still = []
        for offset, fut in waiting:
            if fut.done():
                continue
            if cancelled:
                fut.set_exception(
                    RemoteStorageError(f"stopped reading {REMOTE_LOG_METADATA_TOPIC}")
                )
            elif offset < read:
                fut.set_result(None)
            else:
                still.append((offset, fut))
        self._waiters[metadata_partition] = still

    # -- writes --------------------------------------------------------------------
    async def add_remote_log_segment_metadata(self, metadata: RemoteLogSegmentMetadata) -> None:
        """A copy starts (the metadata must be COPY_SEGMENT_STARTED)."""
        await self._store(metadata)

    async def update_remote_log_segment_metadata(
        self, update: RemoteLogSegmentMetadataUpdate
    ) -> None:
        """A segment's copy finished, or its deletion started or finished."""
        await self._store(update)

    async def put_remote_partition_delete_metadata(
        self, metadata: RemotePartitionDeleteMetadata
    ) -> None:
        await self._store(metadata)

    async def _store(self, event: RemoteLogMetadata) -> None:
        """Write ``event`` and wait until this broker has read it back, so the caller's
        next read sees it. An event the partition's cache would drop is refused first
        (ValueError); the write or the wait failing raises RemoteStorageError."""
        tp = event.topic_id_partition
        assigned = self._assigned.get(tp)
        if assigned is not None and assigned.ready:
            why = assigned.cache.check(event)
            if why is not None:
                raise ValueError(f"{tp}: {why}")
        p = self.metadata_partition(tp)
        offset = await self._publish(p, serialize(event))
        if p not in self._positions:
            return  # nothing on this broker reads it
        if offset < self.position(p):
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(p, []).append((offset, fut))
        try:
            await asyncio.wait_for(fut, self.consume_wait_ms / 1000)
        except TimeoutError:
            raise RemoteStorageError(
                f"{tp}: the event at {REMOTE_LOG_METADATA_TOPIC}-{p} offset {offset} was not "
                f"read back within {self.consume_wait_ms} ms"
            ) from None

    # -- reads ---------------------------------------------------------------------
    def is_ready(self, tp: TopicIdPartition) -> bool:
        assigned = self._assigned.get(tp)
        return assigned is not None and assigned.ready

    def cache(self, tp: TopicIdPartition) -> RemoteLogMetadataCache:
        """``tp``'s remote log metadata, for reads: RemoteResourceNotFoundError if this
        broker does not host ``tp``, RemoteLogMetadataNotReadyError while it loads."""
        assigned = self._assigned.get(tp)
        if assigned is None:
            raise RemoteResourceNotFoundError(f"no remote log metadata kept for {tp}")
        if not assigned.ready:
            raise RemoteLogMetadataNotReadyError(f"the remote log metadata of {tp} is loading")
        return assigned.cache

    # The cache reads the RemoteLogManager makes, by partition.
    def segments(self, tp: TopicIdPartition) -> list[RemoteLogSegmentMetadata]:
        return self.cache(tp).segments()

    def all_segments(self, tp: TopicIdPartition) -> list[RemoteLogSegmentMetadata]:
        return self.cache(tp).all_segments()

    def highest_offset_for_epoch(self, tp: TopicIdPartition, epoch: int) -> int | None:
        return self.cache(tp).highest_offset_for_epoch(epoch)
