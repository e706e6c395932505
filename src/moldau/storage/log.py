"""A partition's log: ordered segments in ``<log.dir>/<topic>-<partition>/``.

The segment list is an immutable tuple replaced on every roll, deletion and truncation
(copy-on-write), so readers take a snapshot of it and never lock. Appends stamp offsets
into the producer's buffer in place and write it with one ``write``; reads return file
ranges of whole batches for sendfile. Only batch headers are ever parsed here.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from moldau.protocol.errors import InvalidRecordError, OffsetOutOfRangeError
from moldau.records.batch import (
    BATCH_HEADER_SIZE,
    INT32_MAX,
    BatchInfo,
    read_batch_header,
    set_log_append_time,
    stamp_base_offset,
)
from moldau.records.record import decode_records
from moldau.storage.config import LogConfig
from moldau.storage.producer_state import (
    CorruptSnapshotError,
    ProducerStateManager,
    list_snapshots,
)
from moldau.storage.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    Segment,
    file_stem,
)

logger = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"  # a segment the cleaner is still writing: discarded on open
SWAP_SUFFIX = ".swap"  # a complete cleaned segment replacing older ones: finished on open
CLEANUP_SUFFIXES = (DELETED_SUFFIX, ".tmp", CLEANED_SUFFIX, SWAP_SUFFIX)
SNAPSHOTS_TO_KEEP = 2


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 for CreateTime topics
    log_start_offset: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class FileRange:
    """``size`` bytes at ``position`` of an open segment file: ``os.sendfile`` material."""

    file: BinaryIO
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


def _now_ms(clock: Callable[[], float]) -> int:
    return int(clock() * 1000)


class Log:
    """One topic-partition's log. Not thread-safe for writers; readers never block."""

    def __init__(self, directory: Path, config: LogConfig, clock: Callable[[], float]) -> None:
        self.dir = directory
        self.config = config
        self.clock = clock
        self.producer_state = ProducerStateManager()
        self.segments: tuple[Segment, ...] = ()
        self._log_start_offset = 0
        self._high_watermark = 0
        self._recovery_point = 0
        self._last_flush_ms = _now_ms(clock)
        self._roll_flush_to = 0  # roll asks for the old segments to be fsynced (maybe_flush)
        self._pending_deletes: list[tuple[int, Segment]] = []

    # -- opening -------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        clean_shutdown: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> Log:
        """Load (creating if needed) the log in ``directory``.

        Segments from the one holding ``recovery_point`` on are revalidated and cut after
        their last whole valid batch (all later segments go if one is cut); with
        ``clean_shutdown`` nothing is recovered unless its files disagree.
        """
        log = cls(directory, config, clock)
        directory.mkdir(parents=True, exist_ok=True)
        now = _now_ms(clock)
        bases = log._remove_stray_files()
        segments = [log._segment(base, now) for base in bases]
        first_recovered = 0 if not segments else max(0, bisect_right(bases, recovery_point) - 1)
        if clean_shutdown:
            first_recovered = len(segments)
        recovered: dict[int, list[BatchInfo]] = {}
        for i, segment in enumerate(segments):
            if i < first_recovered and segment.load_tail():
                continue
            infos, truncated = segment.recover()
            if truncated:
                logger.warning(
                    "%s: recovery cut %d invalid byte(s) from the segment at offset %d",
                    directory.name,
                    truncated,
                    segment.base_offset,
                )
            recovered[segment.base_offset] = infos
            if truncated and i + 1 < len(segments):
                for later in segments[i + 1 :]:
                    later.mark_deleted()
                    later.purge()
                del segments[i + 1 :]
                break
        if not segments:
            segments.append(log._new_segment(log_start_offset or 0, now))
        for segment in segments[:-1]:
            segment.seal()
        segments[-1].make_active()
        log.segments = tuple(segments)
        leo = log.log_end_offset
        log._log_start_offset = min(max(log_start_offset or 0, segments[0].base_offset), leo)
        log._recovery_point = leo if clean_shutdown else min(recovery_point, leo)
        log._roll_flush_to = log._recovery_point
        log._high_watermark = leo
        log._load_producer_state(recovered)
        return log

    def _remove_stray_files(self) -> list[int]:
        """Finish interrupted segment swaps, delete leftovers of interrupted deletions,
        renames and cleanings; return segment base offsets."""
        for swap in sorted(self.dir.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}")):
            self._complete_swap(swap)
        bases: set[int] = set()
        for path in self.dir.iterdir():
            if path.name.endswith(CLEANUP_SUFFIXES):
                path.unlink(missing_ok=True)
            elif path.suffix == LOG_SUFFIX and path.stem.isdigit():
                bases.add(int(path.stem))
        for path in self.dir.glob(f"*{INDEX_SUFFIX}*"):
            if path.stem.isdigit() and int(path.stem) not in bases:
                path.unlink(missing_ok=True)  # index without its log
        return sorted(bases)

    def _complete_swap(self, swap: Path) -> None:
        """A ``.swap`` file is a whole, fsynced cleaned segment (it is renamed from
        ``.cleaned`` only once written), so the swap is finished rather than rolled back:
        the old segments it covers (base offsets in its offset range) go, then it takes
        its final name. Indexes are rebuilt by the recovery that follows."""
        base = int(swap.name.split(".", 1)[0])
        end = _swap_next_offset(swap, base)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            for path in self.dir.glob(f"*{suffix}"):
                if path.stem.isdigit() and base <= int(path.stem) < max(end, base + 1):
                    path.unlink()
        os.rename(swap, self.dir / (file_stem(base) + LOG_SUFFIX))
        _fsync_dir(self.dir)

    def _load_producer_state(self, recovered: dict[int, list[BatchInfo]]) -> None:
        """Latest usable snapshot, then replay the batch headers written after it."""
        leo = self.log_end_offset
        start = self.segments[0].base_offset
        self.producer_state = ProducerStateManager()
        for offset, path in reversed(list_snapshots(self.dir)):
            if offset > leo:
                path.unlink(missing_ok=True)
                continue
            try:
                start = self.producer_state.load_snapshot(path)
                break
            except CorruptSnapshotError:
                path.unlink(missing_ok=True)
                self.producer_state = ProducerStateManager()
        self.producer_state.replay(
            info for info in self._headers_from(start, recovered) if info.base_offset >= start
        )

    def _headers_from(self, offset: int, known: dict[int, list[BatchInfo]]) -> Iterable[BatchInfo]:
        for segment in self.segments[self._segment_index(offset) :]:
            if segment.base_offset in known:
                yield from known[segment.base_offset]
            else:
                first = segment.translate_offset(offset)
                if first is not None:
                    yield from segment.batches_from(first.position)

    # -- state ---------------------------------------------------------------------
    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._high_watermark = min(max(offset, self._log_start_offset), self.log_end_offset)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect_right(self.segments, offset, key=_base_offset) - 1)

    def _segment(self, base_offset: int, now_ms: int) -> Segment:
        config = self.config
        return Segment(
            self.dir, base_offset, config.segment_index_bytes, config.index_interval_bytes, now_ms
        )

    def _new_segment(self, base_offset: int, now_ms: int) -> Segment:
        segment = self._segment(base_offset, now_ms)
        _fsync_dir(self.dir)  # the new file's directory entry survives a crash
        return segment

    def update_config(self, config: LogConfig) -> None:
        """New topic config; the active segment's index keeps its size until it rolls."""
        self.config = config

    # -- append --------------------------------------------------------------------
    def append(
        self,
        records: bytearray | memoryview,
        infos: list[BatchInfo],
        *,
        leader_epoch: int = 0,
        now_ms: int | None = None,
    ) -> AppendResult:
        """Append validated batches (``infos`` from ``scan_batches(records)``).

        Producer state is checked against the state before this call, so a produce
        request carries one batch per partition (as Kafka requires from v3 on). A retried
        duplicate returns its original offsets and appends nothing.
        """
        if not infos:
            raise InvalidRecordError("an append needs at least one record batch")
        now = _now_ms(self.clock) if now_ms is None else now_ms
        log_append_time = self.config.log_append_time
        for info in infos:
            duplicate = self.producer_state.check(info)
            if duplicate is not None:
                return AppendResult(
                    duplicate.base_offset,
                    duplicate.last_offset,
                    duplicate.timestamp if log_append_time else -1,
                    self._log_start_offset,
                    duplicate=True,
                )
        base_offset = next_offset = self.log_end_offset
        for info in infos:
            stamp_base_offset(records, info, next_offset, leader_epoch)
            if log_append_time:
                set_log_append_time(records, info, now)
            next_offset = info.next_offset
        self._maybe_roll(len(records), next_offset - 1, infos[-1].max_timestamp, now)
        self.active.append(records, infos)
        for info in infos:
            self.producer_state.update(info, info.base_offset, info.max_timestamp)
        if self.log_end_offset - self._recovery_point >= self.config.flush_messages:
            self.flush()
        return AppendResult(
            base_offset,
            next_offset - 1,
            now if log_append_time else -1,
            self._log_start_offset,
        )

    def _maybe_roll(self, size: int, last_offset: int, timestamp: int, now_ms: int) -> None:
        """Kafka's shouldRoll: size, age, full index, or offsets beyond int32 relative."""
        active = self.active
        if active.size and (
            active.size + size > self.config.segment_bytes
            or active.roll_due(now_ms, timestamp, self.config.segment_ms)
            or active.offset_index.is_full
            or active.time_index.is_full
            or last_offset - active.base_offset > INT32_MAX
        ):
            self.roll(now_ms)

    def roll(self, now_ms: int | None = None) -> Segment:
        """Start a new active segment at the log end offset (no-op if the active is empty)."""
        active = self.active
        if active.size == 0:
            return active
        active.seal()
        now = _now_ms(self.clock) if now_ms is None else now_ms
        segment = self._new_segment(self.log_end_offset, now)
        self.segments = (*self.segments, segment)
        self._roll_flush_to = segment.base_offset
        self._write_producer_snapshot()
        return segment

    def _write_producer_snapshot(self) -> None:
        self.producer_state.write_snapshot(self.dir, self.log_end_offset)
        for _, path in list_snapshots(self.dir)[:-SNAPSHOTS_TO_KEEP]:
            path.unlink(missing_ok=True)

    # -- read ----------------------------------------------------------------------
    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> LogReadResult:
        """Whole batches from the one holding ``offset``, up to ``max_bytes`` (at least one
        batch when ``min_one_batch``) and below ``max_offset`` (exclusive, e.g. the HW).

        Raises OffsetOutOfRangeError outside [log start offset, log end offset].
        """
        segments, log_start = self.segments, self._log_start_offset
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
            first = segment.translate_offset(offset)
            if first is None:
                continue  # nothing at or after offset in this segment
            start, end = first.position, segment.size
            stop = segment.translate_offset(limit) if limit < segment.next_offset else None
            if stop is not None:
                end = stop.position
            cut = stop is not None
            if end - start > max_bytes - total:
                end = segment.last_boundary(start, start + max_bytes - total)
                if end == start and min_one_batch and not ranges:
                    end = first.end_position
                cut = True
            if end > start:
                after = stop if stop is not None and stop.position == end else None
                after = after or segment.read_header(end)
                if not ranges:
                    first_offset = first.base_offset
                ranges.append(FileRange(segment.file, start, end - start))
                total += end - start
                next_offset = after.base_offset if after is not None else segment.next_offset
            if cut:
                break
            offset = next_offset
        return LogReadResult(ranges, total, first_offset, next_offset)

    def read_bytes(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> bytes:
        """``read`` copied into memory: for tests, coordinators loading state and the CLI."""
        return self.read(
            offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch
        ).to_bytes()

    # -- timestamps ----------------------------------------------------------------
    def offset_for_timestamp(
        self, timestamp: int, *, max_offset: int | None = None
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``, like
        ListOffsets; None if there is none below ``max_offset``."""
        for segment in self.segments:
            info = segment.find_offset_by_timestamp(timestamp)
            if info is not None:
                found = self._record_at(segment, info, lambda r: r.timestamp >= timestamp)
                break
        else:
            return None
        offset = max(found[0], self._log_start_offset)
        if max_offset is not None and offset >= max_offset:
            return None
        return offset, found[1]

    def max_timestamp_offset(self) -> tuple[int, int]:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3);
        (-1, -1) for an empty log."""
        best = max(self.segments, key=lambda s: s.max_timestamp)
        if best.max_timestamp < 0:
            return -1, -1
        info = best.translate_offset(best.offset_of_max_timestamp)
        if info is None:
            return -1, -1
        return self._record_at(best, info, lambda r: r.timestamp >= info.max_timestamp)

    @staticmethod
    def _record_at(segment: Segment, info: BatchInfo, match) -> tuple[int, int]:
        """Narrow a batch to its first matching record (decoding only this one batch)."""
        records = decode_records(segment.read(info.position, info.size))
        record = next((r for r in records if match(r)), None)
        if record is None:
            return info.base_offset, info.max_timestamp
        return record.offset, record.timestamp

    # -- deletion ------------------------------------------------------------------
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (-1 = high watermark)
        and delete the whole segments below it. Kafka rejects offsets above the HW."""
        if offset == -1:
            offset = self._high_watermark
        if offset < 0 or offset > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {offset}: high watermark is {self._high_watermark}"
            )
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self.producer_state.remove_before(offset)
        self._delete_old_segments(lambda segment, next_base: next_base <= self._log_start_offset)
        return self._log_start_offset

    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Delete whole old segments past retention.ms / retention.bytes (never the
        active one, never above the HW); returns how many were deleted."""
        now = _now_ms(self.clock) if now_ms is None else now_ms
        self.purge_deleted(now)
        deleted = self._delete_old_segments(
            lambda segment, next_base: next_base <= self._log_start_offset, now
        )
        config = self.config
        if not config.delete_enabled:
            return deleted
        if config.retention_ms >= 0:
            deadline = now - config.retention_ms
            deleted += self._delete_old_segments(
                lambda segment, _: segment.largest_timestamp() < deadline, now
            )
        if config.retention_bytes >= 0:
            excess = self.size_bytes - config.retention_bytes

            def over_size(segment: Segment, _: int) -> bool:
                nonlocal excess
                if excess < segment.size:
                    return False
                excess -= segment.size
                return True

            deleted += self._delete_old_segments(over_size, now)
        return deleted

    def _delete_old_segments(
        self, predicate: Callable[[Segment, int], bool], now_ms: int | None = None
    ) -> int:
        """Delete the oldest segments while ``predicate(segment, next base offset)`` holds."""
        segments = self.segments
        count = 0
        for segment, following in zip(segments, segments[1:], strict=False):
            if following.base_offset > self._high_watermark or not predicate(
                segment, following.base_offset
            ):
                break
            count += 1
        if not count:
            return 0
        doomed, self.segments = segments[:count], segments[count:]
        self._log_start_offset = max(self._log_start_offset, self.segments[0].base_offset)
        self.producer_state.remove_before(self._log_start_offset)
        now = _now_ms(self.clock) if now_ms is None else now_ms
        for segment in doomed:
            self._schedule_delete(segment, now)
        return count

    def _schedule_delete(self, segment: Segment, now_ms: int) -> None:
        segment.mark_deleted()
        if self.config.file_delete_delay_ms == 0:
            segment.purge()
        else:
            self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, segment))

    def purge_deleted(self, now_ms: int | None = None) -> None:
        """Close and remove ``.deleted`` segment files whose delay has passed."""
        now = _now_ms(self.clock) if now_ms is None else now_ms
        due = [s for t, s in self._pending_deletes if t <= now]
        self._pending_deletes = [(t, s) for t, s in self._pending_deletes if t > now]
        for segment in due:
            segment.purge()

    # -- compaction ----------------------------------------------------------------
    def replace_segments(self, old: Sequence[Segment], cleaned: Path) -> Segment:
        """Swap consecutive sealed segments ``old`` for the fsynced segment file
        ``cleaned`` (``<old[0] base>.log.cleaned``), crash-safely like Kafka's cleaner.

        ``.cleaned`` -> ``.swap`` marks the new file complete; the old segments are then
        renamed ``.deleted`` (readers holding their files keep reading until
        file.delete.delay.ms), the swap takes its final name, its indexes are rebuilt and
        a new segment tuple replaces the old one. ``Log.open`` finishes a swap cut short.
        """
        base = old[0].base_offset
        final = self.dir / (file_stem(base) + LOG_SUFFIX)
        swap = final.with_name(final.name + SWAP_SUFFIX)
        os.rename(cleaned, swap)
        _fsync_dir(self.dir)
        now = _now_ms(self.clock)
        for segment in old:
            self._schedule_delete(segment, now)
        os.rename(swap, final)
        _fsync_dir(self.dir)
        segment = self._segment(base, now)
        segment.recover()
        segment.seal()
        i = self.segments.index(old[0])
        self.segments = (*self.segments[:i], segment, *self.segments[i + len(old) :])
        return segment

    # -- durability ----------------------------------------------------------------
    def flush(self, up_to: int | None = None) -> None:
        """fsync segments holding offsets in [recovery point, up_to) and advance it."""
        leo = self.log_end_offset
        up_to = leo if up_to is None else min(up_to, leo)
        self._last_flush_ms = _now_ms(self.clock)
        if up_to <= self._recovery_point:
            return
        first = self._segment_index(self._recovery_point)
        last = self._segment_index(max(up_to - 1, 0))
        for segment in self.segments[first : last + 1]:
            segment.flush()
        self._recovery_point = up_to

    def maybe_flush(self, now_ms: int | None = None) -> None:
        """Timer hook: flush.ms elapsed, or segments rolled since the last flush (Kafka
        flushes a rolled segment in the background)."""
        now = _now_ms(self.clock) if now_ms is None else now_ms
        if self._roll_flush_to > self._recovery_point:
            self.flush(self._roll_flush_to)
        if (
            self.log_end_offset > self._recovery_point
            and now - self._last_flush_ms >= self.config.flush_ms
        ):
            self.flush()

    def close(self) -> None:
        """Flush, trim indexes and snapshot producer state: the next open needs no recovery."""
        self.flush()
        self._write_producer_snapshot()
        for segment in self.segments:
            segment.close()
        for _, segment in self._pending_deletes:
            segment.purge()
        self._pending_deletes = []

    def delete(self) -> None:
        """Topic deletion: close every file and remove the directory."""
        for segment in self.segments:
            segment.file.close()
        for _, segment in self._pending_deletes:
            segment.file.close()
        for segment in self.segments:
            segment.offset_index.delete()
            segment.time_index.delete()
        self._pending_deletes = []
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- replication ---------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Remove everything from the batch holding ``offset`` on (follower truncation).

        Below the log start offset the log is emptied and restarts at ``offset``.
        """
        if offset >= self.log_end_offset:
            return
        now = _now_ms(self.clock)
        segments = self.segments
        if offset < self._log_start_offset:
            doomed = segments
            for segment in doomed:
                self._schedule_delete(segment, now)
            self.segments = (self._new_segment(offset, now),)
            self._log_start_offset = offset
        else:
            i = self._segment_index(offset)
            doomed = segments[i + 1 :]
            for segment in doomed:
                self._schedule_delete(segment, now)
            segments[i].make_active()
            segments[i].truncate_to(offset)
            self.segments = segments[: i + 1]
        leo = self.log_end_offset
        self._high_watermark = min(self._high_watermark, leo)
        self._recovery_point = min(self._recovery_point, leo)
        self._roll_flush_to = min(self._roll_flush_to, leo)
        self._load_producer_state({})


def _base_offset(segment: Segment) -> int:
    return segment.base_offset


def _swap_next_offset(path: Path, base: int) -> int:
    """Offset after the last whole batch of a swap file (its base if it has none)."""
    end = base
    fd = os.open(path, os.O_RDONLY)
    try:
        size, position = os.fstat(fd).st_size, 0
        while position + BATCH_HEADER_SIZE <= size:
            info = read_batch_header(os.pread(fd, BATCH_HEADER_SIZE, position))
            if info.size < BATCH_HEADER_SIZE or position + info.size > size:
                break
            end, position = info.next_offset, position + info.size
    finally:
        os.close(fd)
    return end


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
