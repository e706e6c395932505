"""One log segment: ``<base>.log`` plus its offset and time indexes.

Batches are appended byte for byte with one ``write`` per append; lookups go index ->
position -> a short scan of batch headers (one ``pread`` of 61 bytes each), so neither
append nor read looks at records. Readers get the segment's file object and send ranges
of it with sendfile, which is why a deleted segment's file is closed only after
``file.delete.delay.ms`` (Kafka's ``.deleted`` rename) instead of at deletion time.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from moldau.records.batch import (
    BATCH_HEADER_SIZE,
    BATCH_LENGTH_OFFSET,
    LOG_OVERHEAD,
    BatchInfo,
    Buffer,
    read_batch_header,
    scan_log_prefix,
)
from moldau.storage.index import OffsetIndex, TimeIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
RECOVERY_CHUNK = 8 * 1024 * 1024


def file_stem(offset: int) -> str:
    """Kafka's 20-digit zero-padded file name for a base offset."""
    return f"{offset:020d}"


def write_all(fd: int, data: Buffer) -> None:
    """One write syscall in the normal case; loops only on a short write."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Segment:
    """A ``.log`` file and its indexes; the Log decides when to roll, recover or delete."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        index_bytes: int,
        index_interval: int,
        created_ms: int,
    ) -> None:
        stem = directory / file_stem(base_offset)
        self.base_offset = base_offset
        self.path = stem.with_suffix(LOG_SUFFIX)
        self.file: BinaryIO = open(self.path, "a+b", buffering=0)  # noqa: SIM115 - owned
        self.fd = self.file.fileno()
        self.size = os.fstat(self.fd).st_size
        self.offset_index = OffsetIndex(stem.with_suffix(INDEX_SUFFIX), base_offset, index_bytes)
        self.time_index = TimeIndex(stem.with_suffix(TIME_INDEX_SUFFIX), base_offset, index_bytes)
        self.index_bytes = index_bytes
        self.index_interval = index_interval
        self.next_offset = base_offset
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry()
        self.created_ms = created_ms
        self.first_timestamp = -1  # first batch's max timestamp: segment.ms counts from it
        self._bytes_since_index = 0

    # -- loading -------------------------------------------------------------------
    def load_tail(self) -> bool:
        """Find next offset and roll timestamp of an unrecovered segment from its indexes.

        Returns False when the files do not agree (the caller then recovers the segment).
        """
        if not (self.offset_index.existed and self.time_index.existed) and self.size:
            return False
        if self.offset_index.entries and not self._index_sane():
            return False
        _, position = self.offset_index.last_entry()
        last: BatchInfo | None = None
        for last in self.batches_from(position):  # noqa: B007 - only the last one matters
            pass
        end = last.end_position if last else position
        if end != self.size:
            return False
        self.next_offset = last.next_offset if last else self.base_offset
        first = self.read_header(0)
        self.first_timestamp = first.max_timestamp if first is not None else -1
        return True

    def _index_sane(self) -> bool:
        last_offset, position = self.offset_index.last_entry()
        return position < self.size and last_offset >= self.base_offset

    def recover(self) -> tuple[list[BatchInfo], int]:
        """Revalidate every batch (CRC, framing, increasing offsets), cut the log after the
        last good one and rebuild both indexes. Returns the batches and bytes truncated."""
        self.make_active()
        self.offset_index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        self._bytes_since_index = 0
        file_size = os.fstat(self.fd).st_size
        self.size = 0
        recovered: list[BatchInfo] = []
        while self.size < file_size:
            infos = self._scan_chunk(self.size, file_size)
            good = next(
                (i for i, info in enumerate(infos) if info.base_offset < self.next_offset),
                len(infos),
            )
            if good:
                self._track(infos[:good], self.size)
                self.size += infos[good - 1].end_position
                recovered += infos[:good]
            if good < len(infos) or not infos:
                break
        if self.size < file_size:
            os.ftruncate(self.fd, self.size)
        self.first_timestamp = recovered[0].max_timestamp if recovered else -1
        return recovered, file_size - self.size

    def _scan_chunk(self, position: int, file_size: int) -> list[BatchInfo]:
        """Valid whole batches at ``position`` (positions relative to it); a batch larger
        than the chunk is read on its own."""
        chunk = os.pread(self.fd, min(RECOVERY_CHUNK, file_size - position), position)
        infos, _ = scan_log_prefix(chunk)
        if not infos and len(chunk) >= LOG_OVERHEAD:
            need = LOG_OVERHEAD + int.from_bytes(
                chunk[BATCH_LENGTH_OFFSET:LOG_OVERHEAD], "big", signed=True
            )
            if len(chunk) < need <= file_size - position:
                infos, _ = scan_log_prefix(os.pread(self.fd, need, position))
        return infos

    # -- appending -----------------------------------------------------------------
    def append(self, data: Buffer, infos: Sequence[BatchInfo]) -> None:
        """Write stamped batches (``infos`` positions relative to ``data``) in one write."""
        position = self.size
        try:
            write_all(self.fd, data)
        except OSError:
            # A full disk may have taken part of the data: cut it so the file ends at the
            # last whole batch again, and let the caller answer KAFKA_STORAGE_ERROR.
            os.ftruncate(self.fd, position)
            raise
        self._track(infos, position)
        if position == 0:
            self.first_timestamp = infos[0].max_timestamp
        self.size = position + len(data)

    def _track(self, infos: Sequence[BatchInfo], position: int) -> None:
        """Max timestamp, next offset and sparse index entries: per batch, never per record."""
        for info in infos:
            if info.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = (
                    info.max_timestamp,
                    info.last_offset,
                )
            if self._bytes_since_index > self.index_interval and not self.offset_index.is_full:
                self.offset_index.append(info.last_offset, position + info.position)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self._bytes_since_index = 0
            self._bytes_since_index += info.size
        self.next_offset = infos[-1].next_offset

    def roll_due(self, now_ms: int, incoming_timestamp: int, segment_ms: int) -> bool:
        """Kafka's segment.ms rule: time between the first batch's timestamp and the
        incoming one, or wall time since creation when batches carry no timestamps."""
        if self.size == 0:
            return False
        if self.first_timestamp >= 0:
            return incoming_timestamp - self.first_timestamp > segment_ms
        return now_ms - self.created_ms > segment_ms

    # -- reading -------------------------------------------------------------------
    def read_header(self, position: int) -> BatchInfo | None:
        """The batch header at ``position`` (absolute position), None past the end."""
        if position + BATCH_HEADER_SIZE > self.size:
            return None
        info = read_batch_header(os.pread(self.fd, BATCH_HEADER_SIZE, position))
        info.position = position
        return info

    def batches_from(self, position: int) -> Iterator[BatchInfo]:
        """Headers of the whole batches from ``position`` to the end of the segment."""
        end = self.size
        while (info := self.read_header(position)) is not None:
            if info.size < BATCH_HEADER_SIZE or info.end_position > end:
                return
            yield info
            position = info.end_position

    def translate_offset(self, offset: int) -> BatchInfo | None:
        """The first batch whose last offset is >= ``offset`` (index lookup, then a scan)."""
        _, position = self.offset_index.lookup(offset)
        return next((i for i in self.batches_from(position) if i.last_offset >= offset), None)

    def last_boundary(self, start: int, limit: int) -> int:
        """The furthest batch end <= ``limit``, scanning from ``start`` (a batch start)."""
        position = max(start, self.offset_index.lookup_position(limit))
        for info in self.batches_from(position):
            if info.end_position > limit:
                break
            position = info.end_position
        return position

    def find_offset_by_timestamp(self, timestamp: int) -> BatchInfo | None:
        """The first batch with max timestamp >= ``timestamp``."""
        if self.max_timestamp < timestamp:
            return None
        _, position = self.offset_index.lookup(self.time_index.lookup(timestamp))
        return next((i for i in self.batches_from(position) if i.max_timestamp >= timestamp), None)

    def read(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def largest_timestamp(self) -> int:
        """Retention's notion of age: max batch timestamp, else last modification time."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.fstat(self.fd).st_mtime * 1000)

    # -- lifecycle -----------------------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= ``offset``; returns bytes removed."""
        info = self.translate_offset(offset)
        if info is None:
            return 0
        removed = self.size - info.position
        os.ftruncate(self.fd, info.position)
        self.recover()
        return removed

    def make_active(self) -> None:
        """Give trimmed indexes room again (after truncation or before recovery)."""
        self.offset_index.resize(self.index_bytes)
        self.time_index.resize(self.index_bytes)

    def seal(self) -> None:
        """The segment stops taking appends: record its max timestamp and trim indexes."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, force=True)
        self.offset_index.trim()
        self.time_index.trim()

    def flush(self) -> None:
        os.fsync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()

    def close(self) -> None:
        self.seal()
        self.offset_index.close()
        self.time_index.close()
        self.file.close()

    def mark_deleted(self) -> None:
        """Remove the indexes and rename the log to ``.deleted``; in-flight sendfile ranges
        keep the open file until ``purge``."""
        self.offset_index.delete()
        self.time_index.delete()
        deleted = self.path.with_name(self.path.name + DELETED_SUFFIX)
        os.rename(self.path, deleted)
        self.path = deleted

    def purge(self) -> None:
        self.file.close()
        self.path.unlink(missing_ok=True)
