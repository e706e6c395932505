"""The replicated log as the Raft core sees it (Kafka's ReplicatedLog), and its value types.

The core never looks inside records: what `read` returns is handed to a follower's
`append_as_follower` and to the local state machine as committed data. The in-memory log
(`memory_log.py`) backs the simulation and the unit tests; the storage-backed one maps
these calls onto `UnifiedLog.append_as_leader` / `append_as_follower` / `truncate_to` and the
leader-epoch cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from functools import total_ordering
from typing import Protocol


@total_ordering
@dataclass(frozen=True, slots=True)
class OffsetAndEpoch:
    """A log position; ordered by epoch first, then offset, as Kafka compares them.

    As a snapshot id, `offset` is the snapshot's end offset (exclusive) and `epoch` the
    epoch of the record just before it.
    """

    offset: int
    epoch: int

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, OffsetAndEpoch):
            return NotImplemented
        return (self.epoch, self.offset) < (other.epoch, other.offset)


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """Kafka's LeaderChangeMessage control record, written first in every leader epoch."""

    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    first_offset: int
    last_offset: int


class RawSnapshot(Protocol):
    """A frozen snapshot's bytes (the state machine's image at `snapshot_id`)."""

    @property
    def snapshot_id(self) -> OffsetAndEpoch: ...

    @property
    def size(self) -> int: ...

    def slice(self, position: int, max_bytes: int) -> bytes: ...


class SnapshotWriter(Protocol):
    """A snapshot being written, chunk by chunk; `freeze` makes it visible."""

    @property
    def snapshot_id(self) -> OffsetAndEpoch: ...

    @property
    def size(self) -> int: ...

    def append(self, chunk: bytes) -> None: ...

    def freeze(self) -> None: ...


class RaftLog(Protocol):
    """What the Raft core needs from the `__cluster_metadata` log.

    Appends must be durable (flushed) before the effects of the same step are sent:
    a voter's fetch offset counts towards the high watermark.
    """

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def last_fetched_epoch(self) -> int:
        """Epoch of the last record, else of the snapshot at the log start, else 0."""
        ...

    def append_as_leader(self, records: Sequence[bytes], leader_epoch: int) -> LogAppendInfo: ...

    def append_leader_change(self, message: LeaderChange, leader_epoch: int) -> LogAppendInfo: ...

    def append_as_follower(self, records: object) -> LogAppendInfo | None:
        """Append what the leader's `read` returned (None when it held no records)."""
        ...

    def truncate_to(self, offset: int) -> None: ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """Largest epoch <= `epoch` in the log and the offset where it ends (leader-epoch cache)."""
        ...

    def read(self, start_offset: int, max_bytes: int, max_offset: int | None = None) -> object:
        """Records from `start_offset` on, below `max_offset`, at most about `max_bytes`."""
        ...

    def latest_snapshot_id(self) -> OffsetAndEpoch | None: ...

    def earliest_snapshot_id(self) -> OffsetAndEpoch | None: ...

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> RawSnapshot | None: ...

    def create_new_snapshot(self, snapshot_id: OffsetAndEpoch) -> SnapshotWriter | None:
        """A writer for a new snapshot, or None when that snapshot is already stored."""
        ...

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """Drop the log prefix the snapshot covers (log start := snapshot end offset)."""
        ...

    def truncate_to_latest_snapshot(self) -> bool:
        """After a FetchSnapshot: restart the log at the latest snapshot's end offset, unless
        the log already holds the snapshot's last record (offset - 1 with its epoch)."""
        ...


class ValidKind(Enum):
    VALID = "valid"
    DIVERGING = "diverging"
    SNAPSHOT = "snapshot"


@dataclass(frozen=True, slots=True)
class ValidOffsetAndEpoch:
    kind: ValidKind
    offset_and_epoch: OffsetAndEpoch


def validate_offset_and_epoch(log: RaftLog, offset: int, epoch: int) -> ValidOffsetAndEpoch:
    """Check a follower's (fetch offset, last fetched epoch) against this log (KIP-595).

    A position behind the oldest snapshot gets the latest snapshot id; a position whose
    epoch ends earlier here (or is not here) gets the diverging epoch and its end offset.
    """
    if log.log_start_offset == 0 and offset == 0:
        return ValidOffsetAndEpoch(ValidKind.VALID, OffsetAndEpoch(0, 0))
    earliest = log.earliest_snapshot_id()
    if earliest is not None and (
        offset < log.log_start_offset
        or (offset == log.log_start_offset and epoch != earliest.epoch)
        or epoch < earliest.epoch
    ):
        latest = log.latest_snapshot_id()
        assert latest is not None
        return ValidOffsetAndEpoch(ValidKind.SNAPSHOT, latest)
    end = log.end_offset_for_epoch(epoch)
    if end.epoch != epoch or end.offset < offset:
        return ValidOffsetAndEpoch(ValidKind.DIVERGING, end)
    return ValidOffsetAndEpoch(ValidKind.VALID, OffsetAndEpoch(offset, epoch))


def truncation_offset(log: RaftLog, diverging: OffsetAndEpoch) -> int:
    """Where a follower cuts its log given the leader's diverging epoch (Kafka's rule)."""
    if diverging.epoch == 0:
        return min(diverging.offset, log.log_end_offset)
    local = log.end_offset_for_epoch(diverging.epoch)
    if local.epoch == diverging.epoch:
        return min(local.offset, diverging.offset)
    return local.offset
