"""Reading the remote tier: whole batches of one remote segment from an offset, aborted
transactions from remote transaction indexes, and offsets by timestamp from remote time
indexes. Every function BLOCKS on the remote storage manager: the RemoteLogManager calls
them on its ``remote.log.reader.threads`` workers, never on the event loop.

Remote indexes are the segment's own ``.index``/``.timeindex``/``.txnindex`` files as
copied, kept in a ``RemoteIndexCache`` bounded by
``remote.log.index.file.cache.total.size.bytes`` (Kafka's RemoteIndexCache keeps them on
disk; here they are small byte strings in memory).
"""

from __future__ import annotations

import struct
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from moldau.records.batch import BATCH_HEADER_SIZE, BatchInfo, read_batch_header
from moldau.records.record import decode_records
from moldau.storage.remote.segment import IndexType, RemoteLogSegmentId, RemoteLogSegmentMetadata
from moldau.storage.remote.storage_manager import (
    RemoteResourceNotFoundError,
    RemoteStorageManager,
)
from moldau.storage.txn_index import AbortedTxn, collect_aborted, parse_entries

_OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, position (the local index format)
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
MIN_FETCH_BYTES = 64 * 1024  # smallest ranged read: fewer round trips for small fetches


class RemoteIndexCache:
    """The indexes of remote segments by (segment id, type), least recently used out
    first when the total passes ``max_bytes``. Thread-safe; loads outside the lock."""

    def __init__(self, rsm: RemoteStorageManager, max_bytes: int) -> None:
        self._rsm = rsm
        self._max_bytes = max_bytes
        self._entries: OrderedDict[tuple[RemoteLogSegmentId, IndexType], bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, md: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        """The index's bytes; empty for a missing transaction index (no aborted
        transaction in the segment). Raises RemoteStorageError."""
        key = (md.segment_id, index_type)
        with self._lock:
            data = self._entries.get(key)
            if data is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return data
            self.misses += 1
        try:
            data = self._rsm.fetch_index(md, index_type)
        except RemoteResourceNotFoundError:
            if index_type is not IndexType.TRANSACTION:
                raise
            data = b""
        with self._lock:
            if key not in self._entries:
                self._entries[key] = data
                self._bytes += len(data)
            while self._bytes > self._max_bytes and len(self._entries) > 1:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= len(evicted)
        return data

    def remove(self, segment_id: RemoteLogSegmentId) -> None:
        """A deleted segment's indexes go."""
        with self._lock:
            for key in [k for k in self._entries if k[0] == segment_id]:
                self._bytes -= len(self._entries.pop(key))

    @property
    def size_bytes(self) -> int:
        return self._bytes


@dataclass(frozen=True, slots=True)
class RemoteLogReadResult:
    """Whole batches read from one remote segment (bytes, not file ranges)."""

    data: bytes
    first_offset: int  # base offset of the first batch returned (the fetch offset if none)
    next_offset: int  # offset after the last batch returned (the fetch offset if none)

    @property
    def size(self) -> int:
        return len(self.data)

    def to_bytes(self) -> bytes:
        return self.data


def segment_for(
    segments: Sequence[RemoteLogSegmentMetadata], offset: int
) -> RemoteLogSegmentMetadata | None:
    """The copied segment holding ``offset`` (the newest copy if copies overlap)."""
    found = None
    for md in segments:
        if md.start_offset <= offset <= md.end_offset:
            found = md
    return found


def index_position(index: bytes, base_offset: int, offset: int) -> int:
    """Start position of the last indexed batch whose last offset is <= ``offset``, in a
    segment starting at ``base_offset`` with offset index ``index``: where a read from
    ``offset`` starts (brokers' remote reads and Spark's direct read of the store)."""
    count = len(index) // _OFFSET_ENTRY.size
    lo, hi = 0, count
    while lo < hi:
        mid = (lo + hi) // 2
        rel, position = _OFFSET_ENTRY.unpack_from(index, mid * _OFFSET_ENTRY.size)
        if position > 0 and rel <= offset - base_offset:
            lo = mid + 1
        else:
            hi = mid
    return _OFFSET_ENTRY.unpack_from(index, (lo - 1) * _OFFSET_ENTRY.size)[1] if lo else 0


class _SegmentBytes:
    """Ranged reads of one remote segment, extended on demand."""

    def __init__(self, rsm: RemoteStorageManager, md: RemoteLogSegmentMetadata, start: int):
        self._rsm, self._md = rsm, md
        self.start = start
        self.buf = b""

    def ensure(self, end: int, want: int) -> bool:
        """Have bytes up to ``end`` (exclusive) from the start, reading ``want`` more at a
        time; False if the segment ends before."""
        size = self._md.segment_size_bytes
        while self.start + len(self.buf) < end:
            at = self.start + len(self.buf)
            if at >= size:
                return False
            upto = min(size, at + max(want, end - at, MIN_FETCH_BYTES)) - 1
            chunk = self._rsm.fetch_log_segment(self._md, at, upto)
            if not chunk:
                return False
            self.buf += chunk
        return True

    def batches(self, want: int) -> Iterable[BatchInfo]:
        position = self.start
        while self.ensure(position + BATCH_HEADER_SIZE, want):
            info = read_batch_header(self.buf, position - self.start)
            yield info
            position += info.size


def read_remote(
    rsm: RemoteStorageManager,
    cache: RemoteIndexCache,
    md: RemoteLogSegmentMetadata,
    offset: int,
    max_bytes: int,
    *,
    max_offset: int,
    min_one_batch: bool,
) -> RemoteLogReadResult:
    """Whole batches of ``md`` from the one holding ``offset``, below ``max_offset``, up to
    ``max_bytes`` (at least one batch when ``min_one_batch``)."""
    index = cache.get(md, IndexType.OFFSET)
    reader = _SegmentBytes(rsm, md, index_position(index, md.start_offset, offset))
    first_pos = end_pos = -1
    first_offset = next_offset = offset
    for info in reader.batches(max_bytes):
        batch_start = reader.start + info.position
        if info.last_offset < offset:
            continue
        if info.base_offset >= max_offset:
            break
        begin = batch_start if first_pos < 0 else first_pos
        if batch_start + info.size - begin > max_bytes and not (min_one_batch and first_pos < 0):
            break
        if not reader.ensure(batch_start + info.size, max_bytes):
            break  # a torn tail: never in a copied segment, but never past it either
        if first_pos < 0:
            first_pos, first_offset = batch_start, info.base_offset
        end_pos, next_offset = batch_start + info.size, info.next_offset
    if first_pos < 0:
        return RemoteLogReadResult(b"", offset, offset)
    data = reader.buf[first_pos - reader.start : end_pos - reader.start]
    return RemoteLogReadResult(data, first_offset, next_offset)


def collect_remote_aborted(
    cache: RemoteIndexCache,
    segments: Sequence[RemoteLogSegmentMetadata],
    fetch_offset: int,
    upper_bound: int,
) -> tuple[list[AbortedTxn], bool]:
    """Aborted transactions overlapping ``[fetch_offset, upper_bound)`` from the remote
    transaction indexes of the segments from the one holding ``fetch_offset`` on; True if
    complete (else the local log's indexes are searched next)."""
    found: list[AbortedTxn] = []
    for md in segments:
        if md.end_offset < fetch_offset:
            continue
        entries = parse_entries(cache.get(md, IndexType.TRANSACTION), str(md.segment_id))
        txns, complete = collect_aborted(
            entries, [e.last_offset for e in entries], fetch_offset, upper_bound
        )
        found += txns
        if complete:
            return found, True
    return found, False


def remote_offset_for_timestamp(
    rsm: RemoteStorageManager,
    cache: RemoteIndexCache,
    segments: Sequence[RemoteLogSegmentMetadata],
    timestamp: int,
    log_start_offset: int,
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or after ``timestamp`` in the remote
    tier, at or above the log start offset; None if no copied segment has one."""
    for md in segments:
        if md.max_timestamp_ms < timestamp or md.end_offset < log_start_offset:
            continue
        index = cache.get(md, IndexType.TIMESTAMP)
        from_offset = md.start_offset
        for i in range(len(index) // _TIME_ENTRY.size):
            ts, rel = _TIME_ENTRY.unpack_from(index, i * _TIME_ENTRY.size)
            if ts >= timestamp or (ts == 0 and rel == 0 and i):
                break
            from_offset = md.start_offset + rel
        offsets = cache.get(md, IndexType.OFFSET)
        reader = _SegmentBytes(rsm, md, index_position(offsets, md.start_offset, from_offset))
        for info in reader.batches(MIN_FETCH_BYTES):
            if info.max_timestamp < timestamp or info.last_offset < log_start_offset:
                continue
            start = reader.start + info.position
            reader.ensure(start + info.size, info.size)
            body = reader.buf[info.position : info.position + info.size]
            for record in decode_records(body):
                if record.timestamp >= timestamp and record.offset >= log_start_offset:
                    return record.offset, record.timestamp
    return None
