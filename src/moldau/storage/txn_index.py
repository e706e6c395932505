"""The aborted-transaction index: ``<base>.txnindex`` beside each segment, Kafka's format.

One 34-byte big-endian entry per transaction aborted by a marker in the segment: version
(int16, 0), producer id (int64), first offset, last offset (the ABORT marker's) and the
last stable offset once it was decided (int64 each). read_committed fetches ask it which
aborted transactions overlap what they return, so clients can drop those records; the
last stable offset tells the search when no later segment can hold more (Kafka's
``TransactionIndex.collectAbortedTxns``).

The file exists only once a transaction was aborted in the segment. Entries are kept in
memory once read (aborts are rare next to data) and lookups bisect on the last offsets,
which grow with the log.
"""

from __future__ import annotations

import os
import struct
import threading
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path

from moldau.protocol.errors import CorruptRecordError

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY_VERSION = 0

_ENTRY = struct.Struct(">hqqqq")


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            ENTRY_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


class TransactionIndex:
    """The aborted transactions whose marker is in one segment."""

    def __init__(self, path: Path, *, new: bool = False) -> None:
        """``new``: the segment was just created, there is nothing to read."""
        self.path = path
        self._entries: list[AbortedTxn] | None = [] if new else None  # None: not read yet
        self._last_offsets: list[int] = []
        self._dirty = False
        self._lock = threading.Lock()

    # -- reading -----------------------------------------------------------------------
    def entries(self) -> list[AbortedTxn]:
        entries = self._entries
        if entries is None:
            with self._lock:
                if self._entries is None:
                    self._entries = self._read()
                    self._last_offsets = [e.last_offset for e in self._entries]
                entries = self._entries
        return entries

    def _read(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        return parse_entries(data, str(self.path))

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound)``, and whether
        the search is complete (see ``collect_aborted``)."""
        entries = self.entries()
        return collect_aborted(entries, self._last_offsets, fetch_offset, upper_bound)

    # -- writing -----------------------------------------------------------------------
    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries()
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(
                f"{self.path.name}: aborted transaction at {txn.last_offset} does not follow "
                f"{entries[-1].last_offset}"
            )
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, txn.encode())
        finally:
            os.close(fd)
        entries.append(txn)
        self._last_offsets.append(txn.last_offset)
        self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset``."""
        entries = self.entries()
        keep = bisect_left(self._last_offsets, offset)
        if keep == len(entries):
            return
        del entries[keep:]
        del self._last_offsets[keep:]
        if entries:
            self._rewrite(entries)
        else:
            self.path.unlink(missing_ok=True)

    def reset(self) -> None:
        """Forget every entry (recovery rebuilds them from the log)."""
        with self._lock:
            self._entries, self._last_offsets, self._dirty = [], [], False
        self.path.unlink(missing_ok=True)

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(b"".join(e.encode() for e in entries))
        os.replace(tmp, self.path)
        self._dirty = True

    def flush(self) -> None:
        if not self._dirty:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._dirty = False

    # -- files -------------------------------------------------------------------------
    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)


def collect_aborted(
    entries: list[AbortedTxn], last_offsets: list[int], fetch_offset: int, upper_bound: int
) -> tuple[list[AbortedTxn], bool]:
    """Aborted transactions of one index overlapping ``[fetch_offset, upper_bound)``, and
    whether the search is complete (an entry decided at or after ``upper_bound``: later
    segments cannot add any). ``last_offsets``: the entries' last offsets."""
    if not entries:
        return [], False
    start = bisect_left(last_offsets, fetch_offset)
    if start and entries[start - 1].last_stable_offset >= upper_bound:
        return [], True  # last stable offsets only grow: decided before the range
    found = []
    for txn in entries[start:]:
        if txn.first_offset < upper_bound:
            found.append(txn)
        if txn.last_stable_offset >= upper_bound:
            return found, True
    return found, False


def parse_entries(data: bytes, source: str) -> list[AbortedTxn]:
    """The entries of a transaction index file's bytes (a torn last entry is dropped)."""
    usable = len(data) - len(data) % _ENTRY.size
    entries = []
    for pos in range(0, usable, _ENTRY.size):
        version, *fields = _ENTRY.unpack_from(data, pos)
        if version != ENTRY_VERSION:
            raise CorruptRecordError(f"{source}: unknown entry version {version}")
        entries.append(AbortedTxn(*fields))
    return entries
