"""One log segment: ``<base>.log`` plus its offset, time and transaction indexes.

Batches are appended byte for byte with one ``write`` per append; lookups go index ->
position -> a short scan of batch headers (one ``pread`` of 61 bytes each), so neither
append nor read looks at records.

A segment costs no descriptor and no index memory while nobody uses it: its file comes
from the shared ``FileCache`` and its indexes load on first use (``files.py`` has the
rules). A sealed segment opened from disk knows only its base offset and size until it is
read; its next offset and timestamps are then taken from its indexes and the batch
headers after the last index entry. Readers get the segment's ``SegmentFile`` and send
ranges of it with sendfile; a deleted segment is renamed ``.deleted`` and unlinked only
after ``file.delete.delay.ms`` (Kafka's rule), and a range keeps its file open anyway.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from moldau.protocol.errors import StorageError
from moldau.records.batch import (
    BATCH_HEADER_SIZE,
    BATCH_LENGTH_OFFSET,
    LOG_OVERHEAD,
    BatchInfo,
    Buffer,
    read_batch_header,
    scan_log_prefix,
)
from moldau.storage.files import SegmentFile, StorageCaches, open_segment_file
from moldau.storage.index import OffsetIndex, TimeIndex
from moldau.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

logger = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
RECOVERY_CHUNK = 8 * 1024 * 1024
RECENT_BATCHES = 64  # positions of the latest batches a segment remembers


class SegmentDeletedError(StorageError):
    """The segment's files went away under a reader (deleted or replaced by the cleaner);
    the reader retries with the log's current segments."""


def file_stem(offset: int) -> str:
    """Kafka's 20-digit zero-padded file name for a base offset."""
    return f"{offset:020d}"


