"""Sparse, mmapped offset and time indexes in Kafka's file format.

Each segment has ``<base>.index`` (relative offset int32, position int32) and
``<base>.timeindex`` (timestamp int64, relative offset int32) entries, big-endian. Files
are preallocated to ``segment.index.bytes`` while the segment is active and trimmed to
their entries when it rolls or closes, so a trimmed file's size says how many entries it
has. Lookups are binary searches: O(log n) struct probes, no per-entry loops.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path


class _Index:
    """Fixed-size big-endian entries in an mmapped file, appended in key order."""

    _entry: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.existed = path.exists()  # a missing index means rebuilding it from the log
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        size = os.fstat(self._fd).st_size
        self.entries = size // self._entry.size
        self._mm: mmap.mmap | None = None
        self._capacity = 0
        if self.entries:  # an existing file keeps its size until the segment is active
            self._map(size - size % self._entry.size)
            self.entries = self._valid_entries()
        else:
            self.resize(max_bytes)

    # -- sizing --------------------------------------------------------------------
    def _map(self, size: int) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        os.ftruncate(self._fd, size)
        self._capacity = size // self._entry.size
        if size:
            self._mm = mmap.mmap(self._fd, size)

    def resize(self, max_bytes: int) -> None:
        """(Re)allocate room for appends, e.g. when a trimmed segment becomes active again."""
        size = max(max_bytes - max_bytes % self._entry.size, self._entry.size)
        self._map(max(size, self.entries * self._entry.size))

    def trim(self) -> None:
        """Shrink the file to its entries: the segment is no longer appended to."""
        self._map(self.entries * self._entry.size)

    @property
    def is_full(self) -> bool:
        return self.entries >= self._capacity

    def _valid_entries(self) -> int:
        """Entries before the zero-filled tail of a preallocated, untrimmed file."""
        lo, hi = 0, self.entries
        while lo < hi:
            mid = (lo + hi) // 2
            if self._is_valid(mid):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _is_valid(self, i: int) -> bool:
        raise NotImplementedError

    # -- entries -------------------------------------------------------------------
    def _get(self, i: int) -> tuple[int, int]:
        assert self._mm is not None
        return self._entry.unpack_from(self._mm, i * self._entry.size)

    def _put(self, a: int, b: int) -> None:
        assert self._mm is not None and not self.is_full
        self._entry.pack_into(self._mm, self.entries * self._entry.size, a, b)
        self.entries += 1

    def _last_le(self, key: int, field: int) -> int:
        """Index of the last entry whose ``field`` is <= key, or -1 (binary search)."""
        lo, hi = 0, self.entries
        while lo < hi:
            mid = (lo + hi) // 2
            if self._get(mid)[field] <= key:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1

    def _truncate_entries(self, count: int) -> None:
        if count < self.entries:
            assert self._mm is not None
            start = count * self._entry.size
            self._mm[start : self.entries * self._entry.size] = bytes(
                (self.entries - count) * self._entry.size
            )
            self.entries = count

    def reset(self) -> None:
        """Drop every entry (before rebuilding from the log)."""
        self._truncate_entries(0)

    def flush(self) -> None:
        if self._mm is not None:
            self._mm.flush()

    def close(self) -> None:
        """Trim and release; the file stays valid for the next open."""
        self.trim()
        os.close(self._fd)

    def delete(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        os.close(self._fd)
        self.path.unlink(missing_ok=True)


class OffsetIndex(_Index):
    """Offset -> file position of the batch at or before it.

    An entry maps a batch's last offset to the batch's start position (Kafka's choice), so
    the batch holding a target offset starts at or after the entry found for it. No entry
    ever points at position 0, which is how a preallocated zero tail is told apart.
    """

    _entry = struct.Struct(">ii")

    def _is_valid(self, i: int) -> bool:
        return self._get(i)[1] > 0

    def append(self, offset: int, position: int) -> None:
        self._put(offset - self.base_offset, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry with offset <= target, else (base, 0)."""
        i = self._last_le(offset - self.base_offset, 0)
        if i < 0:
            return self.base_offset, 0
        rel, pos = self._get(i)
        return self.base_offset + rel, pos

    def lookup_position(self, position: int) -> int:
        """Start of the last indexed batch at or before ``position`` (0 if none)."""
        i = self._last_le(position, 1)
        return self._get(i)[1] if i >= 0 else 0

    def last_entry(self) -> tuple[int, int]:
        if self.entries == 0:
            return self.base_offset, 0
        rel, pos = self._get(self.entries - 1)
        return self.base_offset + rel, pos

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        self._truncate_entries(self._last_le(offset - self.base_offset - 1, 0) + 1)


class TimeIndex(_Index):
    """Max timestamp so far -> offset of the batch that first reached it.

    Timestamps strictly increase along the file; lookups give an offset before which no
    batch has a timestamp >= the target.
    """

    _entry = struct.Struct(">qi")

    def _is_valid(self, i: int) -> bool:
        ts, rel = self._get(i)
        if i == 0:
            return ts != 0 or rel != 0
        return ts > self._get(i - 1)[0]

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset) when empty."""
        if self.entries == 0:
            return -1, self.base_offset
        ts, rel = self._get(self.entries - 1)
        return ts, self.base_offset + rel

    def maybe_append(self, timestamp: int, offset: int, *, force: bool = False) -> None:
        """Add an entry if ``timestamp`` is a new maximum; ``force`` ignores a full index
        (the final entry written when the segment becomes inactive)."""
        if timestamp <= self.last_entry()[0]:
            return
        if self.is_full:
            if not force:
                return
            self._map((self.entries + 1) * self._entry.size)
        self._put(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> int:
        """Offset of the last entry with timestamp <= target, else the base offset."""
        i = self._last_le(timestamp, 0)
        return self.base_offset + self._get(i)[1] if i >= 0 else self.base_offset

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset`` (entries' offsets increase too)."""
        self._truncate_entries(self._last_le(offset - self.base_offset - 1, 1) + 1)
