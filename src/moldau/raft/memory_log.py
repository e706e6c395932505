"""An in-memory `RaftLog` for the deterministic simulation and the unit tests.

One entry per offset; the leader-epoch cache is a list of (epoch, start offset) pairs
plus a base position: the snapshot the log starts after, or (0, 0) for a log from zero.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from moldau.raft.log import LeaderChange, LogAppendInfo, OffsetAndEpoch

ENTRY_OVERHEAD_BYTES = 16


@dataclass(frozen=True, slots=True)
class LogEntry:
    offset: int
    epoch: int
    value: bytes | LeaderChange

    @property
    def size(self) -> int:
        value = self.value
        return ENTRY_OVERHEAD_BYTES + (len(value) if isinstance(value, bytes) else 0)


@dataclass(frozen=True, slots=True)
class MemorySnapshot:
    snapshot_id: OffsetAndEpoch
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)

    def slice(self, position: int, max_bytes: int) -> bytes:
        return self.data[position : position + max_bytes]


class MemorySnapshotWriter:
    def __init__(self, log: MemoryRaftLog, snapshot_id: OffsetAndEpoch) -> None:
        self._log = log
        self._id = snapshot_id
        self._data = bytearray()

    @property
    def snapshot_id(self) -> OffsetAndEpoch:
        return self._id

    @property
    def size(self) -> int:
        return len(self._data)

    def append(self, chunk: bytes) -> None:
        self._data += chunk

    def freeze(self) -> None:
        self._log._snapshots[self._id] = MemorySnapshot(self._id, bytes(self._data))


class MemoryRaftLog:
    def __init__(self) -> None:
        self._entries: list[LogEntry] = []
        self._base = OffsetAndEpoch(0, 0)
        self._epochs: list[tuple[int, int]] = []
        self._snapshots: dict[OffsetAndEpoch, MemorySnapshot] = {}

    @property
    def log_start_offset(self) -> int:
        return self._base.offset

    @property
    def log_end_offset(self) -> int:
        return self._base.offset + len(self._entries)

    @property
    def last_fetched_epoch(self) -> int:
        return self._epochs[-1][0] if self._epochs else self._base.epoch

    def entries(self) -> list[LogEntry]:
        """Everything from the log start offset (for checks; not part of `RaftLog`)."""
        return list(self._entries)

    def entry(self, offset: int) -> LogEntry | None:
        index = offset - self._base.offset
        return self._entries[index] if 0 <= index < len(self._entries) else None

    def _append(self, epoch: int, values: Sequence[bytes | LeaderChange]) -> LogAppendInfo:
        if not values:
            raise ValueError("nothing to append")
        if epoch < self.last_fetched_epoch:
            raise ValueError(
                f"epoch {epoch} is below the log's last epoch {self.last_fetched_epoch}"
            )
        first = self.log_end_offset
        if not self._epochs or self._epochs[-1][0] != epoch:
            self._epochs.append((epoch, first))
        self._entries.extend(LogEntry(first + i, epoch, value) for i, value in enumerate(values))
        return LogAppendInfo(first, self.log_end_offset - 1)

    def append_as_leader(self, records: Sequence[bytes], leader_epoch: int) -> LogAppendInfo:
        return self._append(leader_epoch, records)

    def append_leader_change(self, message: LeaderChange, leader_epoch: int) -> LogAppendInfo:
        return self._append(leader_epoch, [message])

    def append_as_follower(self, records: object) -> LogAppendInfo | None:
        assert isinstance(records, tuple)
        if not records:
            return None
        if records[0].offset != self.log_end_offset:
            raise ValueError(
                f"follower append at {records[0].offset}, log ends at {self.log_end_offset}"
            )
        first = self.log_end_offset
        for entry in records:
            if not self._epochs or self._epochs[-1][0] != entry.epoch:
                if entry.epoch < self.last_fetched_epoch:
                    raise ValueError("follower append goes back in epoch")
                self._epochs.append((entry.epoch, entry.offset))
            self._entries.append(entry)
        return LogAppendInfo(first, self.log_end_offset - 1)

    def truncate_to(self, offset: int) -> None:
        if offset >= self.log_end_offset:
            return
        if offset < self.log_start_offset:
            raise ValueError(
                f"truncation to {offset} is below the log start {self.log_start_offset}"
            )
        del self._entries[offset - self._base.offset :]
        while self._epochs and self._epochs[-1][1] >= offset:
            self._epochs.pop()

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        if epoch < self._base.epoch:
            return OffsetAndEpoch(self._base.offset, -1)
        index = bisect_right(self._epochs, epoch, key=lambda item: item[0])
        found = self._base.epoch if index == 0 else self._epochs[index - 1][0]
        end = self._epochs[index][1] if index < len(self._epochs) else self.log_end_offset
        return OffsetAndEpoch(end, found)

    def read(self, start_offset: int, max_bytes: int, max_offset: int | None = None) -> object:
        if start_offset < self.log_start_offset:
            raise ValueError(
                f"read at {start_offset} is below the log start {self.log_start_offset}"
            )
        stop = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        out: list[LogEntry] = []
        budget = max_bytes
        for index in range(start_offset - self._base.offset, stop - self._base.offset):
            entry = self._entries[index]
            if out and entry.size > budget:
                break
            out.append(entry)
            budget -= entry.size
        return tuple(out)

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return max(self._snapshots, key=lambda s: s.offset, default=None)

    def earliest_snapshot_id(self) -> OffsetAndEpoch | None:
        return min(self._snapshots, key=lambda s: s.offset, default=None)

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> MemorySnapshot | None:
        return self._snapshots.get(snapshot_id)

    def create_new_snapshot(self, snapshot_id: OffsetAndEpoch) -> MemorySnapshotWriter | None:
        if snapshot_id in self._snapshots:
            return None
        return MemorySnapshotWriter(self, snapshot_id)

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        if snapshot_id not in self._snapshots:
            raise ValueError(f"unknown snapshot {snapshot_id}")
        start = snapshot_id.offset
        if start <= self.log_start_offset:
            return
        if start > self.log_end_offset:
            raise ValueError(f"snapshot {snapshot_id} is past the log end {self.log_end_offset}")
        del self._entries[: start - self._base.offset]
        kept = [(epoch, first) for epoch, first in self._epochs if first >= start]
        if self._entries and (not kept or kept[0][1] > start):
            kept.insert(0, (self._entries[0].epoch, start))
        self._epochs = kept
        self._base = snapshot_id
        self._drop_snapshots_before(snapshot_id)

    def truncate_to_latest_snapshot(self) -> bool:
        latest = self.latest_snapshot_id()
        if latest is None or self._holds(latest):
            return False
        self._entries = []
        self._epochs = []
        self._base = latest
        self._drop_snapshots_before(latest)
        return True

    def _holds(self, position: OffsetAndEpoch) -> bool:
        """Whether the record just before `position.offset` is here with `position.epoch`."""
        if position.offset == self._base.offset:
            return position.epoch == self._base.epoch
        entry = self.entry(position.offset - 1)
        return entry is not None and entry.epoch == position.epoch

    def _drop_snapshots_before(self, snapshot_id: OffsetAndEpoch) -> None:
        for old in [s for s in self._snapshots if s.offset < snapshot_id.offset]:
            del self._snapshots[old]