def write_all(fd: int, data: Buffer) -> None:
    """One write syscall in the normal case; loops only on a short write."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Segment:
    """A ``.log`` file and its indexes; the Log decides when to roll, recover or delete.

    Use :meth:`create` for a new segment and :meth:`existing` for one found on disk.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        index_bytes: int,
        index_interval: int,
        created_ms: int,
        caches: StorageCaches,
        *,
        size: int,
        suffix: str = "",
    ) -> None:
        stem = directory / file_stem(base_offset)
        self.base_offset = base_offset
        self.path = Path(f"{stem}{LOG_SUFFIX}{suffix}")
        self.size = size
        self.index_bytes = index_bytes
        self.index_interval = index_interval
        self.created_ms = created_ms
        self._caches = caches
        self.offset_index = OffsetIndex(
            Path(f"{stem}{INDEX_SUFFIX}{suffix}"), base_offset, index_bytes, caches.indexes
        )
        self.time_index = TimeIndex(
            Path(f"{stem}{TIME_INDEX_SUFFIX}{suffix}"), base_offset, index_bytes, caches.indexes
        )
        self.txn_index = TransactionIndex(Path(f"{stem}{TXN_INDEX_SUFFIX}{suffix}"))
        self.deleted = False
        self._next_offset: int | None = None  # None: not known until the tail is read
        self._first_timestamp: int | None = None
        self._max_timestamp: tuple[int, int] | None = None  # (timestamp, its offset)
        self._bytes_since_index = 0
        # Base offset -> position of the latest appended batches: fetches at the log's end
        # (followers, caught-up consumers, their HW limit) start there instead of scanning
        # every batch header after the last sparse index entry.
        self._recent: dict[int, int] = {}
        self._lazy_lock = threading.Lock()

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        index_bytes: int,
        index_interval: int,
        now_ms: int,
        caches: StorageCaches,
        *,
        suffix: str = "",
    ) -> Segment:
        """A new empty segment: an empty ``.log`` and preallocated indexes."""
        segment = cls(
            directory,
            base_offset,
            index_bytes,
            index_interval,
            now_ms,
            caches,
            size=0,
            suffix=suffix,
        )
        path = segment.path
        caches.files.open(segment, lambda: os.open(path, _CREATE_FLAGS, 0o644))
        segment.offset_index = OffsetIndex.create(
            segment.offset_index.path, base_offset, index_bytes, caches.indexes
        )
        segment.time_index = TimeIndex.create(
            segment.time_index.path, base_offset, index_bytes, caches.indexes
        )
        segment.txn_index = TransactionIndex(segment.txn_index.path, new=True)
        segment._next_offset = base_offset
        segment._first_timestamp = -1
        segment._max_timestamp = (-1, base_offset)
        return segment

    @classmethod
    def existing(
        cls,
        directory: Path,
        base_offset: int,
        index_bytes: int,
        index_interval: int,
        now_ms: int,
        caches: StorageCaches,
        *,
        size: int,
    ) -> Segment:
        """A segment on disk, opened lazily: nothing is read until it is used."""
        return cls(directory, base_offset, index_bytes, index_interval, now_ms, caches, size=size)

    # -- files ---------------------------------------------------------------------
    @property
    def file(self) -> SegmentFile:
        """The open ``.log`` file (from the cache, opened on a miss)."""
        try:
            return self._caches.files.open(self, self._open)
        except FileNotFoundError:
            if self.deleted:
                raise SegmentDeletedError(f"segment {self.path.name} was deleted") from None
            raise

    def _open(self) -> int:
        try:
            return open_segment_file(self.path)
        except FileNotFoundError:
            return open_segment_file(self.path)  # renamed (.deleted) meanwhile: new path

    @property
    def fd(self) -> int:
        """A descriptor valid while the caller holds ``self.file``; for one-off calls."""
        return self.file.fd

    # -- lazily known state ----------------------------------------------------------
    @property
    def next_offset(self) -> int:
        """Offset after the segment's last batch."""
        offset = self._next_offset
        if offset is None:
            self._load_sealed()
            offset = self._next_offset
            assert offset is not None
        return offset

    @property
    def first_timestamp(self) -> int:
        """The first batch's max timestamp (segment.ms counts from it), -1 if none."""
        ts = self._first_timestamp
        if ts is None:
            first = self.read_header(0)
            ts = self._first_timestamp = first.max_timestamp if first is not None else -1
        return ts

    @property
    def max_timestamp(self) -> int:
        return self._timestamps()[0]

    @property
    def offset_of_max_timestamp(self) -> int:
        return self._timestamps()[1]

    def _timestamps(self) -> tuple[int, int]:
        found = self._max_timestamp
        if found is None:
            self._load_sealed()
            found = self._max_timestamp
            assert found is not None
        return found

    def _load_sealed(self) -> None:
        """Next offset and max timestamp of a sealed segment from its indexes and the
        headers after the last index entry; indexes that disagree with the log are
        rebuilt from it (the log itself is never cut here: that is recovery's job)."""
        with self._lazy_lock:
            if self._next_offset is not None and self._max_timestamp is not None:
                return
            if self.load_tail() is None:
                logger.warning("%s: index does not match the log; rebuilding it", self.path)
                self._rebuild_indexes()

    # -- loading -------------------------------------------------------------------
    def load_tail(self) -> list[BatchInfo] | None:
        """Find next offset and max timestamp from the indexes and the batch headers after
        the last offset index entry (no full scan); returns those headers (all of the
        segment's when its index is empty).

        Returns None when the files do not agree (the caller then recovers the segment).
        """
        index = self.offset_index
        if not (index.exists() and self.time_index.exists()) and self.size:
            return None
        last_offset, position = index.last_entry()
        if index.entries and not (position < self.size and last_offset >= self.base_offset):
            return None
        max_ts = self.time_index.last_entry()
        tail = list(self.batches_from(position))
        for info in tail:
            if info.max_timestamp > max_ts[0]:
                max_ts = (info.max_timestamp, info.last_offset)
        end = tail[-1].end_position if tail else position
        if end != self.size:
            return None
        self._next_offset = tail[-1].next_offset if tail else self.base_offset
        self._max_timestamp = max_ts
        if position == 0:
            self._first_timestamp = tail[0].max_timestamp if tail else -1
        return tail

    def _rebuild_indexes(self) -> None:
        """Rebuild both indexes of a sealed segment from its batches."""
        file_size = self.size
        self.make_active()
        self._reset_tracking()
        infos = self._scan(file_size)
        if self.size < file_size:
            logger.warning(
                "%s: %d byte(s) after the last valid batch are ignored",
                self.path,
                file_size - self.size,
            )
        self._first_timestamp = infos[0].max_timestamp if infos else -1
        self.seal()

    def _reset_tracking(self) -> None:
        self.offset_index.reset()
        self.time_index.reset()
        self._next_offset = self.base_offset
        self._max_timestamp = (-1, self.base_offset)
        self._bytes_since_index = 0
        self._recent = {}

    def recover(self) -> tuple[list[BatchInfo], int]:
        """Revalidate every batch (CRC, framing, increasing offsets), cut the log after the
        last good one and rebuild both indexes. Returns the batches and bytes truncated."""
        self.make_active()
        self._reset_tracking()
        file = self.file
        file_size = os.fstat(file.fd).st_size
        recovered = self._scan(file_size)
        if self.size < file_size:
            os.ftruncate(file.fd, self.size)
        self._first_timestamp = recovered[0].max_timestamp if recovered else -1
        return recovered, file_size - self.size

    def _scan(self, file_size: int) -> list[BatchInfo]:
        """Index every valid batch up to ``file_size``; ``size`` ends after the last."""
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
        return recovered

    def _scan_chunk(self, position: int, file_size: int) -> list[BatchInfo]:
        """Valid whole batches at ``position`` (positions relative to it); a batch larger
        than the chunk is read on its own."""
        file = self.file
        chunk = os.pread(file.fd, min(RECOVERY_CHUNK, file_size - position), position)
        infos, _ = scan_log_prefix(chunk)
        if not infos and len(chunk) >= LOG_OVERHEAD:
            need = LOG_OVERHEAD + int.from_bytes(
                chunk[BATCH_LENGTH_OFFSET:LOG_OVERHEAD], "big", signed=True
            )
            if len(chunk) < need <= file_size - position:
                infos, _ = scan_log_prefix(os.pread(file.fd, need, position))
        return infos

    # -- appending -----------------------------------------------------------------
    def append(self, data: Buffer, infos: Sequence[BatchInfo]) -> None:
        """Write stamped batches (``infos`` positions relative to ``data``) in one write."""
        position = self.size
        fd = self.file.fd
        try:
            write_all(fd, data)
        except OSError:
            # A full disk may have taken part of the data: cut it so the file ends at the
            # last whole batch again, and let the caller answer KAFKA_STORAGE_ERROR.
            os.ftruncate(fd, position)
            raise
        self._track(infos, position)
        if position == 0:
            self._first_timestamp = infos[0].max_timestamp
        self.size = position + len(data)

    def _track(self, infos: Sequence[BatchInfo], position: int) -> None:
        """Max timestamp, next offset and sparse index entries: per batch, never per record."""
        max_ts, max_ts_offset = self._max_timestamp or self._timestamps()
        offset_index, time_index, recent = self.offset_index, self.time_index, self._recent
        for info in infos:
            recent[info.base_offset] = position + info.position
            if info.max_timestamp > max_ts:
                max_ts, max_ts_offset = info.max_timestamp, info.last_offset
            if self._bytes_since_index > self.index_interval and not offset_index.is_full:
                offset_index.append(info.last_offset, position + info.position)
                time_index.maybe_append(max_ts, max_ts_offset)
                self._bytes_since_index = 0
            self._bytes_since_index += info.size
        self._max_timestamp = (max_ts, max_ts_offset)
        self._next_offset = infos[-1].next_offset
        if len(recent) > 2 * RECENT_BATCHES:
            self._recent = dict(list(recent.items())[-RECENT_BATCHES:])

    def roll_due(self, now_ms: int, incoming_timestamp: int, segment_ms: int) -> bool:
        """Kafka's segment.ms rule: time between the first batch's timestamp and the
        incoming one, or wall time since creation when batches carry no timestamps."""
        if self.size == 0:
            return False
        first = self._first_timestamp
        if first is None:
            first = self.first_timestamp
        if first >= 0:
            return incoming_timestamp - first > segment_ms
        return now_ms - self.created_ms > segment_ms

    # -- reading -------------------------------------------------------------------
    def read_header(self, position: int, file: SegmentFile | None = None) -> BatchInfo | None:
        """The batch header at ``position`` (absolute position), None past the end."""
        if position + BATCH_HEADER_SIZE > self.size:
            return None
        fd = (file or self.file).fd
        info = read_batch_header(os.pread(fd, BATCH_HEADER_SIZE, position))
        info.position = position
        return info

    def batches_from(self, position: int, file: SegmentFile | None = None) -> Iterator[BatchInfo]:
        """Headers of the whole batches from ``position`` to the end of the segment."""
        end = self.size
        file = file or self.file
        while (info := self.read_header(position, file)) is not None:
            if info.size < BATCH_HEADER_SIZE or info.end_position > end:
                return
            yield info
            position = info.end_position

    def translate_offset(self, offset: int, file: SegmentFile | None = None) -> BatchInfo | None:
        """The first batch whose last offset is >= ``offset`` (index lookup, then a scan)."""
        position = self._recent.get(offset)
        if position is None:
            _, position = self.offset_index.lookup(offset)
        batches = self.batches_from(position, file)
        return next((i for i in batches if i.last_offset >= offset), None)

    def last_boundary(self, start: int, limit: int, file: SegmentFile | None = None) -> int:
        """The furthest batch end <= ``limit``, scanning from ``start`` (a batch start)."""
        position = max(start, self.offset_index.lookup_position(limit))
        for info in self.batches_from(position, file):
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
        return os.pread(self.file.fd, size, position)

    def largest_timestamp(self) -> int:
        """Retention's notion of age: max batch timestamp, else last modification time."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.fstat(self.file.fd).st_mtime * 1000)

    # -- lifecycle -----------------------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= ``offset`` (and the aborted
        transactions they ended); returns bytes removed."""
        self.txn_index.truncate_to(offset)
        info = self.translate_offset(offset)
        if info is None:
            return 0
        removed = self.size - info.position
        os.ftruncate(self.file.fd, info.position)
        self.recover()
        return removed

    def make_active(self) -> None:
        """Give trimmed indexes room again (after truncation or before recovery)."""
        self.offset_index.make_writable()
        self.time_index.make_writable()

    def seal(self) -> None:
        """The segment stops taking appends: record its max timestamp and trim indexes."""
        if not (self.offset_index.writable or self.time_index.writable):
            return  # sealed already
        max_ts, offset = self._timestamps()
        self.time_index.maybe_append(max_ts, offset, force=True)
        make_files = self.size > 0  # an empty segment's indexes need no files
        self.offset_index.trim(make_file=make_files)
        self.time_index.trim(make_file=make_files)

    def flush(self) -> None:
        """fsync the log and both index files (nothing if the segment was deleted
        meanwhile, e.g. by a truncation racing a flush thread)."""
        try:
            os.fsync(self.file.fd)
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()
        except (SegmentDeletedError, FileNotFoundError):
            if not self.deleted:
                raise

    def close(self) -> None:
        """Seal and let go of memory and the descriptor; reopens lazily if used again."""
        self.seal()
        self.offset_index.close()
        self.time_index.close()
        self._caches.files.discard(self)

    def rename(self, directory: Path, suffix: str = "") -> None:
        """Give the files their names for ``suffix`` (``""``: the final names), e.g. when
        a cleaned segment is swapped in."""
        stem = directory / file_stem(self.base_offset)
        os.rename(self.path, Path(f"{stem}{LOG_SUFFIX}{suffix}"))
        self.path = Path(f"{stem}{LOG_SUFFIX}{suffix}")
        for index, name in (
            (self.offset_index, INDEX_SUFFIX),
            (self.time_index, TIME_INDEX_SUFFIX),
        ):
            index.rename(Path(f"{stem}{name}{suffix}"))
        self.txn_index.rename(Path(f"{stem}{TXN_INDEX_SUFFIX}{suffix}"))

    def mark_deleted(self) -> None:
        """Remove the indexes and rename the log to ``.deleted``; in-flight sendfile ranges
        keep their open file."""
        self.deleted = True
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        deleted = self.path.with_name(self.path.name + DELETED_SUFFIX)
        os.rename(self.path, deleted)
        self.path = deleted

    def purge(self) -> None:
        """Remove the files; the descriptor closes when no range holds it any more."""
        self.deleted = True
        self._caches.files.discard(self)
        self.path.unlink(missing_ok=True)

    def discard(self) -> None:
        """Remove a segment that never became part of the log (an aborted cleaning)."""
        self.deleted = True
        self._caches.files.discard(self)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"Segment({self.path.name}, size={self.size})"


_CREATE_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
