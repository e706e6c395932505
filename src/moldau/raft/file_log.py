"""The `RaftLog` of a real node: the storage `UnifiedLog` of `<log.dir>/__cluster_metadata-0/` plus
Kafka's snapshot files in that directory (KafkaMetadataLog).

Records go in as one batch per append, stamped with the leader epoch, so the storage
layer's leader-epoch cache answers `end_offset_for_epoch`. A snapshot is
`<20-digit end offset>-<10-digit epoch>.checkpoint`, written as `.checkpoint.part` and
renamed once complete and fsynced. Cutting the log at a snapshot deletes the older
snapshot files first, then moves the log start and drops the whole segments below it, so
a crash in between leaves a log that still starts at its earliest snapshot: on open the
log start is the earliest snapshot's end offset (no separate checkpoint file needed).
A log written by earlier releases' local metadata log of a single node (epoch-0 batches,
no snapshots, no LeaderChange records) opens as it is.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from moldau.config.topic import LogConfig
from moldau.raft.config import MetadataLogConfig
from moldau.raft.log import LeaderChange, LogAppendInfo, OffsetAndEpoch
from moldau.raft.records import Batches, data_batch, leader_change_batch
from moldau.records.batch import scan_batches
from moldau.storage.checkpoint import fsync_dir
from moldau.storage.unified_log import UnifiedLog

logger = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = SNAPSHOT_SUFFIX + ".part"
DELETED_SUFFIX = SNAPSHOT_SUFFIX + ".deleted"
OFFSET_WIDTH = 20
EPOCH_WIDTH = 10


class InconsistentLogError(ValueError):
    """The log's files contradict each other (a prefix gone with no snapshot covering it)."""


def snapshot_file_stem(snapshot_id: OffsetAndEpoch) -> str:
    return f"{snapshot_id.offset:0{OFFSET_WIDTH}d}-{snapshot_id.epoch:0{EPOCH_WIDTH}d}"


def parse_snapshot_name(name: str) -> tuple[OffsetAndEpoch, str] | None:
    """(snapshot id, suffix) of a snapshot file name (final, partial or deleted), else None."""
    for suffix in (PARTIAL_SUFFIX, DELETED_SUFFIX, SNAPSHOT_SUFFIX):
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            offset, dash, epoch = (
                stem[:OFFSET_WIDTH],
                stem[OFFSET_WIDTH : OFFSET_WIDTH + 1],
                stem[OFFSET_WIDTH + 1 :],
            )
            if dash == "-" and offset.isdigit() and epoch.isdigit() and len(epoch) == EPOCH_WIDTH:
                return OffsetAndEpoch(int(offset), int(epoch)), suffix
            return None
    return None


class FileSnapshot:
    """A frozen snapshot file, read by position (FetchSnapshot chunks, loading)."""

    def __init__(self, path: Path, snapshot_id: OffsetAndEpoch) -> None:
        self.path = path
        self._id = snapshot_id
        self._fd = os.open(path, os.O_RDONLY)
        self._size = os.fstat(self._fd).st_size

    @property
    def snapshot_id(self) -> OffsetAndEpoch:
        return self._id

    @property
    def size(self) -> int:
        return self._size

    def slice(self, position: int, max_bytes: int) -> bytes:
        return os.pread(self._fd, max(0, min(max_bytes, self._size - position)), position)

    def read_all(self) -> bytes:
        return self.slice(0, self._size)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class FileSnapshotWriter:
    """A snapshot being written (by this node, or downloaded from the leader)."""

    def __init__(self, log: FileRaftLog, snapshot_id: OffsetAndEpoch) -> None:
        self._log = log
        self._id = snapshot_id
        self._size = 0
        self.path = log.dir / (snapshot_file_stem(snapshot_id) + PARTIAL_SUFFIX)
        self._file: BinaryIO | None = open(self.path, "wb")  # noqa: SIM115 -- open until freeze

    @property
    def snapshot_id(self) -> OffsetAndEpoch:
        return self._id

    @property
    def size(self) -> int:
        return self._size

    def append(self, chunk: bytes) -> None:
        if self._file is None:
            raise ValueError(f"snapshot {self._id} is already frozen")
        self._file.write(chunk)
        self._size += len(chunk)

    def freeze(self) -> None:
        """Make the snapshot durable and visible under its final name."""
        file = self._file
        if file is None:
            return
        file.flush()
        os.fsync(file.fileno())
        file.close()
        self._file = None
        os.replace(self.path, self._log.dir / (snapshot_file_stem(self._id) + SNAPSHOT_SUFFIX))
        fsync_dir(self._log.dir)
        self._log._snapshot_frozen(self._id)

    def __del__(self) -> None:
        if self._file is not None:  # abandoned download: the .part file goes on next open
            self._file.close()


