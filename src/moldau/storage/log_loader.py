"""Kafka's ``LogLoader``: opening a partition's log directory after a clean or unclean stop.

It finishes interrupted cleaner swaps, deletes leftovers, revalidates the segments from the
recovery point on (cutting after the last whole valid batch), and rebuilds the leader-epoch
cache and producer state the segments imply. ``rebuild_producer_state`` is shared with
``UnifiedLog``, which replays producer state again after a truncation.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from moldau.config.topic import LogConfig
from moldau.protocol.errors import KafkaError, StorageError
from moldau.records.batch import BATCH_HEADER_SIZE, BatchInfo, read_batch_header
from moldau.records.control import EndTxnMarker, read_marker
from moldau.storage.checkpoint import fsync_dir
from moldau.storage.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from moldau.storage.files import StorageCaches
from moldau.storage.local_log import CLEANED_SUFFIX, SWAP_SUFFIX, LocalLog, now_ms
from moldau.storage.producer_state import (
    SNAPSHOT_SUFFIX,
    CompletedTxn,
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
from moldau.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn

logger = logging.getLogger(__name__)

CLEANUP_SUFFIXES = (DELETED_SUFFIX, ".tmp", CLEANED_SUFFIX, SWAP_SUFFIX)


@dataclass(frozen=True, slots=True)
class _Found:
    """What a directory scan found of one segment."""

    size: int
    indexed: bool  # both index files exist


@dataclass(slots=True)
class LoadedLog:
    """What opening a log directory produced, for ``UnifiedLog``."""

    local_log: LocalLog
    log_start_offset: int
    epoch_cache: LeaderEpochFileCache
    producer_state: ProducerStateManager
    snapshot_offset: int  # end offset of the newest producer snapshot on disk (-1: none)


@dataclass(slots=True)
class LogLoader:
    directory: Path
    config: LogConfig
    clock: Callable[[], float]
    caches: StorageCaches
    recovery_point: int = 0
    log_start_offset: int | None = None
    clean_shutdown: bool = False

    def load(self) -> LoadedLog:
        """Load (creating if needed) the log in ``directory``.

        Nothing below the recovery point is read: sealed segments load lazily when first
        used. Segments from the one holding ``recovery_point`` on are revalidated and cut
        after their last whole valid batch (all later segments go if one is cut); with
        ``clean_shutdown`` only the active segment's tail is read, and a segment is
        recovered only if its files disagree.
        """
        directory, config, recovery_point = self.directory, self.config, self.recovery_point
        local = LocalLog(directory, config, self.clock, self.caches)
        if not directory.exists():
            directory.mkdir(parents=True)
            local.unsynced_dirs.add(directory.parent)
        now = now_ms(self.clock)
        found, snapshot_names = _scan_directory(directory)
        bases = sorted(found)
        segments = [self._segment(base, found[base].size, now) for base in bases]
        first_recovered = 0 if not segments else max(0, bisect_right(bases, recovery_point) - 1)
        if self.clean_shutdown:
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
            segment.txn_index.reset()  # rebuilt from the batches by rebuild_producer_state
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
            segments.append(local.new_segment(self.log_start_offset or 0, now))
        for segment in segments[:-1]:
            segment.seal()
        segments[-1].make_active()
        local.segments = tuple(segments)
        leo = local.log_end_offset
        log_start = min(max(self.log_start_offset or 0, segments[0].base_offset), leo)
        local.recovery_point = leo if self.clean_shutdown else min(recovery_point, leo)
        local.roll_flush_to = local.recovery_point
        epoch_cache = _load_epoch_cache(local, log_start, recovered, known)
        markers_recovered = [
            base for base, infos in recovered.items() if any(i.is_control for i in infos)
        ]
        producer_state, snapshot_offset = rebuild_producer_state(
            local,
            {**known, **recovered},
            snapshot_names,
            rebuild_from=min(markers_recovered, default=None),
        )
        for segment in segments:
            self.caches.files.discard(segment)  # opened to load: not in use yet
        return LoadedLog(local, log_start, epoch_cache, producer_state, snapshot_offset)

    def _segment(self, base_offset: int, size: int, now: int) -> Segment:
        """The segment found on disk at ``base_offset``, its log file ``size`` bytes."""
        config = self.config
        return Segment.existing(
            self.directory,
            base_offset,
            config.segment_index_bytes,
            config.index_interval_bytes,
            now,
            self.caches,
            size=size,
        )


def _scan_directory(directory: Path) -> tuple[dict[int, _Found], list[str]]:
    """Finish interrupted segment swaps, delete leftovers of interrupted deletions,
    renames and cleanings; return what each segment has on disk and the names of the
    producer snapshots."""
    names = os.listdir(directory)
    swaps = sorted(n for n in names if n.endswith(LOG_SUFFIX + SWAP_SUFFIX))
    for swap in swaps:
        _complete_swap(directory, directory / swap)
    if swaps:
        names = os.listdir(directory)
    snapshot_names = [n for n in names if n.endswith(SNAPSHOT_SUFFIX)]
    logs: dict[int, int] = {}
    indexes: dict[int, list[str]] = {}
    for name in names:
        if name.endswith(CLEANUP_SUFFIXES):
            (directory / name).unlink(missing_ok=True)
            continue
        stem, _, suffix = name.partition(".")
        if not stem.isdigit():
            continue
        if suffix == LOG_SUFFIX[1:]:
            logs[int(stem)] = os.stat(directory / name).st_size
        elif suffix in (INDEX_SUFFIX[1:], TIME_INDEX_SUFFIX[1:], TXN_INDEX_SUFFIX[1:]):
            indexes.setdefault(int(stem), []).append(name)
    for base, files in indexes.items():
        if base not in logs:
            for name in files:
                (directory / name).unlink(missing_ok=True)  # index without its log
    found = {base: _Found(size, _has_indexes(indexes.get(base, ()))) for base, size in logs.items()}
    return found, snapshot_names


def _complete_swap(directory: Path, swap: Path) -> None:
    """A ``.swap`` file is a whole, fsynced cleaned segment (it is renamed from
    ``.cleaned`` only once written), so the swap is finished rather than rolled back:
    the old segments it covers (base offsets in its offset range) go, then it takes
    its final name. Indexes are rebuilt by the recovery that follows."""
    base = int(swap.name.split(".", 1)[0])
    end = _swap_next_offset(swap, base)
    for name in os.listdir(directory):
        stem, _, suffix = name.partition(".")
        if (
            stem.isdigit()
            and "." + suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
            and base <= int(stem) < max(end, base + 1)
        ):
            (directory / name).unlink()
    os.rename(swap, directory / (file_stem(base) + LOG_SUFFIX))
    fsync_dir(directory)


def _load_epoch_cache(
    local: LocalLog,
    log_start_offset: int,
    recovered: dict[int, list[BatchInfo]],
    known: dict[int, list[BatchInfo]],
) -> LeaderEpochFileCache:
    """The leader-epoch checkpoint, updated from recovered batches; rebuilt from every
    batch header if the file is missing or unreadable (``known``: headers already
    read)."""
    path = local.dir / LEADER_EPOCH_CHECKPOINT
    try:
        cache = LeaderEpochFileCache.load(path)
    except StorageError as e:
        logger.warning("%s: %s; rebuilding it from the log", local.dir.name, e)
        cache = None
    if cache is None:
        cache = LeaderEpochFileCache(path)
        start = local.segments[0].base_offset
        batches: Iterable[BatchInfo] = _headers_from(local, start, {**known, **recovered})
    else:
        batches = (info for infos in recovered.values() for info in infos)
    for info in batches:
        epoch = info.partition_leader_epoch
        latest = cache.latest_epoch
        if epoch >= 0 and (latest is None or epoch > latest):
            cache.assign(epoch, info.base_offset)
    cache.truncate_from_end(local.log_end_offset)
    cache.truncate_from_start(log_start_offset)
    return cache


def rebuild_producer_state(
    local: LocalLog,
    known: dict[int, list[BatchInfo]],
    names: list[str] | None = None,
    *,
    rebuild_from: int | None = None,
) -> tuple[ProducerStateManager, int]:
    """Latest usable snapshot, then replay the batch headers written after it
    (``known``: headers already read; ``names``: the directory listing, if made).
    Aborted transactions that replay ends and the transaction indexes lack (segments
    recovered from ``rebuild_from`` on) are added to them, so the snapshot is taken
    from at or below ``rebuild_from``. Returns the state and the end offset of the
    snapshot it started from (-1: none)."""
    leo = local.log_end_offset
    start = local.segments[0].base_offset
    limit = leo if rebuild_from is None else rebuild_from
    state = ProducerStateManager()
    snapshot_offset = -1
    for offset, path in reversed(list_snapshots(local.dir, names)):
        if offset > leo:
            path.unlink(missing_ok=True)
            continue
        if offset > limit:
            continue
        try:
            start = state.load_snapshot(path)
            snapshot_offset = offset
            break
        except CorruptSnapshotError:
            path.unlink(missing_ok=True)
            state = ProducerStateManager()
    if start < leo:
        completed = state.replay(
            (info for info in _headers_from(local, start, known) if info.base_offset >= start),
            lambda info: _marker_at(local, info),
        )
        for txn in completed:
            _index_if_missing(local, txn)
    return state, snapshot_offset


def _marker_at(local: LocalLog, info: BatchInfo) -> EndTxnMarker | None:
    """The marker of a control batch already in the log (recovery)."""
    segment = local.segments[local.segment_index(info.base_offset)]
    found = segment.translate_offset(info.base_offset)
    if found is None or found.base_offset != info.base_offset:
        return None
    try:
        return read_marker(segment.read(found.position, found.size))
    except KafkaError as e:
        logger.warning("%s: unreadable marker at %d: %s", local.dir.name, info.base_offset, e)
        return None


def _index_if_missing(local: LocalLog, txn: CompletedTxn) -> None:
    if not txn.aborted:
        return
    index = local.segments[local.segment_index(txn.last_offset)].txn_index
    entries = index.entries()
    if not entries or entries[-1].last_offset < txn.last_offset:
        index.append(aborted_txn(txn))


def aborted_txn(txn: CompletedTxn) -> AbortedTxn:
    return AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)


def _headers_from(
    local: LocalLog, offset: int, known: dict[int, list[BatchInfo]]
) -> Iterable[BatchInfo]:
    for segment in local.segments[local.segment_index(offset) :]:
        if segment.base_offset in known:
            yield from known[segment.base_offset]
        else:
            first = segment.translate_offset(offset)
            if first is not None:
                yield from segment.batches_from(first.position)


def _has_indexes(files: Sequence[str]) -> bool:
    """Both the offset and the time index are there (a transaction index is optional)."""
    return sum(not name.endswith(TXN_INDEX_SUFFIX) for name in files) == 2


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
