"""The local tier of a partition's log: ordered segments in ``<log.dir>/<topic>-<partition>/``.

Kafka's ``LocalLog``: the segments on this disk and what only they know (log end offset,
recovery point, pending file deletions); ``UnifiedLog`` adds producer state, the leader-epoch
cache, the log start offset and retention on top, and ``LogLoader`` builds one at open.

The segment list is an immutable tuple replaced on every roll, deletion, truncation and
cleaner swap (copy-on-write), so readers take a snapshot of it and never lock. Reads return
file ranges of whole batches for sendfile. Only batch headers are ever parsed here.

Threads: appends, reads, retention and truncation run on the event loop; the cleaner and
flushes may run in worker threads. ``lock`` is held only to replace the segment tuple, write
index and checkpoint files and move the recovery point, never for a whole cleaning pass, so
an append waits at most for a swap's renames.
"""

from __future__ import annotations

import os
import shutil
import threading
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from moldau.config.topic import LogConfig
from moldau.protocol.errors import KafkaError, OffsetOutOfRangeError, StorageError
from moldau.records.batch import BatchInfo
from moldau.records.record import Record, decode_records
from moldau.storage.checkpoint import fsync_dir
from moldau.storage.files import SegmentFile, StorageCaches
from moldau.storage.resources import storage_error
from moldau.storage.segment import LOG_SUFFIX, Segment, SegmentDeletedError, file_stem
from moldau.storage.txn_index import AbortedTxn

CLEANED_SUFFIX = ".cleaned"  # a segment the cleaner is still writing: discarded on open
SWAP_SUFFIX = ".swap"  # a complete cleaned segment replacing older ones: finished on open
READ_ATTEMPTS = 3  # a read racing a deletion retries with the new segment list


class CleaningAbortedError(KafkaError):
    """The log changed under a cleaning pass (truncation, deletion, close): its result
    is dropped and the log cleaned again later."""


@dataclass(frozen=True, slots=True)
class FileRange:
    """``size`` bytes at ``position`` of an open segment file: ``os.sendfile`` material.

    Holding the range keeps the file open (see ``files.py``), so send it or drop it.
    """

    file: SegmentFile
    position: int
    size: int


@dataclass(frozen=True, slots=True)
class LogReadResult:
    ranges: list[FileRange]
    size: int
    first_offset: int  # base offset of the first batch returned (the fetch offset if none)
    next_offset: int  # offset after the last batch returned (the fetch offset if none)

    def to_bytes(self) -> bytes:
        return b"".join(os.pread(r.file.fileno(), r.size, r.position) for r in self.ranges)


def now_ms(clock: Callable[[], float]) -> int:
    return int(clock() * 1000)


def _base_offset(segment: Segment) -> int:
    return segment.base_offset


