"""A partition's log over both tiers: Kafka's ``UnifiedLog``, the one API replication uses.

It owns what spans the segments: the log start offset, producer state (``.snapshot``
files), Kafka's leader-epoch cache (``leader-epoch-checkpoint``), aborted-transaction
indexes consistent with the batches, appends and retention. The segments on this disk are
its ``LocalLog``; ``LogLoader`` opens one. Appends stamp offsets into the producer's buffer
in place and write it with one ``write``; transaction markers are the only batches whose
record it reads on append.

The log does not own the high watermark (replication does): what needs it takes it as an
argument.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moldau.config.topic import LogConfig
from moldau.protocol.errors import (
    InvalidRecordError,
    KafkaError,
    OffsetMovedToTieredStorageError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from moldau.records.batch import (
    INT32_MAX,
    BatchInfo,
    recompress_batches,
    scan_batches,
    set_log_append_time,
    stamp_base_offset,
)
from moldau.records.compression import CODEC_BY_NAME
from moldau.records.control import EndTxnMarker, read_marker
from moldau.storage.epoch_cache import LeaderEpochFileCache
from moldau.storage.files import StorageCaches, default_caches
from moldau.storage.local_log import LocalLog, LogReadResult, now_ms
from moldau.storage.log_loader import LogLoader, aborted_txn, rebuild_producer_state
from moldau.storage.producer_state import ProducerStateManager, list_snapshots
from moldau.storage.resources import storage_error
from moldau.storage.segment import LOG_SUFFIX, Segment
from moldau.storage.txn_index import AbortedTxn

SNAPSHOTS_TO_KEEP = 2
# A log of one segment below this size gets no new producer snapshot at close (creating
# files dominates closing many small logs): the next open reads that segment's tail
# anyway and rebuilds it from its batch headers for less.
SMALL_LOG_BYTES = 1 << 20
# What opening a lazily registered log sets (``UnifiedLog.__getattr__`` opens it on use).
_LOADED_STATE = frozenset(
    {
        "local_log",
        "epoch_cache",
        "producer_state",
        "_log_start_offset",
        "_local_log_start_offset",
        "_snapshot_offset",
    }
)


# Made once per partition of every produce: not frozen, whose __init__ costs twice as much.
@dataclass(slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 for CreateTime topics
    log_start_offset: int
    duplicate: bool = False


class UnifiedLog:
    """One topic-partition's log. One writer thread; readers never block.

    A log made with :meth:`lazy` is only registered: its directory is opened at its
    first use (see there).
    """

    _loader: LogLoader | None = None  # set while a lazy log is not open yet
    _known_end = -1  # a lazy log's end offset known without opening it (-1: unknown)
    _known_start: int  # and its log start offset, when the end is known
    _disk_usage: tuple[int, int] | None = None  # a lazy log's bytes and segments, once listed
    _load_lock: threading.Lock

    def __init__(
        self,
        local_log: LocalLog,
        log_start_offset: int,
        epoch_cache: LeaderEpochFileCache,
        producer_state: ProducerStateManager,
        snapshot_offset: int = -1,
        *,
        local_log_start_offset: int | None = None,
        remote_log_enabled: bool = False,
    ) -> None:
        self.local_log = local_log
        self.epoch_cache = epoch_cache
        self.producer_state = producer_state
        self._log_start_offset = log_start_offset  # over both tiers
        self._local_log_start_offset = (
            log_start_offset if local_log_start_offset is None else local_log_start_offset
        )
        self._snapshot_offset = snapshot_offset  # end offset of the newest producer snapshot
        # Tiered storage (KIP-405): copies leave local segments only once copied; what is
        # copied is the RemoteLogManager's to say (from COPY_SEGMENT_FINISHED events).
        self.remote_log_enabled = remote_log_enabled
        self._highest_offset_in_remote_storage = -1

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
        remote_log_enabled: bool = False,
    ) -> UnifiedLog:
        """Load (creating if needed) the log in ``directory`` (see ``LogLoader``). A tiered
        log keeps a checkpointed log start offset below its local segments (the remote tier
        holds those records)."""
        loaded = cls._loader_for(
            directory, config, clock, caches, recovery_point, log_start_offset, clean_shutdown
        ).load()
        local_start = loaded.log_start_offset
        start = local_start
        if remote_log_enabled and log_start_offset is not None:
            start = min(log_start_offset, local_start)
        return cls(
            loaded.local_log,
            start,
            loaded.epoch_cache,
            loaded.producer_state,
            loaded.snapshot_offset,
            local_log_start_offset=local_start,
            remote_log_enabled=remote_log_enabled,
        )

    @classmethod
    def lazy(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int,
        log_start_offset: int | None,
        clean_shutdown: bool,
        clock: Callable[[], float] = time.time,
        caches: StorageCaches | None = None,
    ) -> UnifiedLog:
        """A local (not tiered) log registered now and opened by ``LogLoader``, with the
        same arguments and so the same recovery, at its first use: a broker starts with
        tens of thousands of logs without opening a file of theirs (Kafka skips recovery
        after a clean shutdown and maps indexes lazily; here the whole open waits).

        After a clean shutdown the checkpoints are exact: the log end offset is the
        recovery point (the shutdown flushed everything) and the log start offset the
        checkpointed one, so a replica becomes leader or follower and the checkpoints are
        rewritten without opening the log. After a crash the end is known only once
        recovery ran, so asking for it opens the log."""
        log = cls.__new__(cls)
        log._loader = cls._loader_for(
            directory, config, clock, caches, recovery_point, log_start_offset, clean_shutdown
        )
        log._load_lock = threading.Lock()
        if clean_shutdown and log_start_offset is not None:
            log._known_end = recovery_point
            log._known_start = min(log_start_offset, recovery_point)
        log.remote_log_enabled = False
        log._highest_offset_in_remote_storage = -1
        return log

    @staticmethod
    def _loader_for(
        directory: Path,
        config: LogConfig,
        clock: Callable[[], float],
        caches: StorageCaches | None,
        recovery_point: int,
        log_start_offset: int | None,
        clean_shutdown: bool,
    ) -> LogLoader:
        """The loader of `open` (run at once) and of `lazy` (run at first use): one
        builder, so an eager and a deferred open recover a log alike."""
        return LogLoader(
            directory,
            config,
            clock,
            caches or default_caches(),
            recovery_point,
            log_start_offset,
            clean_shutdown,
        )

    def __getattr__(self, name: str) -> Any:
        """Called only for attributes not set: the state of a lazy log not open yet."""
        if name not in _LOADED_STATE:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self.load()
        return object.__getattribute__(self, name)

    def load(self) -> None:
        """Open a lazily registered log now (nothing if it is open); any thread may call
        it, the first one opens. An error (KAFKA_STORAGE_ERROR for the request that used
        it) leaves it unopened: the next use tries again."""
        if self._loader is None:
            return
        with self._load_lock:
            loader = self._loader
            if loader is None:
                return
            try:
                loaded = loader.load()
            except OSError as e:
                raise storage_error(e, f"cannot open the log in {loader.directory}") from e
            self.epoch_cache = loaded.epoch_cache
            self.producer_state = loaded.producer_state
            self._log_start_offset = self._local_log_start_offset = loaded.log_start_offset
            self._snapshot_offset = loaded.snapshot_offset
            self.local_log = loaded.local_log  # last: its presence means all of it is set
            self._loader = None

    @property
    def recovery_owed(self) -> bool:
        """Registered after a crash and not opened since: its end is known only once it
        is recovered, so its log dir must not be marked clean."""
        return self._loader is not None and self._known_end < 0

    @property
    def loaded(self) -> bool:
        """False for a lazy log not opened yet: nothing of it changed since it was
        registered (periodic passes skip it)."""
        return self._loader is None

    # -- state ---------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        loader = self._loader
        return self.local_log.dir if loader is None else loader.directory

    @dir.setter
    def dir(self, directory: Path) -> None:
        """The directory was renamed (topic deletion renames it before removing it)."""
        if self._loader is not None:
            with self._load_lock:
                if self._loader is not None:
                    self._loader.directory = directory
                    return
        self.local_log.dir = directory

    @property
    def config(self) -> LogConfig:
        loader = self._loader
        return self.local_log.config if loader is None else loader.config

    @property
    def clock(self) -> Callable[[], float]:
        loader = self._loader
        return self.local_log.clock if loader is None else loader.clock

    @property
    def caches(self) -> StorageCaches:
        loader = self._loader
        return self.local_log.caches if loader is None else loader.caches

    @property
    def segments(self) -> tuple[Segment, ...]:
        return self.local_log.segments

    @property
    def active(self) -> Segment:
        return self.local_log.active

    @property
    def closed(self) -> bool:
        return self._loader is None and self.local_log.closed

    @property
    def log_start_offset(self) -> int:
        if self._loader is not None and self._known_end >= 0:
            return self._known_start
        return self._log_start_offset

    @property
    def local_log_start_offset(self) -> int:
        """The first offset on this disk (the log start offset unless tiered)."""
        if self._loader is not None and self._known_end >= 0:
            return self._known_start
        return self._local_log_start_offset

    @property
    def log_start_checkpoint(self) -> int | None:
        """The log start offset for the log dir's checkpoint, without opening a lazy log
        (one not opened keeps what it was registered with; None: nothing to write)."""
        loader = self._loader
        return self.log_start_offset if loader is None else loader.log_start_offset

    @property
    def highest_offset_in_remote_storage(self) -> int:
        """The last offset copied to the remote tier (-1: none)."""
        return self._highest_offset_in_remote_storage

    def update_highest_offset_in_remote_storage(self, offset: int) -> None:
        """A copy finished (or a new leader found what its predecessors copied)."""
        self._highest_offset_in_remote_storage = max(self._highest_offset_in_remote_storage, offset)

    def update_log_start_offset_from_remote_tier(self, offset: int) -> None:
        """The remote tier's log start after its retention deleted segments (Kafka's
        updateLogStartOffsetFromRemoteTier): never beyond the local log start."""
        with self.local_log.lock:
            offset = min(offset, self._local_log_start_offset)
            if offset > self._log_start_offset:
                self._move_log_start(offset)

    @property
    def log_end_offset(self) -> int:
        if self._loader is not None and self._known_end >= 0:
            return self._known_end
        return self.local_log.log_end_offset

    @property
    def recovery_point(self) -> int:
        loader = self._loader
        return self.local_log.recovery_point if loader is None else loader.recovery_point

    @property
    def truncations(self) -> int:
        """Bumped by every truncation; a cleaning pass across one is dropped."""
        return self.local_log.truncations

    @property
    def size_bytes(self) -> int:
        loader = self._loader
        return self.local_log.size_bytes if loader is None else self._on_disk()[0]

    @property
    def segment_count(self) -> int:
        loader = self._loader
        return len(self.local_log.segments) if loader is None else self._on_disk()[1]

    def _on_disk(self) -> tuple[int, int]:
        """Bytes and segments of a lazy log not open yet, from one listing of its
        directory, kept (nothing changes before it opens): metrics and DescribeLogDirs
        must not open every log."""
        if self._disk_usage is None:
            size = segments = 0
            with os.scandir(self.dir) as entries:
                for entry in entries:
                    if entry.name.endswith(LOG_SUFFIX):
                        size += entry.stat().st_size
                        segments += 1
            self._disk_usage = (size, segments)
        return self._disk_usage

    def new_cleaned_segment(self, base_offset: int) -> Segment:
        return self.local_log.new_cleaned_segment(base_offset)

    def update_config(self, config: LogConfig) -> None:
        if self._loader is not None:
            with self._load_lock:
                if self._loader is not None:
                    self._loader.config = config
                    return
        self.local_log.update_config(config)

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
        now = self._now() if now_ms is None else now_ms
        config = self.config
        log_append_time = config.log_append_time
        markers = _markers(records, infos)
        state = self.producer_state
        for i, marker in markers.items():
            state.check_marker(infos[i], marker)
        for info in infos:
            duplicate = state.check(info)
            if duplicate is not None:
                return AppendResult(
                    duplicate.base_offset,
                    duplicate.last_offset,
                    duplicate.timestamp if log_append_time else -1,
                    self._log_start_offset,
                    duplicate=True,
                )
        if config.compression_type != "producer":
            records, infos = self._recompress(records, infos)
        base_offset = next_offset = self.log_end_offset
        for info in infos:
            stamp_base_offset(records, info, next_offset, leader_epoch)
            if log_append_time:
                set_log_append_time(records, info, now)
            next_offset = info.next_offset
        self._append(records, infos, now, markers)
        if leader_epoch >= 0 and self.epoch_cache.latest_epoch != leader_epoch:
            with self.local_log.lock:
                if self.epoch_cache.assign(leader_epoch, base_offset):
                    self.epoch_cache.write(sync=False)  # as Kafka: on every new epoch
        return AppendResult(
            base_offset,
            next_offset - 1,
            now if log_append_time else -1,
            self._log_start_offset,
        )

    def recompressed(self, records: bytearray | memoryview) -> bytearray | memoryview:
        """A client's produced batch in the topic's ``compression.type`` (``records`` itself
        when it is already, or invalid: the append reports that). The CPU-heavy part of a
        leader append, safe to run in a worker thread: it touches no state of the log."""
        config = self.config
        if config.compression_type == "producer":
            return records
        try:
            infos = scan_batches(records, max_batch_size=config.max_message_bytes, strict=True)
        except KafkaError:
            return records
        codec = CODEC_BY_NAME[config.compression_type]
        return recompress_batches(records, infos, codec, config.compression_level)[0]

    def _recompress(
        self, records: bytearray | memoryview, infos: list[BatchInfo]
    ) -> tuple[bytearray | memoryview, list[BatchInfo]]:
        """Batches in the topic's ``compression.type`` codec, still within max.message.bytes."""
        config = self.config
        codec = CODEC_BY_NAME[config.compression_type]
        records, infos = recompress_batches(records, infos, codec, config.compression_level)
        for info in infos:
            if info.size > config.max_message_bytes:
                raise RecordTooLargeError(
                    f"batch of {info.size} bytes recompressed to {config.compression_type} "
                    f"exceeds max.message.bytes {config.max_message_bytes}"
                )
        return records, infos

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
        self._append(records, infos, self._now(), _markers(records, infos))
        with self.local_log.lock:
            changed = False
            for info in infos:
                if info.partition_leader_epoch >= 0:
                    changed |= self.epoch_cache.assign(
                        info.partition_leader_epoch, info.base_offset
                    )
            if changed:
                self.epoch_cache.write(sync=False)  # as Kafka: on every new epoch
        return AppendResult(infos[0].base_offset, infos[-1].last_offset, -1, self._log_start_offset)

    def assign_epoch_start_offset(self, leader_epoch: int) -> None:
        """A new leader epoch starts at the log end offset, recorded as this log becomes
        its leader, before any append (Kafka's Partition.makeLeader): a follower holding
        entries of an epoch this log never held learns where to truncate, and
        OffsetForLeaderEpoch places the current epoch."""
        if leader_epoch < 0:
            return
        with self.local_log.lock:
            if self.epoch_cache.assign(leader_epoch, self.log_end_offset):
                self.epoch_cache.write(sync=False)

    def _append(
        self,
        records: bytearray | memoryview,
        infos: list[BatchInfo],
        now: int,
        markers: dict[int, EndTxnMarker],
    ) -> None:
        """Roll if needed, write, record producer state (an aborted transaction goes to
        the active segment's transaction index), flush if flush.messages says so."""
        local = self.local_log  # a log appended to is open: no loader in the way
        active = self._maybe_roll(local, len(records), infos[0].base_offset, infos[-1], now)
        active.append(records, infos)
        state = self.producer_state
        for i, info in enumerate(infos):
            if info.producer_id < 0:
                continue  # no producer state to keep (Kafka's non-idempotent producer)
            completed = state.update(info, info.base_offset, info.max_timestamp, markers.get(i))
            if completed is not None and completed.aborted:
                active.txn_index.append(aborted_txn(completed))
        if active.next_offset - local.recovery_point >= local.config.flush_messages:
            self.flush()

    def _maybe_roll(
        self, local: LocalLog, size: int, first_offset: int, last: BatchInfo, now: int
    ) -> Segment:
        """Kafka's shouldRoll: size, age, full index, or offsets beyond int32 relative;
        returns the active segment to append to."""
        active = local.segments[-1]
        config = local.config
        if (
            active.size
            and (
                active.size + size > config.segment_bytes
                or active.roll_due(now, last.max_timestamp, config.segment_ms)
                or active.offset_index.is_full
                or active.time_index.is_full
            )
        ) or last.next_offset - 1 - active.base_offset > INT32_MAX:
            return self.roll(now, base_offset=first_offset)
        return active

    def roll(self, now_ms: int | None = None, *, base_offset: int | None = None) -> Segment:
        """Start a new active segment at ``base_offset`` (default: the log end offset);
        no-op if the active segment is empty and already starts there. A producer
        snapshot is written at the new segment's base."""
        now = self._now() if now_ms is None else now_ms
        segment, sealed = self.local_log.roll(now, base_offset)
        if sealed:
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
        for offset, path in list_snapshots(self.dir)[:-SNAPSHOTS_TO_KEEP]:
            if self.remote_log_enabled and offset > self._highest_offset_in_remote_storage + 1:
                continue  # the copy of the segment ending here takes it along (KIP-405)
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
        if self._log_start_offset <= offset < self._local_log_start_offset:
            raise OffsetMovedToTieredStorageError(
                f"offset {offset} of {self.dir.name} is in the remote tier (local log start "
                f"{self._local_log_start_offset})"
            )
        return self.local_log.read(
            offset,
            max_bytes,
            log_start_offset=self._local_log_start_offset,
            max_offset=max_offset,
            min_one_batch=min_one_batch,
        )

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
        """Aborted transactions overlapping ``[fetch_offset, upper_bound)``."""
        return self.local_log.collect_aborted_transactions(fetch_offset, upper_bound)

    # -- timestamps ----------------------------------------------------------------
    def offset_for_timestamp(
        self, timestamp: int, *, max_offset: int | None = None
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``, like
        ListOffsets; None if there is none below ``max_offset``."""
        found = self.local_log.offset_for_timestamp(timestamp)
        if found is None:
            return None
        offset = max(found[0], self._local_log_start_offset)
        if max_offset is not None and offset >= max_offset:
            return None
        return offset, found[1]

    def max_timestamp_offset(self) -> tuple[int, int]:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3);
        (-1, -1) for an empty log."""
        return self.local_log.max_timestamp_offset()

    # -- deletion ------------------------------------------------------------------
    def delete_records_before(self, offset: int, high_watermark: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (-1 = high watermark)
        and delete the whole local segments below it (the RemoteLogManager deletes remote
        ones). Kafka rejects offsets above the HW."""
        if offset == -1:
            offset = high_watermark
        if offset < 0 or offset > high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {offset}: high watermark is {high_watermark}"
            )
        with self.local_log.lock:
            if offset > self._log_start_offset:
                self._move_log_start(offset)
            self._delete_old_segments(
                lambda segment, next_base: next_base <= self._local_log_start_offset,
                high_watermark,
            )
        return self._log_start_offset

    def _move_log_start(self, offset: int) -> None:
        self._log_start_offset = offset
        self._local_log_start_offset = max(self._local_log_start_offset, offset)
        self.producer_state.remove_before(offset)
        self.epoch_cache.truncate_from_start(offset)

    def enforce_retention(self, high_watermark: int, now_ms: int | None = None) -> int:
        """Delete whole old local segments past retention.ms / retention.bytes (never the
        active one, never above the HW); returns how many were deleted.

        A tiered log applies local.retention.* instead and deletes only segments already
        copied to the remote tier (total retention is the RemoteLogManager's)."""
        now = self._now() if now_ms is None else now_ms
        self.purge_deleted(now)
        with self.local_log.lock:
            deleted = self._delete_old_segments(
                lambda segment, next_base: next_base <= self._local_log_start_offset,
                high_watermark,
                now,
            )
            config = self.config
            if not config.delete_enabled:
                return deleted
            retention_ms, retention_bytes = config.retention_ms, config.retention_bytes
            if self.remote_log_enabled:
                retention_ms = config.local_log_retention_ms
                retention_bytes = config.local_log_retention_bytes
            if retention_ms >= 0:
                deadline = now - retention_ms
                deleted += self._delete_old_segments(
                    lambda segment, _: segment.largest_timestamp() < deadline,
                    high_watermark,
                    now,
                )
            if retention_bytes >= 0:
                excess = self.size_bytes - retention_bytes

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
        """Delete the oldest local segments while ``predicate(segment, next base offset)``
        holds and the next segment starts at or below the high watermark; in a tiered log
        also only while the segment is copied (below the local log start, retention and
        DeleteRecords already removed the records from the log)."""
        segments = self.segments
        count = 0
        for segment, following in zip(segments, segments[1:], strict=False):
            if following.base_offset > high_watermark or not predicate(
                segment, following.base_offset
            ):
                break
            if (
                self.remote_log_enabled
                and following.base_offset > self._log_start_offset
                and following.base_offset - 1 > self._highest_offset_in_remote_storage
            ):
                break  # not copied yet: it stays until it is
            count += 1
        if not count:
            return 0
        start = segments[count].base_offset
        if start > self._local_log_start_offset:
            self._local_log_start_offset = start
            if not self.remote_log_enabled:
                self._move_log_start(start)
        self.local_log.remove_oldest_segments(count, self._now() if now_ms is None else now_ms)
        return count

    def purge_deleted(self, now_ms: int | None = None) -> None:
        """Remove ``.deleted`` segment files whose delay has passed."""
        if self._loader is None:
            self.local_log.purge_deleted(now_ms)

    # -- compaction ----------------------------------------------------------------
    def replace_segments(
        self, old: Sequence[Segment], cleaned: Segment, *, truncations: int
    ) -> None:
        """The cleaner's swap (see ``LocalLog.replace_segments``)."""
        self.local_log.replace_segments(old, cleaned, truncations=truncations)

    # -- durability ----------------------------------------------------------------
    def flush(self, up_to: int | None = None) -> None:
        """fsync segments holding offsets in [recovery point, up_to) and advance it,
        writing the epoch checkpoint first if it changed. Safe from a worker thread."""
        self.local_log.flush(up_to, checkpoint=self._write_epoch_cache)

    def _write_epoch_cache(self) -> None:
        if self.epoch_cache.dirty or not self.epoch_cache.durable:
            self.epoch_cache.write()

    def maybe_flush(self, now_ms: int | None = None) -> None:
        """Timer hook: flush.ms elapsed, or segments rolled since the last flush (Kafka
        flushes a rolled segment in the background). A lazy log not opened yet wrote
        nothing."""
        if self._loader is not None:
            return
        local = self.local_log
        now = self._now() if now_ms is None else now_ms
        if local.roll_flush_to > local.recovery_point:
            self.flush(local.roll_flush_to)
        # The time test first: it is false for every log under Kafka's default flush.ms,
        # and this runs for each log every log.flush.scheduler.interval.ms.
        if (
            now - local.last_flush_ms >= local.config.flush_ms
            and local.log_end_offset > local.recovery_point
        ):
            self.flush()

    def close(self, *, sync: bool = True) -> None:
        """Flush, trim indexes, write the epoch checkpoint and a producer snapshot: the
        next open needs no recovery. With ``sync=False`` nothing is fsynced; the caller
        makes everything durable at once (``sync_filesystems``) before it says so. A
        lazy log never opened is left as it is: after a clean shutdown it is as that
        shutdown left it; after a crash its recovery is still owed (``recovery_owed``),
        and recovering every such log here would make a stop right after a crash restart
        as long as opening them all."""
        if self._loader is not None:
            return
        local = self.local_log
        with local.lock:
            if local.closed:
                return
            self.active.seal()
            if sync:
                self.flush()
            else:
                local.recovery_point = self.log_end_offset
            small = len(self.segments) == 1 and self.active.size <= SMALL_LOG_BYTES
            if self.epoch_cache.dirty:
                self.epoch_cache.write(sync=sync)
            if self.producer_state.producers or not small:
                self._write_producer_snapshot(sync=sync)
            local.close()

    def delete(self) -> None:
        """Topic deletion: forget every file and remove the directory."""
        self.local_log.delete()

    # -- replication ---------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Remove everything from the batch holding ``offset`` on (follower truncation,
        recovery); the epoch cache and producer state follow. Below the local log start
        the log is emptied and restarts at ``offset``; a tiered log keeps its log start
        offset there (the remote tier still holds the records before it). At or past the
        end no record goes, but an epoch entry at the end does, as in Kafka: this replica
        led that epoch without appending to it, and a new leader's log diverges there (kept,
        the follower would fetch with that epoch and be told to truncate again, forever)."""
        if offset >= self.log_end_offset:
            with self.local_log.lock:
                self._truncate_epoch_cache()
            return
        if offset < self._local_log_start_offset:
            self.truncate_fully_and_start_at(
                offset, log_start_offset=self._log_start_offset if self.remote_log_enabled else None
            )
            return
        with self.local_log.lock:
            self.local_log.truncate_to(offset, self._now())
            self._truncate_epoch_cache()
        self.producer_state, self._snapshot_offset = rebuild_producer_state(self.local_log, {})

    def truncate_fully_and_start_at(
        self, offset: int, *, log_start_offset: int | None = None
    ) -> None:
        """Delete every segment and restart empty at ``offset``, which becomes the log
        start offset (a follower too far behind the leader's log start), or only the local
        one when ``log_start_offset`` is lower (a tiered follower restarting after the
        remote tier, which holds the rest)."""
        with self.local_log.lock:
            self.local_log.truncate_fully_and_start_at(offset, self._now())
            self._local_log_start_offset = offset
            self._log_start_offset = min(
                offset, log_start_offset if log_start_offset is not None else offset
            )
            self.epoch_cache.clear()
            self._truncate_epoch_cache()
            for _, path in list_snapshots(self.dir):
                path.unlink(missing_ok=True)
            self.producer_state = ProducerStateManager()
            self._snapshot_offset = -1

    def _truncate_epoch_cache(self) -> None:
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        if self.epoch_cache.dirty:
            self.epoch_cache.write()  # at once: stale entries past the end would mislead

    def _now(self) -> int:
        return now_ms(self.clock)


def _markers(records: bytearray | memoryview, infos: list[BatchInfo]) -> dict[int, EndTxnMarker]:
    """The transaction markers among ``infos`` by index (no work for data batches)."""
    markers = {}
    for i, info in enumerate(infos):
        if info.is_control and info.producer_id >= 0:
            marker = read_marker(memoryview(records)[info.position : info.end_position])
            if marker is not None:
                markers[i] = marker
    return markers
