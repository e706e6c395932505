"""KIP-405's RemotePartitionRemover: the leader of each ``__remote_log_metadata``
partition finishes the deletion of every user partition marked deleted there.

Deleting a tiered topic only writes DELETE_PARTITION_MARKED (the partition's last
leader does, as its replica goes). This object, run by the broker's periodic pass, reads
the metadata partitions this broker leads from its own replica, keeps the last partition
delete state of each user partition in them, and hands every partition marked or started
but not FINISHED, whose topic id is gone from the metadata image, to the
RemoteLogManager, which deletes its remote segments and records STARTED and FINISHED.
Because the states are in the replicated topic, a deletion cut short by a crash, a
restart or a leader change of the metadata partition is resumed by whichever broker
leads that partition next.

A topic can also go without any MARKED: a kill -9 between the controller's delete and the
marker, or a topic deleted while every replica of a partition was offline. So the remover
also keeps every user partition with segments in its metadata partitions and deletes,
as above, those whose topic id has been absent from the image for ``orphan_grace_ms``
(the grace covers an image that lags a topic just created elsewhere).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from moldau.metadata.image import MetadataImage
from moldau.records.record import decode_all
from moldau.replication.remote_log_manager import RemoteLogManager
from moldau.replication.replica_manager import ReplicaManager
from moldau.storage.remote.metadata_records import (
    REMOTE_LOG_METADATA_TOPIC,
    MetadataRecordError,
    deserialize,
)
from moldau.storage.remote.segment import (
    RemoteLogSegmentMetadata,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)

log = logging.getLogger(__name__)

READ_CHUNK = 1 << 20

_FINISHED = RemotePartitionDeleteState.DELETE_PARTITION_FINISHED


@dataclass
class RemotePartitionRemover:
    replica_manager: ReplicaManager
    remote_log_manager: RemoteLogManager
    image: Callable[[], MetadataImage]
    num_partitions: int
    orphan_grace_ms: int
    # led metadata partition -> next offset to read
    _positions: dict[int, int] = field(default_factory=dict, init=False)
    # metadata partition -> user partitions marked or started, not finished
    _unfinished: dict[int, set[TopicIdPartition]] = field(default_factory=dict, init=False)
    # metadata partition -> user partitions with segments and no FINISHED delete
    _tiered: dict[int, set[TopicIdPartition]] = field(default_factory=dict, init=False)
    # user partition with segments whose topic id is not in the image -> first seen so (ms)
    _orphans: dict[TopicIdPartition, int] = field(default_factory=dict, init=False)

    def run_once(self) -> None:
        """Read what the led metadata partitions gained, then start the deletions due."""
        image = self.image()
        if image.offset < 0:
            return  # no caught-up image yet: every topic would look deleted
        for p in range(self.num_partitions):
            partition = self.replica_manager.partition((REMOTE_LOG_METADATA_TOPIC, p))
            if partition is None or not partition.is_leader:
                self._positions.pop(p, None)
                self._unfinished.pop(p, None)
                self._tiered.pop(p, None)
                continue
            self._read(p)
        live = {uuid.UUID(bytes=t.topic_id) for t in image.topics.values()}
        for pending in self._unfinished.values():
            for tp in pending:
                if tp.topic_id not in live and self.remote_log_manager.remove_partition(tp):
                    log.info("%s: deleting the remote log of the deleted partition", tp)
        self._remove_orphans(live)

    def _remove_orphans(self, live: set[uuid.UUID]) -> None:
        """Delete the remote logs of partitions whose topic went without a MARKED."""
        now = self.replica_manager.clock.now_ms()
        orphans = {
            tp
            for p, tiered in self._tiered.items()
            for tp in tiered - self._unfinished.get(p, set())
            if tp.topic_id not in live
        }
        self._orphans = {tp: self._orphans.get(tp, now) for tp in orphans}
        for tp, since in self._orphans.items():
            if now - since >= self.orphan_grace_ms and self.remote_log_manager.remove_partition(tp):
                log.info("%s: deleting the remote log of a partition whose topic is gone", tp)

    def _read(self, p: int) -> None:
        tp = (REMOTE_LOG_METADATA_TOPIC, p)
        replica_log = self.replica_manager.local_log(tp)
        if replica_log is None:
            return
        hw = self.replica_manager.high_watermark(tp)
        position = max(self._positions.get(p, 0), replica_log.log_start_offset)
        unfinished = self._unfinished.setdefault(p, set())
        tiered = self._tiered.setdefault(p, set())
        while position < hw:
            data = replica_log.read_bytes(position, READ_CHUNK, max_offset=hw)
            if not data:
                break
            before = position
            for _, batch in decode_all(data):
                for record in batch:
                    if record.offset < position or record.offset >= hw:
                        continue
                    position = record.offset + 1
                    event = _event(record.value)
                    if isinstance(event, RemoteLogSegmentMetadata):
                        tiered.add(event.segment_id.topic_id_partition)
                    elif event is None:
                        continue
                    elif event.state is _FINISHED:
                        unfinished.discard(event.topic_id_partition)
                        tiered.discard(event.topic_id_partition)
                    else:
                        unfinished.add(event.topic_id_partition)
            if position == before:
                break  # nothing readable below the HW yet
        self._positions[p] = position


def _event(value: bytes | None) -> RemoteLogSegmentMetadata | RemotePartitionDeleteMetadata | None:
    """A new segment or a partition delete state (the rest does not concern the remover)."""
    if value is None:
        return None
    try:
        event = deserialize(value)
    except MetadataRecordError:
        return None  # the metadata manager logs it
    if isinstance(event, RemoteLogSegmentMetadata | RemotePartitionDeleteMetadata):
        return event
    return None
