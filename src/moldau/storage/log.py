"""A partition's log: ordered segments in ``<log.dir>/<topic>-<partition>/``.

The segment list is an immutable tuple replaced on every roll, deletion, truncation and
cleaner swap (copy-on-write), so readers take a snapshot of it and never lock. Appends
stamp offsets into the producer's buffer in place and write it with one ``write``; reads
return file ranges of whole batches for sendfile. Only batch headers are ever parsed here.

Threads: appends, reads, retention and truncation run on the event loop; the cleaner and
flushes may run in worker threads. ``_lock`` is held only to replace the segment tuple,
write index and checkpoint files and move the recovery point, never for a whole cleaning
pass, so an append waits at most for a swap's renames.

The log does not own the high watermark (replication does): what needs it takes it as an
argument. Each log keeps Kafka's leader-epoch cache (``leader-epoch-checkpoint``),
producer state (``.snapshot`` files) and aborted-transaction indexes (``.txnindex``)
consistent with its batches; transaction markers are the only batches whose record it
reads on append.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from moldau.config.topic import LogConfig
from moldau.protocol.errors import (
    InvalidRecordError,
    KafkaError,
    OffsetOutOfRangeError,
    StorageError,
)
from moldau.records.batch import (
    BATCH_HEADER_SIZE,
    INT32_MAX,
    BatchInfo,
    read_batch_header,
    set_log_append_time,
    stamp_base_offset,
)
from moldau.records.control import EndTxnMarker, read_marker
from moldau.records.record import Record, decode_records
from moldau.storage.checkpoint import fsync_dir
from moldau.storage.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from moldau.storage.files import SegmentFile, StorageCaches, default_caches
from moldau.storage.producer_state import (
    SNAPSHOT_SUFFIX,
    CompletedTxn,
    CorruptSnapshotError,
    ProducerStateManager,
    list_snapshots,
)
from moldau.storage.resources import storage_error
from moldau.storage.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    Segment,
    SegmentDeletedError,
    file_stem,
)
from moldau.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn

logger = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"  # a segment the cleaner is still writing: discarded on open
SWAP_SUFFIX = ".swap"  # a complete cleaned segment replacing older ones: finished on open
CLEANUP_SUFFIXES = (DELETED_SUFFIX, ".tmp", CLEANED_SUFFIX, SWAP_SUFFIX)
SNAPSHOTS_TO_KEEP = 2
# A log of one segment below this size gets no new producer snapshot at close (creating
# files dominates closing many small logs): the next open reads that segment's tail
# anyway and rebuilds it from its batch headers for less.
SMALL_LOG_BYTES = 1 << 20
READ_ATTEMPTS = 3  # a read racing a deletion retries with the new segment list


class CleaningAbortedError(KafkaError):
    """The log changed under a cleaning pass (truncation, deletion, close): its result
    is dropped and the log cleaned again later."""


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 for CreateTime topics
    log_start_offset: int
    duplicate: bool = False


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


@dataclass(frozen=True, slots=True)
class _Found:
    """What a directory scan found of one segment."""

    size: int
    indexed: bool  # both index files exist


def _now_ms(clock: Callable[[], float]) -> int:
    return int(clock() * 1000)


class Log:
    """One topic-partition's log. One writer thread; readers never block."""

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
        self.producer_state = ProducerStateManager()
        self.epoch_cache = LeaderEpochFileCache(directory / LEADER_EPOCH_CHECKPOINT)
        self.segments: tuple[Segment, ...] = ()
        self.closed = False
        self._log_start_offset = 0
        self._recovery_point = 0
        self._last_flush_ms = _now_ms(clock)
        self._roll_flush_to = 0  # roll asks for the old segments to be fsynced (maybe_flush)
        self._pending_deletes: list[tuple[int, Segment]] = []
        self._lock = threading.RLock()
        self._truncations = 0  # a cleaning pass started before a truncation is dropped
        self._snapshot_offset = -1  # end offset of the newest producer snapshot written
        self._unsynced_dirs: set[Path] = set()  # directories with new entries to fsync
        self._snapshot_names: list[str] = []  # from the directory scan in open()

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
        caches: StorageCaches | None = None,
    ) -> Log:
        """Load (creating if needed) the log in ``directory``.

        Nothing below the recovery point is read: sealed segments load lazily when first
        used. Segments from the one holding ``recovery_point`` on are revalidated and cut
        after their last whole valid batch (all later segments go if one is cut); with
        ``clean_shutdown`` only the active segment's tail is read, and a segment is
        recovered only if its files disagree.
        """
        log = cls(directory, config, clock, caches or default_caches())
        if not directory.exists():
            directory.mkdir(parents=True)
            log._unsynced_dirs.add(directory.parent)
        now = _now_ms(clock)
        found = log._scan_directory()
        bases = sorted(found)
        segments = [
            Segment.existing(
                directory,
                base,
                config.segment_index_bytes,
                config.index_interval_bytes,
                now,
                log.caches,
                size=found[base].size,
            )
            for base in bases
        ]
        first_recovered = 0 if not segments else max(0, bisect_right(bases, recovery_point) - 1)
        if clean_shutdown:
            first_recovered = len(segments)
        recovered: dict[int, list[BatchInfo]] = {}
        known: dict[int, list[BatchInfo]] = {}  # all headers of a segment, read anyway
        for i, segment in enumerate(segments):
            if i < first_recovered and found[segment.base_offset].indexed:
                if i < len(segments) - 1:
                    continue  # sealed: loaded when first read
                segment.make_active()
                tail = segment.load_tail()
                if tail is not None:
                    if not segment.offset_index.entries:
                        known[segment.base_offset] = tail
                    continue
            infos, truncated = segment.recover()
            segment.txn_index.reset()  # rebuilt from the batches by _load_producer_state
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
        log._load_epoch_cache(recovered, known)
        markers_recovered = [
            base for base, infos in recovered.items() if any(i.is_control for i in infos)
        ]
        log._load_producer_state(
            {**known, **recovered},
            log._snapshot_names,
            rebuild_from=min(markers_recovered, default=None),
        )
        log._snapshot_names = []
        for segment in segments:
            log.caches.files.discard(segment)  # opened to load: not in use yet
        return log

    def _scan_directory(self) -> dict[int, _Found]:
        """Finish interrupted segment swaps, delete leftovers of interrupted deletions,
        renames and cleanings; return what each segment has on disk."""
        names = os.listdir(self.dir)
        swaps = sorted(n for n in names if n.endswith(LOG_SUFFIX + SWAP_SUFFIX))
        for swap in swaps:
            self._complete_swap(self.dir / swap)
        if swaps:
            names = os.listdir(self.dir)
        self._snapshot_names = [n for n in names if n.endswith(SNAPSHOT_SUFFIX)]
        logs: dict[int, int] = {}
        indexes: dict[int, list[str]] = {}
        for name in names:
            if name.endswith(CLEANUP_SUFFIXES):
                (self.dir / name).unlink(missing_ok=True)
                continue
            stem, _, suffix = name.partition(".")
            if not stem.isdigit():
                continue
            if suffix == LOG_SUFFIX[1:]:
                logs[int(stem)] = os.stat(self.dir / name).st_size
            elif suffix in (INDEX_SUFFIX[1:], TIME_INDEX_SUFFIX[1:], TXN_INDEX_SUFFIX[1:]):
                indexes.setdefault(int(stem), []).append(name)
        for base, files in indexes.items():
            if base not in logs:
                for name in files:
                    (self.dir / name).unlink(missing_ok=True)  # index without its log
        return {
            base: _Found(size, _has_indexes(indexes.get(base, ()))) for base, size in logs.items()
        }

    def _complete_swap(self, swap: Path) -> None:
        """A ``.swap`` file is a whole, fsynced cleaned segment (it is renamed from
        ``.cleaned`` only once written), so the swap is finished rather than rolled back:
        the old segments it covers (base offsets in its offset range) go, then it takes
        its final name. Indexes are rebuilt by the recovery that follows."""
        base = int(swap.name.split(".", 1)[0])
        end = _swap_next_offset(swap, base)
        for name in os.listdir(self.dir):
            stem, _, suffix = name.partition(".")
            if (
                stem.isdigit()
                and "." + suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
                and base <= int(stem) < max(end, base + 1)
            ):
                (self.dir / name).unlink()
        os.rename(swap, self.dir / (file_stem(base) + LOG_SUFFIX))
        fsync_dir(self.dir)

    def _load_epoch_cache(
        self, recovered: dict[int, list[BatchInfo]], known: dict[int, list[BatchInfo]]
    ) -> None:
        """The leader-epoch checkpoint, updated from recovered batches; rebuilt from every
        batch header if the file is missing or unreadable (``known``: headers already
        read)."""
        path = self.dir / LEADER_EPOCH_CHECKPOINT
        try:
            cache = LeaderEpochFileCache.load(path)
        except StorageError as e:
            logger.warning("%s: %s; rebuilding it from the log", self.dir.name, e)
            cache = None
        if cache is None:
            cache = LeaderEpochFileCache(path)
            start = self.segments[0].base_offset
            batches: Iterable[BatchInfo] = self._headers_from(start, {**known, **recovered})
        else:
            batches = (info for infos in recovered.values() for info in infos)
        for info in batches:
            epoch = info.partition_leader_epoch
            latest = cache.latest_epoch
            if epoch >= 0 and (latest is None or epoch > latest):
                cache.assign(epoch, info.base_offset)
        cache.truncate_from_end(self.log_end_offset)
        cache.truncate_from_start(self._log_start_offset)
        self.epoch_cache = cache

    def _load_producer_state(
        self,
        known: dict[int, list[BatchInfo]],
        names: list[str] | None = None,
        *,
        rebuild_from: int | None = None,
    ) -> None:
        """Latest usable snapshot, then replay the batch headers written after it
        (``known``: headers already read; ``names``: the directory listing, if made).
        Aborted transactions that replay ends and the transaction indexes lack (segments
        recovered from ``rebuild_from`` on) are added to them, so the snapshot is taken
        from at or below ``rebuild_from``."""
        leo = self.log_end_offset
        start = self.segments[0].base_offset
        limit = leo if rebuild_from is None else rebuild_from
        self.producer_state = ProducerStateManager()
        self._snapshot_offset = -1
        for offset, path in reversed(list_snapshots(self.dir, names)):
            if offset > leo:
                path.unlink(missing_ok=True)
                continue
            if offset > limit:
                continue
            try:
                start = self.producer_state.load_snapshot(path)
                self._snapshot_offset = offset
                break
            except CorruptSnapshotError:
                path.unlink(missing_ok=True)
                self.producer_state = ProducerStateManager()
        if start < leo:
            completed = self.producer_state.replay(
                (info for info in self._headers_from(start, known) if info.base_offset >= start),
                self._marker_at,
            )
            for txn in completed:
                self._index_if_missing(txn)

    def _marker_at(self, info: BatchInfo) -> EndTxnMarker | None:
        """The marker of a control batch already in the log (recovery)."""
        segment = self.segments[self._segment_index(info.base_offset)]
        found = segment.translate_offset(info.base_offset)
        if found is None or found.base_offset != info.base_offset:
            return None
        try:
            return read_marker(segment.read(found.position, found.size))
        except KafkaError as e:
            logger.warning("%s: unreadable marker at %d: %s", self.dir.name, info.base_offset, e)
            return None

    def _index_if_missing(self, txn: CompletedTxn) -> None:
        if not txn.aborted:
            return
        index = self.segments[self._segment_index(txn.last_offset)].txn_index
        entries = index.entries()
        if not entries or entries[-1].last_offset < txn.last_offset:
            index.append(_aborted(txn))

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
        return self.segments[-1].next_offset  # known for the active segment: no IO

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def truncations(self) -> int:
        """Bumped by every truncation; a cleaning pass across one is dropped."""
        return self._truncations

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect_right(self.segments, offset, key=_base_offset) - 1)

    def _new_segment(self, base_offset: int, now_ms: int, *, suffix: str = "") -> Segment:
        config = self.config
        segment = Segment.create(
            self.dir,
            base_offset,
            config.segment_index_bytes,
            config.index_interval_bytes,
            now_ms,
            self.caches,
            suffix=suffix,
        )
        self._unsynced_dirs.add(self.dir)  # fsynced before the recovery point passes it
        return segment

    def new_cleaned_segment(self, base_offset: int) -> Segment:
        """An empty ``<base>.log.cleaned`` segment for the cleaner to write into."""
        return self._new_segment(base_offset, _now_ms(self.clock), suffix=CLEANED_SUFFIX)

    def update_config(self, config: LogConfig) -> None:
        """New topic config; the active segment's index keeps its size until it rolls."""
        self.config = config

    # -- append --------------------------------------------------------------------
    def append_as_leader(
        self,
        records: bytearray | memoryview,
        infos: list[BatchInfo],
        *,
        leader_epoch: int,
        now_ms: int | None = None,
    ) -> AppendResult:
        """Append validated batches (``infos`` from ``scan_batches(records)``), assigning
        offsets from the log end offset and stamping ``leader_epoch``; the first batch of a
        new epoch starts it in the epoch cache.

        Producer state is checked against the state before this call, so a produce
        request carries one batch per partition (as Kafka requires from v3 on). A retried
        duplicate returns its original offsets and appends nothing.
        """
        if not infos:
            raise InvalidRecordError("an append needs at least one record batch")
        now = _now_ms(self.clock) if now_ms is None else now_ms
        log_append_time = self.config.log_append_time
        markers = _markers(records, infos)
        for i, marker in markers.items():
            self.producer_state.check_marker(infos[i], marker)
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
        self._append(records, infos, now, markers)
        if leader_epoch >= 0 and self.epoch_cache.latest_epoch != leader_epoch:
            with self._lock:
                if self.epoch_cache.assign(leader_epoch, base_offset):
                    self.epoch_cache.write(sync=False)  # as Kafka: on every new epoch
        return AppendResult(
            base_offset,
            next_offset - 1,
            now if log_append_time else -1,
            self._log_start_offset,
        )

    def append_as_follower(
        self, records: bytearray | memoryview, infos: list[BatchInfo]
    ) -> AppendResult:
        """Append batches fetched from the leader with the offsets, epochs and timestamps
        they carry. They must start at or after the log end offset (a follower truncates
        first) and their offsets must increase. The epoch cache follows the batches'
        partition leader epochs; producer state records them without checks (the
        leader checked)."""
        if not infos:
            raise InvalidRecordError("an append needs at least one record batch")
        leo = self.log_end_offset
        if infos[0].base_offset < leo:
            raise OffsetOutOfRangeError(
                f"{self.dir.name}: follower append starts at offset {infos[0].base_offset}, "
                f"below the log end offset {leo}"
            )
        expected = infos[0].base_offset
        for info in infos:
            if info.base_offset < expected:
                raise InvalidRecordError(
                    f"{self.dir.name}: out of order offsets in a follower append: batch at "
                    f"{info.base_offset} after offset {expected - 1}"
                )
            expected = info.next_offset
        self._append(records, infos, _now_ms(self.clock), _markers(records, infos))
        with self._lock:
            changed = False
            for info in infos:
                if info.partition_leader_epoch >= 0:
                    changed |= self.epoch_cache.assign(
                        info.partition_leader_epoch, info.base_offset
                    )
            if changed:
                self.epoch_cache.write(sync=False)  # as Kafka: on every new epoch
        return AppendResult(infos[0].base_offset, infos[-1].last_offset, -1, self._log_start_offset)

    def _append(
        self,
        records: bytearray | memoryview,
        infos: list[BatchInfo],
        now: int,
        markers: dict[int, EndTxnMarker],
    ) -> None:
        """Roll if needed, write, record producer state (an aborted transaction goes to
        the active segment's transaction index), flush if flush.messages says so."""
        self._maybe_roll(len(records), infos[0].base_offset, infos[-1], now)
        active = self.active
        active.append(records, infos)
        state = self.producer_state
        for i, info in enumerate(infos):
            completed = state.update(info, info.base_offset, info.max_timestamp, markers.get(i))
            if completed is not None and completed.aborted:
                active.txn_index.append(_aborted(completed))
        if self.log_end_offset - self._recovery_point >= self.config.flush_messages:
            self.flush()

    def _maybe_roll(self, size: int, first_offset: int, last: BatchInfo, now_ms: int) -> None:
        """Kafka's shouldRoll: size, age, full index, or offsets beyond int32 relative."""
        active = self.segments[-1]
        config = self.config
        if (
            active.size
            and (
                active.size + size > config.segment_bytes
                or active.roll_due(now_ms, last.max_timestamp, config.segment_ms)
                or active.offset_index.is_full
                or active.time_index.is_full
            )
        ) or last.next_offset - 1 - active.base_offset > INT32_MAX:
            self.roll(now_ms, base_offset=first_offset)

    def roll(self, now_ms: int | None = None, *, base_offset: int | None = None) -> Segment:
        """Start a new active segment at ``base_offset`` (default: the log end offset);
        no-op if the active segment is empty and already starts there."""
        now = _now_ms(self.clock) if now_ms is None else now_ms
        base = self.log_end_offset if base_offset is None else max(base_offset, self.log_end_offset)
        with self._lock:
            active = self.active
            if active.size == 0:
                if active.base_offset == base:
                    return active
                # A follower's batch far ahead of an empty segment: start it there instead.
                segment = self._new_segment(base, now)
                self._schedule_delete(active, now)
                self.segments = (*self.segments[:-1], segment)
                return segment
            active.seal()
            segment = self._new_segment(base, now)
            self.segments = (*self.segments, segment)
            self._roll_flush_to = segment.base_offset
        self._write_producer_snapshot(sync=False)
        return segment

    def _write_producer_snapshot(self, *, sync: bool) -> None:
        leo = self.log_end_offset
        if leo == self._snapshot_offset or (
            leo == self.segments[0].base_offset and not self.producer_state.producers
        ):
            return  # up to date, or nothing a snapshot would save replaying
        self.producer_state.write_snapshot(self.dir, leo, sync=sync)
        self._snapshot_offset = leo
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

        Raises OffsetOutOfRangeError outside [log start offset, log end offset] and
        StorageError when the files cannot be read.
        """
        for _ in range(READ_ATTEMPTS):
            try:
                return self._read(offset, max_bytes, max_offset, min_one_batch)
            except SegmentDeletedError:
                with self._lock:  # a swap or deletion in progress finishes first
                    pass
            except OSError as e:
                raise storage_error(e, f"reading {self.dir.name} at offset {offset}") from e
        raise StorageError(f"{self.dir.name}: segments kept changing under a read")

    def _read(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool
    ) -> LogReadResult:
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

    # -- transactions --------------------------------------------------------------
    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: the first offset of an undecided transaction (or of one whose marker
        is not below the high watermark yet), at most the high watermark."""
        first = self.producer_state.first_unstable_offset(high_watermark)
        return high_watermark if first is None else min(first, high_watermark)

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound)``, from the
        transaction indexes of the segment holding ``fetch_offset`` on."""
        segments = self.segments
        found: list[AbortedTxn] = []
        for segment in segments[self._segment_index(fetch_offset) :]:
            txns, complete = segment.txn_index.collect(fetch_offset, upper_bound)
            found += txns
            if complete:
                break
        return found

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
    def _record_at(
        segment: Segment, info: BatchInfo, match: Callable[[Record], bool]
    ) -> tuple[int, int]:
        """Narrow a batch to its first matching record (decoding only this one batch)."""
        records = decode_records(segment.read(info.position, info.size))
        record = next((r for r in records if match(r)), None)
        if record is None:
            return info.base_offset, info.max_timestamp
        return record.offset, record.timestamp

    # -- deletion ------------------------------------------------------------------
    def delete_records_before(self, offset: int, high_watermark: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (-1 = high watermark)
        and delete the whole segments below it. Kafka rejects offsets above the HW."""
        if offset == -1:
            offset = high_watermark
        if offset < 0 or offset > high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {offset}: high watermark is {high_watermark}"
            )
        with self._lock:
            if offset > self._log_start_offset:
                self._move_log_start(offset)
            self._delete_old_segments(
                lambda segment, next_base: next_base <= self._log_start_offset, high_watermark
            )
        return self._log_start_offset

    def _move_log_start(self, offset: int) -> None:
        self._log_start_offset = offset
        self.producer_state.remove_before(offset)
        self.epoch_cache.truncate_from_start(offset)

    def enforce_retention(self, high_watermark: int, now_ms: int | None = None) -> int:
        """Delete whole old segments past retention.ms / retention.bytes (never the
        active one, never above the HW); returns how many were deleted."""
        now = _now_ms(self.clock) if now_ms is None else now_ms
        self.purge_deleted(now)
        with self._lock:
            deleted = self._delete_old_segments(
                lambda segment, next_base: next_base <= self._log_start_offset,
                high_watermark,
                now,
            )
            config = self.config
            if not config.delete_enabled:
                return deleted
            if config.retention_ms >= 0:
                deadline = now - config.retention_ms
                deleted += self._delete_old_segments(
                    lambda segment, _: segment.largest_timestamp() < deadline,
                    high_watermark,
                    now,
                )
            if config.retention_bytes >= 0:
                excess = self.size_bytes - config.retention_bytes

                def over_size(segment: Segment, _: int) -> bool:
                    nonlocal excess
                    if excess < segment.size:
                        return False
                    excess -= segment.size
                    return True

                deleted += self._delete_old_segments(over_size, high_watermark, now)
        return deleted

    def _delete_old_segments(
        self,
        predicate: Callable[[Segment, int], bool],
        high_watermark: int,
        now_ms: int | None = None,
    ) -> int:
        """Delete the oldest segments while ``predicate(segment, next base offset)`` holds
        and the next segment starts at or below the high watermark."""
        segments = self.segments
        count = 0
        for segment, following in zip(segments, segments[1:], strict=False):
            if following.base_offset > high_watermark or not predicate(
                segment, following.base_offset
            ):
                break
            count += 1
        if not count:
            return 0
        doomed, self.segments = segments[:count], segments[count:]
        start = max(self._log_start_offset, self.segments[0].base_offset)
        if start > self._log_start_offset:
            self._move_log_start(start)
        now = _now_ms(self.clock) if now_ms is None else now_ms
        for segment in doomed:
            self._schedule_delete(segment, now)
        return count

    def _schedule_delete(self, segment: Segment, now_ms: int) -> None:
        segment.mark_deleted()
        if self.config.file_delete_delay_ms == 0:
            segment.purge()
        else:
            with self._lock:
                self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, segment))

    def purge_deleted(self, now_ms: int | None = None) -> None:
        """Remove ``.deleted`` segment files whose delay has passed."""
        now = _now_ms(self.clock) if now_ms is None else now_ms
        with self._lock:
            due = [s for t, s in self._pending_deletes if t <= now]
            self._pending_deletes = [(t, s) for t, s in self._pending_deletes if t > now]
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
        ``Log.open`` finishes a swap cut short. Raises CleaningAbortedError, changing
        nothing, if the log was truncated since ``truncations`` was read, closed, or no
        longer holds ``old``.
        """
        with self._lock:
            segments = self.segments
            i = next((k for k, s in enumerate(segments) if s is old[0]), -1)
            if (
                self.closed
                or truncations != self._truncations
                or i < 0
                or tuple(segments[i : i + len(old)]) != tuple(old)
                or i + len(old) >= len(segments)
            ):
                raise CleaningAbortedError(f"{self.dir.name} changed during cleaning")
            swap = self.dir / (file_stem(old[0].base_offset) + LOG_SUFFIX + SWAP_SUFFIX)
            os.rename(cleaned.path, swap)
            cleaned.path = swap
            fsync_dir(self.dir)
            now = _now_ms(self.clock)
            for segment in old:
                self._schedule_delete(segment, now)
            cleaned.rename(self.dir)
            fsync_dir(self.dir)
            self.segments = (*segments[:i], cleaned, *segments[i + len(old) :])

    # -- durability ----------------------------------------------------------------
    def flush(self, up_to: int | None = None) -> None:
        """fsync segments holding offsets in [recovery point, up_to) and advance it.

        Safe from a worker thread: index and checkpoint files are written under the lock,
        data is fsynced outside it, and a truncation meanwhile keeps the recovery point.
        """
        leo = self.log_end_offset
        up_to = leo if up_to is None else min(up_to, leo)
        self._last_flush_ms = _now_ms(self.clock)
        if up_to <= self._recovery_point:
            return
        with self._lock:
            truncations = self._truncations
            first = self._segment_index(self._recovery_point)
            last = self._segment_index(max(up_to - 1, 0))
            segments = self.segments[first : last + 1]
            if self.epoch_cache.dirty or not self.epoch_cache.durable:
                self.epoch_cache.write()
            unsynced, self._unsynced_dirs = self._unsynced_dirs, set()
        for segment in segments:
            segment.flush()
        for directory in unsynced:
            fsync_dir(directory)
        with self._lock:
            if truncations == self._truncations:
                self._recovery_point = max(self._recovery_point, up_to)

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

    def close(self, *, sync: bool = True) -> None:
        """Flush, trim indexes, write the epoch checkpoint and a producer snapshot: the
        next open needs no recovery. With ``sync=False`` nothing is fsynced; the caller
        makes everything durable at once (``sync_filesystems``) before it says so."""
        with self._lock:
            if self.closed:
                return
            self.active.seal()
            if sync:
                self.flush()
            else:
                self._recovery_point = self.log_end_offset
            small = len(self.segments) == 1 and self.active.size <= SMALL_LOG_BYTES
            if self.epoch_cache.dirty:
                self.epoch_cache.write(sync=sync)
            if self.producer_state.producers or not small:
                self._write_producer_snapshot(sync=sync)
            for segment in self.segments:
                segment.close()
            pending, self._pending_deletes = self._pending_deletes, []
            self.closed = True
        for _, segment in pending:
            segment.purge()

    def delete(self) -> None:
        """Topic deletion: forget every file and remove the directory (ranges still
        being sent keep their files open)."""
        with self._lock:
            self.closed = True
            doomed = [*self.segments, *(s for _, s in self._pending_deletes)]
            self._pending_deletes = []
        for segment in doomed:
            segment.deleted = True
            self.caches.files.discard(segment)
            self.caches.indexes.forget(segment.offset_index)
            self.caches.indexes.forget(segment.time_index)
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- replication ---------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Remove everything from the batch holding ``offset`` on (follower truncation,
        recovery); the epoch cache and producer state follow. Below the log start offset
        the log is emptied and restarts at ``offset``."""
        if offset >= self.log_end_offset:
            return
        if offset < self._log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        now = _now_ms(self.clock)
        with self._lock:
            self._truncations += 1
            segments = self.segments
            i = self._segment_index(offset)
            for segment in segments[i + 1 :]:
                self._schedule_delete(segment, now)
            segments[i].make_active()
            segments[i].truncate_to(offset)
            self.segments = segments[: i + 1]
            self._after_truncation()
        self._load_producer_state({})

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart empty at ``offset``, which becomes the log
        start offset (a follower too far behind the leader's log start)."""
        now = _now_ms(self.clock)
        with self._lock:
            self._truncations += 1
            for segment in self.segments:
                self._schedule_delete(segment, now)
            self.segments = (self._new_segment(offset, now),)
            self._log_start_offset = offset
            self.epoch_cache.clear()
            self._after_truncation()
            self._recovery_point = self._roll_flush_to = offset
            for _, path in list_snapshots(self.dir):
                path.unlink(missing_ok=True)
            self.producer_state = ProducerStateManager()
            self._snapshot_offset = -1

    def _after_truncation(self) -> None:
        leo = self.log_end_offset
        self._recovery_point = min(self._recovery_point, leo)
        self._roll_flush_to = min(self._roll_flush_to, leo)
        self.epoch_cache.truncate_from_end(leo)
        if self.epoch_cache.dirty:
            self.epoch_cache.write()  # at once: stale entries past the end would mislead


def _base_offset(segment: Segment) -> int:
    return segment.base_offset


def _has_indexes(files: Sequence[str]) -> bool:
    """Both the offset and the time index are there (a transaction index is optional)."""
    return sum(not name.endswith(TXN_INDEX_SUFFIX) for name in files) == 2


def _markers(records: bytearray | memoryview, infos: list[BatchInfo]) -> dict[int, EndTxnMarker]:
    """The transaction markers among ``infos`` by index (no work for data batches)."""
    markers = {}
    for i, info in enumerate(infos):
        if info.is_control and info.producer_id >= 0:
            marker = read_marker(memoryview(records)[info.position : info.end_position])
            if marker is not None:
                markers[i] = marker
    return markers


def _aborted(txn: CompletedTxn) -> AbortedTxn:
    return AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)


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