class FileRaftLog:
    """`RaftLog` over a storage `UnifiedLog` and the snapshot files beside its segments."""

    def __init__(
        self, log: UnifiedLog, snapshots: dict[OffsetAndEpoch, FileSnapshot | None]
    ) -> None:
        self.log = log
        self.dir = log.dir
        self._snapshots = snapshots

    @classmethod
    def open(cls, directory: Path, config: MetadataLogConfig | None = None) -> FileRaftLog:
        """Open (creating) the log; leftovers of interrupted snapshot writes and deletions
        go, the log starts at the earliest snapshot, and a downloaded snapshot that is
        ahead of the log replaces it (a crash between download and truncation)."""
        config = config or MetadataLogConfig()
        directory.mkdir(parents=True, exist_ok=True)
        found: dict[OffsetAndEpoch, Path] = {}
        for name in os.listdir(directory):
            parsed = parse_snapshot_name(name)
            if parsed is None:
                continue
            snapshot_id, suffix = parsed
            if suffix == SNAPSHOT_SUFFIX:
                found[snapshot_id] = directory / name
            else:
                (directory / name).unlink(missing_ok=True)
        earliest = min(found, key=lambda s: s.offset, default=None)
        start = earliest.offset if earliest is not None else 0
        log = UnifiedLog.open(
            directory,
            LogConfig(
                segment_bytes=config.segment_bytes,
                retention_ms=-1,
                retention_bytes=-1,
                file_delete_delay_ms=0,
            ),
            recovery_point=start,
            log_start_offset=start,
        )
        raft_log = cls(log, dict.fromkeys(found))
        if log.log_start_offset > 0 and earliest is None:
            log.close()
            raise InconsistentLogError(
                f"{directory}: the log starts at offset {log.log_start_offset} and no "
                "snapshot covers the offsets before it"
            )
        if earliest is not None and log.log_start_offset == earliest.offset:
            log.delete_records_before(earliest.offset, earliest.offset)
        raft_log.truncate_to_latest_snapshot()
        return raft_log

    # ------------------------------------------------------------------ positions

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def _base(self) -> OffsetAndEpoch:
        """Where the log starts: the snapshot it starts after, or (start, 0)."""
        start = self.log.log_start_offset
        earliest = self.earliest_snapshot_id()
        if earliest is not None and earliest.offset == start:
            return earliest
        return OffsetAndEpoch(start, 0)

    @property
    def last_fetched_epoch(self) -> int:
        latest = self.log.epoch_cache.latest_epoch
        return self._base().epoch if latest is None else latest

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        base = self._base()
        if epoch < base.epoch:
            return OffsetAndEpoch(base.offset, -1)
        entries = self.log.epoch_cache.entries
        index = bisect_right(entries, epoch, key=lambda entry: entry[0])
        found = base.epoch if index == 0 else entries[index - 1][0]
        end = entries[index][1] if index < len(entries) else self.log.log_end_offset
        return OffsetAndEpoch(end, found)

    def _epoch_of(self, offset: int) -> int | None:
        if not self.log.log_start_offset <= offset < self.log.log_end_offset:
            return None
        return self.log.epoch_cache.epoch_for_offset(offset)

    # ------------------------------------------------------------------ appends

    def _check_epoch(self, epoch: int) -> None:
        if epoch < self.last_fetched_epoch:
            raise ValueError(
                f"epoch {epoch} is below the log's last epoch {self.last_fetched_epoch}"
            )

    def _append_leader_batch(self, batch: bytes, leader_epoch: int) -> LogAppendInfo:
        self._check_epoch(leader_epoch)
        buf = bytearray(batch)
        infos = scan_batches(buf, verify_crc=False, strict=False)
        result = self.log.append_as_leader(buf, infos, leader_epoch=leader_epoch)
        return LogAppendInfo(result.base_offset, result.last_offset)

    def append_as_leader(self, records: Sequence[bytes], leader_epoch: int) -> LogAppendInfo:
        if not records:
            raise ValueError("nothing to append")
        return self._append_leader_batch(data_batch(records), leader_epoch)

    def append_leader_change(self, message: LeaderChange, leader_epoch: int) -> LogAppendInfo:
        return self._append_leader_batch(leader_change_batch(message, leader_epoch), leader_epoch)

    def append_as_follower(self, records: object) -> LogAppendInfo | None:
        if not isinstance(records, Batches):
            if not isinstance(records, bytes | bytearray | memoryview):
                raise TypeError(f"cannot append {type(records).__name__} to the metadata log")
            records = Batches.parse(records)
        infos = records.infos
        if not infos:
            return None
        if infos[0].base_offset != self.log.log_end_offset:
            raise ValueError(
                f"follower append at {infos[0].base_offset}, log ends at {self.log.log_end_offset}"
            )
        previous = self.last_fetched_epoch
        for info in infos:
            if info.partition_leader_epoch < previous:
                raise ValueError("follower append goes back in epoch")
            previous = info.partition_leader_epoch
        result = self.log.append_as_follower(records.data, infos)
        return LogAppendInfo(result.base_offset, result.last_offset)

    def truncate_to(self, offset: int) -> None:
        if offset >= self.log.log_end_offset:
            return
        if offset < self.log.log_start_offset:
            raise ValueError(
                f"truncation to {offset} is below the log start {self.log.log_start_offset}"
            )
        self.log.truncate_to(offset)

    def read(self, start_offset: int, max_bytes: int, max_offset: int | None = None) -> Batches:
        if start_offset < self.log.log_start_offset:
            raise ValueError(
                f"read at {start_offset} is below the log start {self.log.log_start_offset}"
            )
        data = self.log.read_bytes(start_offset, max_bytes, max_offset=max_offset)
        return Batches.parse(data, verify_crc=False)

    def flush(self) -> None:
        self.log.flush()

    # ------------------------------------------------------------------ snapshots

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return max(self._snapshots, key=lambda s: s.offset, default=None)

    def earliest_snapshot_id(self) -> OffsetAndEpoch | None:
        return min(self._snapshots, key=lambda s: s.offset, default=None)

    def snapshot_path(self, snapshot_id: OffsetAndEpoch) -> Path:
        return self.dir / (snapshot_file_stem(snapshot_id) + SNAPSHOT_SUFFIX)

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> FileSnapshot | None:
        if snapshot_id not in self._snapshots:
            return None
        snapshot = self._snapshots[snapshot_id]
        if snapshot is None:
            try:
                snapshot = FileSnapshot(self.snapshot_path(snapshot_id), snapshot_id)
            except FileNotFoundError:
                logger.warning("%s: snapshot %s is gone", self.dir.name, snapshot_id)
                del self._snapshots[snapshot_id]
                return None
            self._snapshots[snapshot_id] = snapshot
        return snapshot

    def create_new_snapshot(self, snapshot_id: OffsetAndEpoch) -> FileSnapshotWriter | None:
        if snapshot_id in self._snapshots:
            return None
        return FileSnapshotWriter(self, snapshot_id)

    def _snapshot_frozen(self, snapshot_id: OffsetAndEpoch) -> None:
        self._snapshots[snapshot_id] = None

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        if snapshot_id not in self._snapshots:
            raise ValueError(f"unknown snapshot {snapshot_id}")
        start = snapshot_id.offset
        if start <= self.log.log_start_offset:
            return
        if start > self.log.log_end_offset:
            raise ValueError(
                f"snapshot {snapshot_id} is past the log end {self.log.log_end_offset}"
            )
        self._drop_snapshots_before(snapshot_id)
        self.log.delete_records_before(start, start)

    def truncate_to_latest_snapshot(self) -> bool:
        latest = self.latest_snapshot_id()
        if latest is None or self._holds(latest):
            return False
        self._drop_snapshots_before(latest)
        self.log.truncate_fully_and_start_at(latest.offset)
        return True

    def _holds(self, position: OffsetAndEpoch) -> bool:
        """Whether the record just before `position.offset` is here with `position.epoch`."""
        if position.offset == self.log.log_start_offset:
            return position.epoch == self._base().epoch
        return self._epoch_of(position.offset - 1) == position.epoch

    def _drop_snapshots_before(self, snapshot_id: OffsetAndEpoch) -> None:
        """Delete older snapshot files (fsynced) before the log is cut after them."""
        old = [s for s in self._snapshots if s.offset < snapshot_id.offset]
        for stale in old:
            reader = self._snapshots.pop(stale)
            if reader is not None:
                reader.close()
            self.snapshot_path(stale).unlink(missing_ok=True)
        if old:
            fsync_dir(self.dir)

    def close(self) -> None:
        for snapshot in self._snapshots.values():
            if snapshot is not None:
                snapshot.close()
        self.log.close()
