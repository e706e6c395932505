"""Bounded caches of what segments keep open: descriptors and loaded index entries.

A broker holds tens of thousands of segments but reads and appends to few of them at a
time, so neither descriptors nor index memory may grow with the segments that exist.

``FileCache`` bounds the open segment files (``log.segment.open.files.max``). It evicts
a random entry, not the least recently used: a produce spread over more partitions than
the cache holds visits them in turn, and LRU then misses on every append (each one an
open and a close) where random eviction keeps most of them. A cached
file is a :class:`SegmentFile`, which closes its descriptor when the last reference to
it goes. The rule that keeps sendfile safe: a ``FileRange`` handed to the network layer
holds the ``SegmentFile`` itself, and eviction only drops the cache's reference, so an
evicted file stays open until every range read from it has been sent (CPython frees it
at once when the last range dies). Descriptors in use are therefore the cache's capacity
plus the files of responses not yet written.

``IndexCache`` bounds the bytes of sealed segments' index entries held in memory; active
segments keep theirs (they grow with the data appended, like the page cache would).
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Protocol

from moldau.protocol.errors import StorageError

OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


class SegmentFile:
    """An open descriptor of a segment's ``.log`` file, closed when unreferenced."""

    __slots__ = ("fd", "__weakref__")

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


class FileCache:
    """Open segment files keyed by their segment, random eviction; thread-safe.

    ``open`` runs the opener on a miss. Out of descriptors (EMFILE/ENFILE), it gives
    back every descriptor only the cache holds and tries once more before raising
    StorageError, so a full cache never starves sockets or new partitions.
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = max(1, capacity)
        self._files: dict[Hashable, SegmentFile] = {}
        self._keys: list[Hashable] = []  # the keys of _files, for O(1) random eviction
        self._slot: dict[Hashable, int] = {}  # key -> its position in _keys
        self._lock = threading.Lock()
        self._random = random.Random(0)
        self.opened = 0  # files opened since start (cache misses), for metrics and tests

    @property
    def capacity(self) -> int:
        return self._capacity

    @capacity.setter
    def capacity(self, value: int) -> None:
        with self._lock:
            self._capacity = max(1, value)
            self._evict(self._capacity)

    def __len__(self) -> int:
        return len(self._files)

    def open(self, key: Hashable, opener: Callable[[], int]) -> SegmentFile:
        file = self._files.get(key)  # a dict lookup is atomic: no lock on a hit
        if file is not None:
            return file
        try:
            fd = opener()
        except OSError as e:
            if e.errno not in OUT_OF_DESCRIPTORS:
                raise
            self.clear()
            try:
                fd = opener()
            except OSError as again:
                if again.errno in OUT_OF_DESCRIPTORS:
                    raise StorageError(
                        f"out of file descriptors ({again.strerror}); raise the open-files "
                        "limit (ulimit -n) or lower log.segment.open.files.max"
                    ) from again
                raise
        file = SegmentFile(fd)
        with self._lock:
            self.opened += 1
            cached = self._files.get(key)
            if cached is not None:  # another thread opened it meanwhile
                return cached
            self._evict(self._capacity - 1)
            self._files[key] = file
            self._slot[key] = len(self._keys)
            self._keys.append(key)
        return file

    def peek(self, key: Hashable) -> SegmentFile | None:
        """The cached file, without opening."""
        return self._files.get(key)

    def discard(self, key: Hashable) -> None:
        """Drop the cache's reference (ranges still holding the file keep it open)."""
        with self._lock:
            if key in self._files:
                self._remove(self._slot[key])

    def clear(self) -> None:
        with self._lock:
            self._files.clear()
            self._keys.clear()
            self._slot.clear()

    def _evict(self, keep: int) -> None:
        while len(self._files) > keep:
            self._remove(self._random.randrange(len(self._keys)))

    def _remove(self, slot: int) -> None:
        """Drop the entry at ``slot`` of ``_keys``, moving the last key into its place."""
        keys = self._keys
        key, last = keys[slot], keys.pop()
        if slot < len(keys):
            keys[slot] = last
            self._slot[last] = slot
        del self._slot[key]
        del self._files[key]


class Unloadable(Protocol):
    def unload(self) -> None: ...


class IndexCache:
    """LRU of loaded sealed-segment indexes, bounded by the bytes they hold; thread-safe.

    Eviction calls ``unload()``: the index drops its entries and reads its file again
    the next time a lookup needs it.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, max_bytes)
        self._sizes: OrderedDict[Unloadable, int] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        return self._bytes

    def touch(self, index: Unloadable, size: int) -> None:
        """Record that ``index`` holds ``size`` bytes and was just used."""
        evicted: list[Unloadable] = []
        with self._lock:
            old = self._sizes.pop(index, None)
            if old is not None:
                self._bytes -= old
            self._sizes[index] = size
            self._bytes += size
            while self._bytes > self.max_bytes and len(self._sizes) > 1:
                victim, victim_size = self._sizes.popitem(last=False)
                self._bytes -= victim_size
                evicted.append(victim)
        for victim in evicted:
            victim.unload()

    def forget(self, index: Unloadable) -> None:
        with self._lock:
            size = self._sizes.pop(index, None)
            if size is not None:
                self._bytes -= size


class StorageCaches:
    """The caches one broker's logs share (one process, one descriptor budget)."""

    def __init__(self, open_files: int = 1024, index_bytes: int = 64 << 20) -> None:
        self.files = FileCache(open_files)
        self.indexes = IndexCache(index_bytes)


def open_segment_file(path: os.PathLike[str] | str, *, create: bool = False) -> int:
    """A read/append descriptor of a segment file, not inherited by child processes."""
    flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    return os.open(path, flags, 0o644)


_default: StorageCaches | None = None


def default_caches() -> StorageCaches:
    """The process-wide caches, for logs opened without an explicit set."""
    global _default
    if _default is None:
        _default = StorageCaches()
    return _default
