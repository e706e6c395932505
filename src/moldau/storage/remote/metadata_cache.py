"""What one user partition has in the remote tier: Kafka's ``RemoteLogMetadataCache``, a
pure object fed the partition's ``__remote_log_metadata`` events in log order.

Segments are kept by id until DELETE_SEGMENT_FINISHED. Per leader epoch, the segments
that finished copying are indexed by the offset where the epoch starts in them, so a read
finds its segment from (epoch, offset) along the leader-epoch lineage, as Kafka's
RemoteLogLeaderEpochState does. A new leader may copy again what an old one had copied
(the old leader lagged, or a copy overlapped): the later segment replaces the earlier in
the index, which stays known (``all_segments``) so expiry deletes it. Events that break
Kafka's state transitions are dropped with an error log, as Kafka does: replaying the log
must never stop on one bad event.

| method                 | COPY_STARTED | COPY_FINISHED | DELETE_STARTED |
|------------------------|--------------|---------------|----------------|
| ``segment_for``        | no           | yes           | no             |
| ``segments``           | no           | yes (*)       | no             |
| ``all_segments``       | yes          | yes           | yes            |
| ``list_segments(e)``   | yes          | yes           | yes            |

(*) unless replaced by a later copy of the same offsets.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass, field

from moldau.storage.remote.segment import (
    RemoteLogMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
)

log = logging.getLogger(__name__)

_STARTED = RemoteLogSegmentState.COPY_SEGMENT_STARTED
_FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
_DELETING = RemoteLogSegmentState.DELETE_SEGMENT_STARTED
_DELETED = RemoteLogSegmentState.DELETE_SEGMENT_FINISHED


@dataclass
class _EpochState:
    """One leader epoch: the copied segments by the offset the epoch starts at in each,
    the others (copying, being deleted, or replaced by a later copy), and the highest
    offset of the epoch in any copied segment."""

    starts: list[int] = field(default_factory=list)  # sorted keys of by_start
    by_start: dict[int, RemoteLogSegmentId] = field(default_factory=dict)
    unreferenced: set[RemoteLogSegmentId] = field(default_factory=set)
    highest_offset: int | None = None

    def copy_finished(self, start: int, sid: RemoteLogSegmentId, epoch_end: int) -> None:
        # A later copy of offsets already covered replaces the earlier segments from its
        # start on (Kafka: duplicate or overlapping uploads after a leader change).
        while (
            self.starts
            and self.starts[-1] >= start
            and self.highest_offset is not None
            and self.highest_offset <= epoch_end
        ):
            self.unreferenced.add(self.by_start.pop(self.starts.pop()))
        if start not in self.by_start:
            bisect.insort(self.starts, start)
        self.by_start[start] = sid
        self.unreferenced.discard(sid)
        if self.highest_offset is None or epoch_end > self.highest_offset:
            self.highest_offset = epoch_end

    def delete_started(self, start: int, sid: RemoteLogSegmentId) -> None:
        if self.by_start.get(start) == sid:
            del self.by_start[start]
            self.starts.remove(start)
        self.unreferenced.add(sid)

    def floor(self, offset: int) -> RemoteLogSegmentId | None:
        i = bisect.bisect_right(self.starts, offset)
        return self.by_start[self.starts[i - 1]] if i else None

    def ids(self) -> list[RemoteLogSegmentId]:
        return [self.by_start[s] for s in self.starts] + list(self.unreferenced)


def _epoch_end(md: RemoteLogSegmentMetadata, epoch: int) -> int:
    """The last offset of ``epoch`` within the segment: where the next epoch starts, or
    the segment's end."""
    later = [o for e, o in md.segment_leader_epochs.items() if e > epoch]
    return later[0] - 1 if later else md.end_offset


