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
    # led metadata partition -> next offset to read
    _positions: dict[int, int] = field(default_factory=dict, init=False)
    # metadata partition -> user partitions marked or started, not finished
    _unfinished: dict[int, set[TopicIdPartition]] = field(default_factory=dict, init=False)

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
                continue
            self._read(p)
        live = {uuid.UUID(bytes=t.topic_id) for t in image.topics.values()}
        for pending in self._unfinished.values():
            for tp in pending:
                if tp.topic_id not in live and self.remote_log_manager.remove_partition(tp):
                    log.info("%s: deleting the remote log of the deleted partition", tp)

    def _read(self, p: int) -> None:
        tp = (REMOTE_LOG_METADATA_TOPIC, p)
        replica_log = self.replica_manager.local_log(tp)
        if replica_log is None:
            return
        hw = self.replica_manager.high_watermark(tp)
        position = max(self._positions.get(p, 0), replica_log.log_start_offset)
        unfinished = self._unfinished.setdefault(p, set())
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
                    event = _partition_delete(record.value)
                    if event is None:
                        continue
                    if event.state is _FINISHED:
                        unfinished.discard(event.topic_id_partition)
                    else:
                        unfinished.add(event.topic_id_partition)
            if position == before:
                break  # nothing readable below the HW yet
        self._positions[p] = position


def _partition_delete(value: bytes | None) -> RemotePartitionDeleteMetadata | None:
    if value is None:
        return None
    try:
        event = deserialize(value)
    except MetadataRecordError:
        return None  # the metadata manager logs it
    return event if isinstance(event, RemotePartitionDeleteMetadata) else None
