"""Sparse offset and time indexes in Kafka's file format, loaded lazily.

Each segment has ``<base>.index`` (relative offset int32, position int32) and
``<base>.timeindex`` (timestamp int64, relative offset int32) entries, big-endian. The
active segment's files are preallocated to ``segment.index.bytes`` at their first write
and trimmed to their entries when it rolls or closes, so a trimmed file's size says how
many entries it has.

Entries live in memory, not in an mmap: an mmap costs a descriptor (CPython duplicates
it) and a map region per file, which is what limited the partitions per broker. A
sealed index is read on its first lookup and its bytes are kept in an ``IndexCache``
that may drop them again (Kafka's LazyIndex, with a bound). The active index appends to a
bytearray and writes new entries to its file on flush, seal and close; a file missing its
latest entries is still correct for a sparse index (lookups scan a little further), and
everything past the recovery point is rebuilt after a crash anyway. Lookups are binary
searches: O(log n) struct probes, no per-entry loops.
"""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path
from typing import Self

from moldau.storage.files import IndexCache


class _Index:
    """Fixed-size big-endian entries of one index file, appended in key order."""

    _entry: struct.Struct

    def __init__(
        self, path: Path, base_offset: int, max_bytes: int, cache: IndexCache | None = None
    ) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_bytes = max_bytes
        self._cache = cache
        self._data: bytes | bytearray | None = None  # None: not loaded
        self._writable = False
        self._persisted = 0  # entries known to be in the file (writable indexes)
        self._preallocated = False  # the writable index's file has its full size
        self._capacity = self._capacity_bytes()  # bytes of entries a writable index takes
        self._synced = True  # False once the file was written and not fsynced since
        self._untrimmed = False  # loaded from a preallocated file (after a crash)
        self._file_made = True  # False for a new index until its first write
        self._load_lock = threading.RLock()  # loading, unloading, becoming writable
        self._file_lock = threading.RLock()  # file writes: flush threads vs truncation

    # -- lifecycle -------------------------------------------------------------------
    @classmethod
    def create(
        cls, path: Path, base_offset: int, max_bytes: int, cache: IndexCache | None = None
    ) -> Self:
        """A new, empty, writable index. Its file is made (preallocated, sparse) on the
        first write (flush, seal or close), not now: creating a partition's log is three
        files fewer of kernel work, which creating thousands of partitions is made of."""
        index = cls(path, base_offset, max_bytes, cache)
        index._data = bytearray()
        index._writable = True
        index._file_made = False
        return index

    def exists(self) -> bool:
        return self.path.exists()

    def _capacity_bytes(self) -> int:
        size = self._entry.size
        return max(self.max_bytes - self.max_bytes % size, size)

    def _load(self) -> bytes | bytearray:
        """Entries from the file: the valid prefix of a preallocated file, not its zero
        tail, read with a binary search of ``pread`` probes."""
        with self._load_lock:
            data = self._data
            if data is not None:
                return data
            size = self._entry.size
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                data = b""
                self._file_made = False
            else:
                try:
                    file_size = os.fstat(fd).st_size
                    count = self._valid_prefix(fd, file_size // size)
                    data = os.pread(fd, count * size, 0) if count else b""
                    self._untrimmed = file_size != count * size
                finally:
                    os.close(fd)
            self._data = data
        if self._cache is not None and not self._writable:
            self._cache.touch(self, len(data))
        return data

    def _valid_prefix(self, fd: int, count: int) -> int:
        """Entries before the zero-filled tail of a preallocated, untrimmed file."""
        size = self._entry.size

        def entry(i: int) -> tuple[int, int]:
            return self._entry.unpack(os.pread(fd, size, i * size))

        if not count or not self._is_valid(entry(0), None):
            return 0  # empty, or nothing written to a preallocated file
        if self._is_valid(entry(count - 1), entry(count - 2) if count > 1 else None):
            return count  # trimmed: every entry is valid
        lo, hi = 1, count
        while lo < hi:
            mid = (lo + hi) // 2
            if self._is_valid(entry(mid), entry(mid - 1) if mid else None):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _is_valid(self, entry: tuple[int, int], previous: tuple[int, int] | None) -> bool:
        raise NotImplementedError

    def unload(self) -> None:
        """Drop loaded entries of a sealed index (IndexCache eviction)."""
        with self._load_lock:
            if not self._writable:
                self._data = None

    @property
    def loaded(self) -> bool:
        return self._data is not None

    @property
    def writable(self) -> bool:
        return self._writable

    def _entries_data(self) -> bytes | bytearray:
        data = self._data
        if data is None:
            return self._load()
        if self._cache is not None and not self._writable:
            self._cache.touch(self, len(data))
        return data

    # -- sizing ----------------------------------------------------------------------
    @property
    def entries(self) -> int:
        return len(self._entries_data()) // self._entry.size

    @property
    def is_full(self) -> bool:
        data = self._data
        if not self._writable or data is None:
            return True
        return len(data) + self._entry.size > self._capacity

    def make_writable(self) -> None:
        """Room for appends again (a sealed segment becomes active after truncation or
        before recovery): entries move to a bytearray, the file is preallocated."""
        if self._writable:
            return
        with self._load_lock:
            data = bytearray(self._entries_data())
            self._data = data
            self._writable = True
        if self._cache is not None:
            self._cache.forget(self)
        self._persisted = len(data) // self._entry.size
        self._preallocated = False  # on the first write: reopening a log writes nothing

    def trim(self, *, make_file: bool = True) -> None:
        """Write every entry, shrink the file to them and stop taking appends. Without
        ``make_file`` (the segment is empty), an index that never had an entry or a file
        stays without one: it reads as empty, and closing an idle partition's log (most
        of them, at 50,000 partitions) creates nothing."""
        if not (self._writable or self._untrimmed):
            return
        data = self._entries_data()
        if data or make_file or self._file_made or self.path.exists():
            self._sync_file(data, truncate=len(data))
        self._data = bytes(data)
        self._untrimmed = self._writable = False
        if self._cache is not None:
            self._cache.touch(self, len(data))

    def _sync_file(
        self,
        data: bytes | bytearray,
        *,
        truncate: int | None = None,
        extend: int | None = None,
        fsync: bool = False,
    ) -> None:
        """Write the entries not yet in the file, then cut it to ``truncate`` bytes
        (zeroing what was beyond), grow it to ``extend`` bytes, fsync if asked."""
        size = self._entry.size
        with self._file_lock:
            end = len(data) // size
            start = min(self._persisted, end) if self._writable else 0
            if self._writable and not self._preallocated and truncate is None:
                extend = max(extend or 0, self._capacity, len(data))
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            self._file_made = True
            try:
                if end > start:
                    os.pwrite(fd, bytes(data[start * size : end * size]), start * size)
                if truncate is not None:
                    os.ftruncate(fd, truncate)
                if extend is not None:
                    os.ftruncate(fd, extend)
                    self._preallocated = True
                if fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            self._persisted = end
            self._synced = fsync

    # -- entries ---------------------------------------------------------------------
    def _get(self, data: bytes | bytearray, i: int) -> tuple[int, int]:
        return self._entry.unpack_from(data, i * self._entry.size)

    def _put(self, a: int, b: int) -> None:
        data = self._data
        assert isinstance(data, bytearray) and self._writable
        data += self._entry.pack(a, b)

    def _last_le(self, data: bytes | bytearray, key: int, field: int) -> int:
        """Index of the last entry whose ``field`` is <= key, or -1 (binary search)."""
        lo, hi = 0, len(data) // self._entry.size
        while lo < hi:
            mid = (lo + hi) // 2
            if self._get(data, mid)[field] <= key:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1

    def _truncate_entries(self, count: int) -> None:
        size = self._entry.size
        with self._file_lock:
            data = self._entries_data()
            if count * size >= len(data):
                return
            if self._writable:
                assert isinstance(data, bytearray)
                del data[count * size :]
            else:
                self._data = data = bytes(data[: count * size])
            if self._persisted > count or not self._writable:
                # Cut the file too (and zero its preallocated tail), so no stale entry
                # can be taken for a valid one after a crash.
                self._persisted = min(self._persisted, count)
                extend = self._capacity_bytes() if self._writable else None
                self._sync_file(data, truncate=count * size, extend=extend)

    def reset(self) -> None:
        """Drop every entry (before rebuilding from the log)."""
        self._truncate_entries(0)

    def flush(self) -> None:
        """Write new entries and fsync the file."""
        if self._writable and self._data is not None:
            self._sync_file(self._data, fsync=True)
        elif not self._synced:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._synced = True

    def close(self) -> None:
        """Trim and drop the entries; the file stays valid for the next open."""
        self.trim()
        self.unload()
        if self._cache is not None:
            self._cache.forget(self)

    def delete(self) -> None:
        self._data = b""
        self._writable = False
        if self._cache is not None:
            self._cache.forget(self)
        self.path.unlink(missing_ok=True)

    def rename(self, path: Path) -> None:
        if self._file_made:
            os.rename(self.path, path)
        else:  # no file of ours: none may be left at the new name either
            path.unlink(missing_ok=True)
        self.path = path


class OffsetIndex(_Index):
    """Offset -> file position of the batch at or before it.

    An entry maps a batch's last offset to the batch's start position (Kafka's choice), so
    the batch holding a target offset starts at or after the entry found for it. No entry
    ever points at position 0, which is how a preallocated zero tail is told apart.
    """

    _entry = struct.Struct(">ii")

    def _is_valid(self, entry: tuple[int, int], previous: tuple[int, int] | None) -> bool:
        return entry[1] > 0

    def append(self, offset: int, position: int) -> None:
        self._put(offset - self.base_offset, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry with offset <= target, else (base, 0)."""
        data = self._entries_data()
        i = self._last_le(data, offset - self.base_offset, 0)
        if i < 0:
            return self.base_offset, 0
        rel, pos = self._get(data, i)
        return self.base_offset + rel, pos

    def lookup_position(self, position: int) -> int:
        """Start of the last indexed batch at or before ``position`` (0 if none)."""
        data = self._entries_data()
        i = self._last_le(data, position, 1)
        return self._get(data, i)[1] if i >= 0 else 0

    def last_entry(self) -> tuple[int, int]:
        data = self._entries_data()
        if not data:
            return self.base_offset, 0
        rel, pos = self._get(data, len(data) // self._entry.size - 1)
        return self.base_offset + rel, pos

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        data = self._entries_data()
        self._truncate_entries(self._last_le(data, offset - self.base_offset - 1, 0) + 1)


class TimeIndex(_Index):
    """Max timestamp so far -> offset of the batch that first reached it.

    Timestamps strictly increase along the file; lookups give an offset before which no
    batch has a timestamp >= the target.
    """

    _entry = struct.Struct(">qi")

    def _is_valid(self, entry: tuple[int, int], previous: tuple[int, int] | None) -> bool:
        if previous is None:
            return entry != (0, 0)
        return entry[0] > previous[0]

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset) when empty."""
        data = self._entries_data()
        if not data:
            return -1, self.base_offset
        ts, rel = self._get(data, len(data) // self._entry.size - 1)
        return ts, self.base_offset + rel

    def maybe_append(self, timestamp: int, offset: int, *, force: bool = False) -> None:
        """Add an entry if ``timestamp`` is a new maximum; ``force`` ignores a full index
        (the final entry written when the segment becomes inactive)."""
        if timestamp <= self.last_entry()[0]:
            return
        if self.is_full and not force:
            return
        if not self._writable:
            self.make_writable()
        self._put(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> int:
        """Offset of the last entry with timestamp <= target, else the base offset."""
        data = self._entries_data()
        i = self._last_le(data, timestamp, 0)
        return self.base_offset + self._get(data, i)[1] if i >= 0 else self.base_offset

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset`` (entries' offsets increase too)."""
        data = self._entries_data()
        self._truncate_entries(self._last_le(data, offset - self.base_offset - 1, 1) + 1)