class RemoteLogMetadataCache:
    def __init__(self) -> None:
        self._segments: dict[RemoteLogSegmentId, RemoteLogSegmentMetadata] = {}
        self._epochs: dict[int, _EpochState] = {}
        self.partition_delete: RemotePartitionDeleteMetadata | None = None

    # -- events ----------------------------------------------------------------------
    def apply(self, event: RemoteLogMetadata) -> bool:
        """Apply one event; False if it was dropped (an invalid transition, an update of
        an unknown segment), which is logged."""
        if isinstance(event, RemoteLogSegmentMetadata):
            return self._add_copy_in_progress(event)
        if isinstance(event, RemoteLogSegmentMetadataUpdate):
            return self._update(event)
        return self._partition_delete(event)

    def check(self, event: RemoteLogMetadata) -> str | None:
        """Why ``event`` would be dropped now (None: it would apply)."""
        if isinstance(event, RemotePartitionDeleteMetadata):
            current = self.partition_delete.state if self.partition_delete else None
            if not RemotePartitionDeleteState.is_valid_transition(current, event.state):
                return f"partition delete state {_name(current)} cannot become {event.state.name}"
            return None
        if isinstance(event, RemoteLogSegmentMetadata) and event.state is not _STARTED:
            return f"a new remote segment must be {_STARTED.name}, not {event.state.name}"
        if isinstance(event, RemoteLogSegmentMetadataUpdate) and event.state is _STARTED:
            return f"an update cannot move a segment back to {_STARTED.name}"
        existing = self._segments.get(event.segment_id)
        if isinstance(event, RemoteLogSegmentMetadataUpdate) and existing is None:
            return f"no remote segment {event.segment_id}"
        state = existing.state if existing else None
        if not RemoteLogSegmentState.is_valid_transition(state, event.state):
            return f"segment {event.segment_id} {_name(state)} cannot become {event.state.name}"
        return None

    def _refused(self, event: RemoteLogMetadata) -> bool:
        why = self.check(event)
        if why is not None:
            log.error("dropping remote log metadata event %s: %s", event, why)
        return why is not None

    def _add_copy_in_progress(self, md: RemoteLogSegmentMetadata) -> bool:
        if self._refused(md):
            return False
        for epoch in md.segment_leader_epochs:
            self._epochs.setdefault(epoch, _EpochState()).unreferenced.add(md.segment_id)
        self._segments[md.segment_id] = md
        return True

    def _update(self, update: RemoteLogSegmentMetadataUpdate) -> bool:
        if self._refused(update):
            return False
        md = self._segments[update.segment_id].with_update(update)
        for epoch, start in md.segment_leader_epochs.items():
            state = self._epochs.setdefault(epoch, _EpochState())
            if md.state is _FINISHED:
                state.copy_finished(start, md.segment_id, _epoch_end(md, epoch))
            elif md.state is _DELETING:
                state.delete_started(start, md.segment_id)
            else:  # DELETE_SEGMENT_FINISHED: forgotten
                state.unreferenced.discard(md.segment_id)
        if md.state is _DELETED:
            del self._segments[md.segment_id]
        else:
            self._segments[md.segment_id] = md
        return True

    def _partition_delete(self, event: RemotePartitionDeleteMetadata) -> bool:
        if self._refused(event):
            return False
        self.partition_delete = event
        if event.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
            self._segments.clear()
            self._epochs.clear()
        return True

    # -- reads -----------------------------------------------------------------------
    def segment_for(self, leader_epoch: int, offset: int) -> RemoteLogSegmentMetadata | None:
        """The copied segment holding ``offset`` written in ``leader_epoch`` (Kafka's
        ``remoteLogSegmentMetadata(leaderEpoch, offset)``)."""
        state = self._epochs.get(leader_epoch)
        sid = state.floor(offset) if state is not None else None
        if sid is None:
            return None
        md = self._segments[sid]
        return md if offset <= _epoch_end(md, leader_epoch) else None

    def highest_offset_for_epoch(self, leader_epoch: int) -> int | None:
        """The highest offset of ``leader_epoch`` in any copied segment."""
        state = self._epochs.get(leader_epoch)
        return state.highest_offset if state is not None else None

    def list_segments(self, leader_epoch: int) -> list[RemoteLogSegmentMetadata]:
        """Every known segment holding ``leader_epoch``, by start offset."""
        state = self._epochs.get(leader_epoch)
        ids = state.ids() if state is not None else []
        return sorted((self._segments[i] for i in ids), key=_order)

    def all_segments(self) -> list[RemoteLogSegmentMetadata]:
        """Every segment not deleted yet, whatever its state, by start offset."""
        return sorted(self._segments.values(), key=_order)

    def segment(self, sid: RemoteLogSegmentId) -> RemoteLogSegmentMetadata | None:
        """The segment's metadata as it is now (None: deleted, or never known)."""
        return self._segments.get(sid)

    def segments(self) -> list[RemoteLogSegmentMetadata]:
        """The segments reads use (COPY_SEGMENT_FINISHED and not replaced by a later copy
        of the same offsets), by start offset."""
        used = {sid for state in self._epochs.values() for sid in state.by_start.values()}
        return sorted((self._segments[sid] for sid in used), key=_order)

    def log_start_offset(self) -> int | None:
        """The first offset in the remote tier (None: nothing copied)."""
        return min((md.start_offset for md in self.segments()), default=None)

    def size_bytes(self) -> int:
        """Bytes of the readable segments."""
        return sum(md.segment_size_bytes for md in self.segments())


def _order(md: RemoteLogSegmentMetadata) -> tuple[int, int]:
    return md.start_offset, md.end_offset


def _name(state: RemoteLogSegmentState | RemotePartitionDeleteState | None) -> str:
    return state.name if state is not None else "unknown"