class LocalLog:
    """The segments of one topic-partition on this disk. One writer thread; readers never
    block."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        clock: Callable[[], float],
        caches: StorageCaches,
    ) -> None:
        self.dir = directory
        self.config = config
        self.clock = clock
        self.caches = caches
        self.segments: tuple[Segment, ...] = ()
        self.closed = False
        self.recovery_point = 0
        self.last_flush_ms = now_ms(clock)
        self.roll_flush_to = 0  # roll asks for the old segments to be fsynced (maybe_flush)
        self.pending_deletes: list[tuple[int, Segment]] = []
        self.lock = threading.RLock()
        self.truncations = 0  # a cleaning pass started before a truncation is dropped
        self.unsynced_dirs: set[Path] = set()  # directories with new entries to fsync

    # -- state ---------------------------------------------------------------------
    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset  # known for the active segment: no IO

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    def segment_index(self, offset: int) -> int:
        """Index of the segment holding ``offset`` (the first one below its base)."""
        return max(0, bisect_right(self.segments, offset, key=_base_offset) - 1)

    def new_segment(self, base_offset: int, now: int, *, suffix: str = "") -> Segment:
        config = self.config
        segment = Segment.create(
            self.dir,
            base_offset,
            config.segment_index_bytes,
            config.index_interval_bytes,
            now,
            self.caches,
            suffix=suffix,
        )
        self.unsynced_dirs.add(self.dir)  # fsynced before the recovery point passes it
        return segment

    def new_cleaned_segment(self, base_offset: int) -> Segment:
        """An empty ``<base>.log.cleaned`` segment for the cleaner to write into."""
        return self.new_segment(base_offset, now_ms(self.clock), suffix=CLEANED_SUFFIX)

    def update_config(self, config: LogConfig) -> None:
        """New topic config; the active segment's index keeps its size until it rolls."""
        self.config = config

    # -- roll ----------------------------------------------------------------------
    def roll(self, now: int, base_offset: int | None = None) -> tuple[Segment, bool]:
        """Start a new active segment at ``base_offset`` (default: the log end offset);
        no-op if the active segment is empty and already starts there. Returns the
        active segment and whether a non-empty one was sealed."""
        base = self.log_end_offset if base_offset is None else max(base_offset, self.log_end_offset)
        with self.lock:
            active = self.active
            if active.size == 0:
                if active.base_offset == base:
                    return active, False
                # A follower's batch far ahead of an empty segment: start it there instead.
                segment = self.new_segment(base, now)
                self.schedule_delete(active, now)
                self.segments = (*self.segments[:-1], segment)
                return segment, False
            active.seal()
            segment = self.new_segment(base, now)
            self.segments = (*self.segments, segment)
            self.roll_flush_to = segment.base_offset
        return segment, True

    # -- read ----------------------------------------------------------------------
    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        log_start_offset: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> LogReadResult:
        """Whole batches from the one holding ``offset``, up to ``max_bytes`` (at least one
        batch when ``min_one_batch``) and below ``max_offset`` (exclusive, e.g. the HW).

        Raises OffsetOutOfRangeError outside [log_start_offset, log end offset] and
        StorageError when the files cannot be read.
        """
        for _ in range(READ_ATTEMPTS):
            try:
                return self._read(offset, max_bytes, log_start_offset, max_offset, min_one_batch)
            except SegmentDeletedError:
                with self.lock:  # a swap or deletion in progress finishes first
                    pass
            except OSError as e:
                raise storage_error(e, f"reading {self.dir.name} at offset {offset}") from e
        raise StorageError(f"{self.dir.name}: segments kept changing under a read")

    def _read(
        self,
        offset: int,
        max_bytes: int,
        log_start: int,
        max_offset: int | None,
        min_one_batch: bool,
    ) -> LogReadResult:
        segments = self.segments
        leo = segments[-1].next_offset
        if offset < log_start or offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{log_start}, {leo}] in {self.dir.name}"
            )
        limit = leo if max_offset is None else min(max_offset, leo)
        ranges: list[FileRange] = []
        total, first_offset, next_offset = 0, offset, offset
        i = max(0, bisect_right(segments, offset, key=_base_offset) - 1)
        while offset < limit and i < len(segments):
            segment = segments[i]
            i += 1
            file = segment.file
            first = segment.translate_offset(offset, file)
            if first is None:
                continue  # nothing at or after offset in this segment
            start, end = first.position, segment.size
            upper = segments[i].base_offset if i < len(segments) else leo
            stop = segment.translate_offset(limit, file) if limit < upper else None
            if stop is not None:
                end = stop.position
            cut = stop is not None
            if end - start > max_bytes - total:
                end = segment.last_boundary(start, start + max_bytes - total, file)
                if end == start and min_one_batch and not ranges:
                    end = first.end_position
                cut = True
            if end > start:
                after = stop if stop is not None and stop.position == end else None
                after = after or segment.read_header(end, file)
                if not ranges:
                    first_offset = first.base_offset
                ranges.append(FileRange(file, start, end - start))
                total += end - start
                next_offset = after.base_offset if after is not None else segment.next_offset
            if cut:
                break
            offset = next_offset
        return LogReadResult(ranges, total, first_offset, next_offset)

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound)``, from the
        transaction indexes of the segment holding ``fetch_offset`` on."""
        segments = self.segments
        found: list[AbortedTxn] = []
        for segment in segments[self.segment_index(fetch_offset) :]:
            txns, complete = segment.txn_index.collect(fetch_offset, upper_bound)
            found += txns
            if complete:
                break
        return found

    # -- timestamps ----------------------------------------------------------------
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp`` in
        these segments; None if there is none."""
        for segment in self.segments:
            info = segment.find_offset_by_timestamp(timestamp)
            if info is not None:
                return _record_at(segment, info, lambda r: r.timestamp >= timestamp)
        return None

    def max_timestamp_offset(self) -> tuple[int, int]:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3);
        (-1, -1) for an empty log."""
        best = max(self.segments, key=lambda s: s.max_timestamp)
        if best.max_timestamp < 0:
            return -1, -1
        info = best.translate_offset(best.offset_of_max_timestamp)
        if info is None:
            return -1, -1
        return _record_at(best, info, lambda r: r.timestamp >= info.max_timestamp)

    # -- deletion ------------------------------------------------------------------
    def remove_oldest_segments(self, count: int, now: int) -> None:
        """Take the ``count`` oldest segments out of the log and schedule their files'
        deletion (file.delete.delay.ms)."""
        with self.lock:
            doomed, self.segments = self.segments[:count], self.segments[count:]
        for segment in doomed:
            self.schedule_delete(segment, now)

    def schedule_delete(self, segment: Segment, now: int) -> None:
        segment.mark_deleted()
        if self.config.file_delete_delay_ms == 0:
            segment.purge()
        else:
            with self.lock:
                self.pending_deletes.append((now + self.config.file_delete_delay_ms, segment))

    def purge_deleted(self, now: int | None = None) -> None:
        """Remove ``.deleted`` segment files whose delay has passed."""
        now = now_ms(self.clock) if now is None else now
        with self.lock:
            due = [s for t, s in self.pending_deletes if t <= now]
            self.pending_deletes = [(t, s) for t, s in self.pending_deletes if t > now]
        for segment in due:
            segment.purge()

    # -- compaction ----------------------------------------------------------------
    def replace_segments(
        self, old: Sequence[Segment], cleaned: Segment, *, truncations: int
    ) -> None:
        """Swap consecutive sealed segments ``old`` for ``cleaned`` (a sealed, fsynced
        ``<old[0] base>.log.cleaned`` segment), crash-safely like Kafka's cleaner.

        ``.cleaned`` -> ``.swap`` marks the new file complete; the old segments are then
        renamed ``.deleted`` (readers holding their files keep reading), the swap and its
        indexes take their final names and a new segment tuple replaces the old one.
        ``LogLoader`` finishes a swap cut short. Raises CleaningAbortedError, changing
        nothing, if the log was truncated since ``truncations`` was read, closed, or no
        longer holds ``old``.
        """
        with self.lock:
            segments = self.segments
            i = next((k for k, s in enumerate(segments) if s is old[0]), -1)
            if (
                self.closed
                or truncations != self.truncations
                or i < 0
                or tuple(segments[i : i + len(old)]) != tuple(old)
                or i + len(old) >= len(segments)
            ):
                raise CleaningAbortedError(f"{self.dir.name} changed during cleaning")
            swap = self.dir / (file_stem(old[0].base_offset) + LOG_SUFFIX + SWAP_SUFFIX)
            os.rename(cleaned.path, swap)
            cleaned.path = swap
            fsync_dir(self.dir)
            now = now_ms(self.clock)
            for segment in old:
                self.schedule_delete(segment, now)
            cleaned.rename(self.dir)
            fsync_dir(self.dir)
            self.segments = (*segments[:i], cleaned, *segments[i + len(old) :])

    # -- durability ----------------------------------------------------------------
    def flush(
        self, up_to: int | None = None, *, checkpoint: Callable[[], None] | None = None
    ) -> None:
        """fsync segments holding offsets in [recovery point, up_to) and advance it;
        ``checkpoint`` writes the owner's checkpoint files first, under the lock.

        Safe from a worker thread: index and checkpoint files are written under the lock,
        data is fsynced outside it, and a truncation meanwhile keeps the recovery point.
        """
        leo = self.log_end_offset
        up_to = leo if up_to is None else min(up_to, leo)
        self.last_flush_ms = now_ms(self.clock)
        if up_to <= self.recovery_point:
            return
        with self.lock:
            truncations = self.truncations
            first = self.segment_index(self.recovery_point)
            last = self.segment_index(max(up_to - 1, 0))
            segments = self.segments[first : last + 1]
            if checkpoint is not None:
                checkpoint()
            unsynced, self.unsynced_dirs = self.unsynced_dirs, set()
        for segment in segments:
            segment.flush()
        for directory in unsynced:
            fsync_dir(directory)
        with self.lock:
            if truncations == self.truncations:
                self.recovery_point = max(self.recovery_point, up_to)

    def close(self) -> None:
        """Close every segment and purge the pending deletions (the caller flushed)."""
        with self.lock:
            for segment in self.segments:
                segment.close()
            pending, self.pending_deletes = self.pending_deletes, []
            self.closed = True
        for _, segment in pending:
            segment.purge()

    def delete(self) -> None:
        """Topic deletion: forget every file and remove the directory (ranges still
        being sent keep their files open)."""
        with self.lock:
            self.closed = True
            doomed = [*self.segments, *(s for _, s in self.pending_deletes)]
            self.pending_deletes = []
        for segment in doomed:
            segment.deleted = True
            self.caches.files.discard(segment)
            self.caches.indexes.forget(segment.offset_index)
            self.caches.indexes.forget(segment.time_index)
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- truncation ----------------------------------------------------------------
    def truncate_to(self, offset: int, now: int) -> None:
        """Remove everything from the batch holding ``offset`` on (caller holds the lock)."""
        self.truncations += 1
        segments = self.segments
        i = self.segment_index(offset)
        for segment in segments[i + 1 :]:
            self.schedule_delete(segment, now)
        segments[i].make_active()
        segments[i].truncate_to(offset)
        self.segments = segments[: i + 1]
        self._after_truncation()

    def truncate_fully_and_start_at(self, offset: int, now: int) -> None:
        """Delete every segment and restart empty at ``offset`` (caller holds the lock)."""
        self.truncations += 1
        for segment in self.segments:
            self.schedule_delete(segment, now)
        self.segments = (self.new_segment(offset, now),)
        self._after_truncation()
        self.recovery_point = self.roll_flush_to = offset

    def _after_truncation(self) -> None:
        leo = self.log_end_offset
        self.recovery_point = min(self.recovery_point, leo)
        self.roll_flush_to = min(self.roll_flush_to, leo)


def _record_at(
    segment: Segment, info: BatchInfo, match: Callable[[Record], bool]
) -> tuple[int, int]:
    """Narrow a batch to its first matching record (decoding only this one batch)."""
    records = decode_records(segment.read(info.position, info.size))
    record = next((r for r in records if match(r)), None)
    if record is None:
        return info.base_offset, info.max_timestamp
    return record.offset, record.timestamp
