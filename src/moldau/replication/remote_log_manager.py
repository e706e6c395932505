"""Kafka's RemoteLogManager: copies a leader's closed segments to the remote tier, expires
remote segments past total retention, and serves reads below the local log start.

Decisions are the pure ``CopyScheduler`` / ``remote_segments_to_delete``; this object only
moves bytes. All remote IO (the remote storage manager's blocking calls) runs on thread
pools: copiers and expirers (``remote.log.manager.copier.thread.pool.size`` and
``remote.log.manager.expiration.thread.pool.size``, by default
``remote.log.manager.thread.pool.size``) and ``remote.log.reader.threads`` for reads, so
the event loop never waits on the object store.
Remote log metadata events go through the metadata manager (``__remote_log_metadata``);
COPY_SEGMENT_FINISHED is published only once every object of the segment is in the store,
and local retention deletes a segment only after that (``UnifiedLog``).

A partition uploads up to ``remote.log.manager.copier.thread.pool.size`` segments at once
(that pool bounds the broker's uploads) and finishes them in offset order, so local
retention keeps up with a fast producer; a failure (store down or slow) leaves the segment
local, marks what it may have uploaded for deletion (by the expiry pass) and retries the
copy with backoff; a new leader continues from the highest offset its epoch lineage has in
the remote tier.

Garbage of copies cut short: a copy that fails, or is abandoned because one before it
failed, is marked DELETE_SEGMENT_STARTED; a copy this broker left COPY_SEGMENT_STARTED
(the mark failed too, or the broker died) is "dangling" once no upload of it runs here.
The expiry pass deletes both. An object store may still apply a write the client gave up
on (a PUT timed out on the client while the server waits, e.g. a restarted store
allocating its volumes), which it does when it gets going again; a delete before that
would leave the late object behind, known to no one. So, with
``remote.log.manager.task.retry.backoff.max.ms`` as the margin (the window): a segment
is deleted once the window has passed since its last event and since the store last
failed a call here, and its deletion is DELETE_SEGMENT_FINISHED only if the delete was
sent a window after the store was seen up again (a call succeeded after failures);
otherwise it stays DELETE_SEGMENT_STARTED and is deleted again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from moldau.clock import Clock
from moldau.config.broker import BrokerConfig, ConfigError
from moldau.protocol.errors import ErrorCode, KafkaError, OffsetOutOfRangeError
from moldau.replication.tier_state_machine import build_remote_log_aux_state
from moldau.stats.counters import RemoteStorageStats
from moldau.storage.producer_state import SNAPSHOT_SUFFIX
from moldau.storage.remote.copy_scheduler import (
    CopyCandidate,
    CopyScheduler,
    LocalSegment,
    copy_lag,
    highest_remote_offset,
    remote_segments_to_delete,
)
from moldau.storage.remote.metadata_cache import RemoteLogMetadataCache
from moldau.storage.remote.remote_log_reader import (
    RemoteIndexCache,
    RemoteLogReadResult,
    collect_remote_aborted,
    read_remote,
    remote_offset_for_timestamp,
    segment_for,
)
from moldau.storage.remote.segment import (
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from moldau.storage.remote.storage_manager import RemoteStorageError, RemoteStorageManager
from moldau.storage.segment import file_stem
from moldau.storage.txn_index import AbortedTxn
from moldau.storage.unified_log import UnifiedLog

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_T = TypeVar("_T")
_PRESUMED_UP = -(2**62)  # the store's "up since" before any call of it failed


class RemoteLogMetadataManager(Protocol):
    """What this module needs of tiered-remote's metadata manager (TIERED-INTERFACE.md):
    durable publication of events and the caches it keeps per user partition, which it
    keeps for the partitions this manager assigns (Kafka's onPartitionLeadershipChanges /
    onStopPartitions); reads raise RemoteStorageError until a partition's are loaded."""

    async def add_remote_log_segment_metadata(self, md: RemoteLogSegmentMetadata) -> None: ...

    async def update_remote_log_segment_metadata(
        self, update: RemoteLogSegmentMetadataUpdate
    ) -> None: ...

    async def put_remote_partition_delete_metadata(
        self, md: RemotePartitionDeleteMetadata
    ) -> None: ...

    def segments(self, tp: TopicIdPartition) -> list[RemoteLogSegmentMetadata]:
        """COPY_SEGMENT_FINISHED segments by start offset."""
        ...

    def all_segments(self, tp: TopicIdPartition) -> list[RemoteLogSegmentMetadata]: ...

    def highest_offset_for_epoch(self, tp: TopicIdPartition, epoch: int) -> int | None: ...

    def on_partition_assigned(self, tp: TopicIdPartition) -> None: ...

    def on_partition_unassigned(self, tp: TopicIdPartition) -> None: ...

    def is_ready(self, tp: TopicIdPartition) -> bool: ...

    def cache(self, tp: TopicIdPartition) -> RemoteLogMetadataCache: ...


@dataclass(frozen=True, slots=True)
class RemoteLogManagerConfig:
    task_interval_ms: int = 30_000
    thread_pool_size: int = 10
    reader_threads: int = 10
    index_cache_bytes: int = 1 << 30
    retry_backoff_ms: int = 500
    retry_backoff_max_ms: int = 30_000
    copier_thread_pool_size: int = -1  # -1: thread_pool_size (Kafka 3.9)
    expiration_thread_pool_size: int = -1  # -1: thread_pool_size

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> RemoteLogManagerConfig:
        return cls(*(config.int(key) for key in _REMOTE_LOG_MANAGER_KEYS))

    def __post_init__(self) -> None:
        for key, size in zip(
            _REMOTE_LOG_MANAGER_KEYS[-2:],
            (self.copier_thread_pool_size, self.expiration_thread_pool_size),
            strict=True,
        ):
            if size != -1 and size < 1:
                raise ConfigError(f"{key} must be -1 or at least 1, not {size}")

    @property
    def copier_threads(self) -> int:
        """Uploads at once on this broker, and at most per partition."""
        size = self.copier_thread_pool_size
        return self.thread_pool_size if size == -1 else size

    @property
    def expiration_threads(self) -> int:
        size = self.expiration_thread_pool_size
        return self.thread_pool_size if size == -1 else size


_REMOTE_LOG_MANAGER_KEYS = (  # RemoteLogManagerConfig's fields, in order
    "remote.log.manager.task.interval.ms",
    "remote.log.manager.thread.pool.size",
    "remote.log.reader.threads",
    "remote.log.index.file.cache.total.size.bytes",
    "remote.log.manager.task.retry.backoff.ms",
    "remote.log.manager.task.retry.backoff.max.ms",
    "remote.log.manager.copier.thread.pool.size",
    "remote.log.manager.expiration.thread.pool.size",
)


@dataclass(frozen=True, slots=True)
class PartitionTierSizes:
    """One partition's remote tier as ``topics describe`` and the metrics show it."""

    remote_log_size_bytes: int
    remote_segments: int
    copy_lag_bytes: int
    copy_lag_segments: int


@dataclass(slots=True)
class _Replica:
    tp: TopicIdPartition
    log: UnifiedLog
    leader_epoch: int  # -1: a follower
    high_watermark: Callable[[], int]
    scheduler: CopyScheduler | None = None
    expiring: bool = False  # an expiry pass is running
    # id of each copy in flight -> done when that copy has finished or failed: a copy
    # finishes after the one before it in the scheduler's in-flight list (not after the
    # copy started last, which may be an abandoned one of an earlier round)
    copy_done: dict[int, asyncio.Future[None]] = field(default_factory=dict)
    deleted: bool = False  # its topic was deleted: a copy in flight deletes its upload


class RemoteLogManager:
    def __init__(
        self,
        broker_id: int,
        config: RemoteLogManagerConfig,
        rsm: RemoteStorageManager,
        metadata: RemoteLogMetadataManager,
        clock: Clock,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.rsm = rsm
        self.metadata = metadata
        self.clock = clock
        self.index_cache = RemoteIndexCache(rsm, config.index_cache_bytes)
        self.stats = RemoteStorageStats()
        self._copiers = ThreadPoolExecutor(config.copier_threads, "remote-log-copier")
        self._expirers = ThreadPoolExecutor(config.expiration_threads, "remote-log-expirer")
        self._readers = ThreadPoolExecutor(config.reader_threads, "remote-log-reader")
        self._replicas: dict[TopicPartition, _Replica] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._removing: set[TopicIdPartition] = set()  # remote logs being deleted here
        self._copying: set[RemoteLogSegmentId] = set()  # uploads under way here
        # When a copy or delete last failed here, and since when they succeed again
        # (None: the last one failed); the store is presumed up until a call fails.
        self._store_failed_ms = -1
        self._store_up_since_ms: int | None = _PRESUMED_UP

    # -- leadership ----------------------------------------------------------------
    def on_leader(
        self,
        tp: TopicIdPartition,
        replica_log: UnifiedLog,
        leader_epoch: int,
        high_watermark: Callable[[], int],
    ) -> None:
        """This broker leads ``tp`` (a tiered partition) from now on: copies start at the
        next pass, from where the remote tier's lineage ends. Told again in the same
        epoch (any change of the partition, e.g. its ISR), it keeps its copy state: a
        fresh one would start the copies in flight over."""
        current = self._replicas.get((tp.topic, tp.partition))
        if (
            current is not None
            and current.tp == tp
            and current.log is replica_log
            and current.leader_epoch == leader_epoch
        ):
            return
        self._replicas[(tp.topic, tp.partition)] = _Replica(
            tp, replica_log, leader_epoch, high_watermark
        )
        self.metadata.on_partition_assigned(tp)

    def on_follower(self, tp: TopicIdPartition, replica_log: UnifiedLog) -> None:
        """A follower copies nothing but follows the remote tier's progress, so its local
        retention may delete what the leader copied."""
        self._replicas[(tp.topic, tp.partition)] = _Replica(tp, replica_log, -1, lambda: -1)
        self.metadata.on_partition_assigned(tp)

    async def rebuild_follower(self, tp: TopicPartition, leader_local_start: int) -> int:
        """KIP-405's follower path: restart this follower's log right after the remote
        tier, with the epochs and producer state read from there (tier_state_machine), if
        the remote tier known here reaches ``leader_local_start``; the offset to fetch
        from next. RemoteStorageError (the store, or the metadata still loading or behind
        the leader's) or KafkaError (not a tiered follower here): retry later."""
        replica = self._replicas.get(tp)
        if replica is None or replica.leader_epoch >= 0:
            raise KafkaError(
                f"{tp[0]}-{tp[1]} is not a tiered follower here", ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
        loop = asyncio.get_running_loop()
        return await build_remote_log_aux_state(
            replica.log,
            self.metadata.segments(replica.tp),
            leader_local_start,
            self.rsm,
            lambda fn, *args: loop.run_in_executor(self._readers, fn, *args),
        )

    def stop_partition(self, tp: TopicPartition, *, delete_remote: bool = False) -> None:
        """Not a replica here any more (a copy in flight deletes what it uploaded). With
        ``delete_remote`` (topic deletion, on the partition's last leader) the partition
        is marked deleted in ``__remote_log_metadata`` (DELETE_PARTITION_MARKED); the
        RemotePartitionRemover of its metadata partition deletes its remote segments."""
        replica = self._replicas.pop(tp, None)
        if replica is None:
            return
        if delete_remote:
            replica.deleted = True
            self._background(
                self._retrying(
                    replica.tp,
                    "marking the remote log deleted",
                    # Needs none of the partition's metadata: nothing waits for loading.
                    lambda: self._put_delete_state(
                        replica.tp, RemotePartitionDeleteState.DELETE_PARTITION_MARKED
                    ),
                )
            )
        if replica.tp not in self._removing:
            self.metadata.on_partition_unassigned(replica.tp)

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _put_delete_state(
        self, tp: TopicIdPartition, state: RemotePartitionDeleteState
    ) -> bool:
        await self.metadata.put_remote_partition_delete_metadata(
            RemotePartitionDeleteMetadata(tp, state, self.clock.now_ms(), self.broker_id)
        )
        return True

    async def _retrying(
        self,
        tp: TopicIdPartition,
        what: str,
        attempt: Callable[[], Awaitable[bool]],
    ) -> None:
        """Call ``attempt()`` until it returns True, with backoff after failures (the
        store or ``__remote_log_metadata`` down), for as long as the broker runs."""
        backoff = self.config.retry_backoff_ms
        while True:
            try:
                if await attempt():
                    return
            except (RemoteStorageError, KafkaError, ValueError) as e:
                log.warning("%s: %s failed, will retry: %s", tp, what, e)
            else:
                backoff = self.config.retry_backoff_ms  # not failing: only waiting
            await asyncio.sleep(backoff / 1000)
            backoff = min(backoff * 2, self.config.retry_backoff_max_ms)

    # -- partition deletion ------------------------------------------------------------
    def remove_partition(self, tp: TopicIdPartition) -> bool:
        """Delete the remote log of ``tp``, a partition of a deleted topic, and record it
        with Kafka's partition delete states (STARTED, each segment's deletion, FINISHED)
        in the background, from whatever state ``__remote_log_metadata`` holds: an
        interrupted deletion resumes where it stopped. Waits while the partition's
        metadata loads (deferred, not lost); retried while the store is down. False if
        it is already under way here."""
        if tp in self._removing:
            return False
        self._removing.add(tp)
        self.metadata.on_partition_assigned(tp)
        self._background(self._remove(tp))
        return True

    async def _remove(self, tp: TopicIdPartition) -> None:
        try:
            await self._retrying(tp, "deleting the remote log", lambda: self._remove_once(tp))
        finally:
            self._removing.discard(tp)
            if (tp.topic, tp.partition) not in self._replicas:
                self.metadata.on_partition_unassigned(tp)

    async def _remove_once(self, tp: TopicIdPartition) -> bool:
        if not self.metadata.is_ready(tp):
            return False  # its metadata is loading: look again after the backoff
        cache = self.metadata.cache(tp)
        done = cache.partition_delete.state if cache.partition_delete else None
        for state in RemotePartitionDeleteState:
            if done is not None and done >= state:
                continue  # resuming: the states only go forward
            if state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
                for md in cache.all_segments():
                    if not await self._delete_segment(md):
                        raise RemoteStorageError(f"{md.segment_id} is not deleted yet")
                log.info("%s: the remote log is deleted", tp)
            await self._put_delete_state(tp, state)
        return True

    # -- the periodic pass -----------------------------------------------------------
    def run_once(self) -> None:
        """Start the copies and expiry passes that are due (called on the event loop)."""
        for replica in list(self._replicas.values()):
            self._step(replica, expire=True)

    def _step(self, replica: _Replica, *, expire: bool) -> None:
        if not self.metadata.is_ready(replica.tp):
            return  # its remote log metadata is still loading
        if self._replicas.get((replica.tp.topic, replica.tp.partition)) is not replica:
            return  # stopped or replaced meanwhile
        self._follow_remote_tier(replica)
        if replica.leader_epoch < 0:
            return
        now = self.clock.now_ms()
        while (candidate := self._next_copy(replica, now)) is not None:
            in_flight = replica.scheduler.in_flight if replica.scheduler else []
            before = in_flight[-2] if len(in_flight) > 1 else None
            previous = None if before is None else replica.copy_done.get(id(before))
            done = replica.copy_done[id(candidate)] = asyncio.get_running_loop().create_future()
            self._background(self._copy(replica, candidate, previous, done))
        if expire and not replica.expiring and replica.log.config.delete_enabled:
            replica.expiring = True
            self._background(self._expire(replica))

    def _follow_remote_tier(self, replica: _Replica) -> None:
        replica_log, tp = replica.log, replica.tp
        highest = highest_remote_offset(
            replica_log.epoch_cache.entries,
            replica_log.log_end_offset,
            lambda epoch: self.metadata.highest_offset_for_epoch(tp, epoch),
        )
        replica_log.update_highest_offset_in_remote_storage(highest)
        segments = self.metadata.segments(tp)
        if segments:
            replica_log.update_log_start_offset_from_remote_tier(segments[0].start_offset)

    def _next_copy(self, replica: _Replica, now: int) -> CopyCandidate | None:
        replica_log = replica.log
        if replica_log.config.remote_log_copy_disable:
            return None
        if replica.scheduler is None:
            replica.scheduler = CopyScheduler(
                replica_log.highest_offset_in_remote_storage,
                now,
                interval_ms=self.config.task_interval_ms,
                backoff_ms=self.config.retry_backoff_ms,
                backoff_max_ms=self.config.retry_backoff_max_ms,
                max_in_flight=self.config.copier_threads,
            )
        lso = replica_log.last_stable_offset(replica.high_watermark())
        return replica.scheduler.next_copy(
            now, _local_segments(replica_log), lso, replica_log.local_log_start_offset
        )

    # -- copy ------------------------------------------------------------------------
    async def _copy(
        self,
        replica: _Replica,
        candidate: CopyCandidate,
        previous: asyncio.Future[None] | None,
        done: asyncio.Future[None],
    ) -> None:
        """Upload ``candidate`` (other uploads may run meanwhile), then, once the copy
        before it is done, make it COPY_SEGMENT_FINISHED: the remote tier grows in offset
        order. A copy abandoned because one before it failed deletes its upload."""
        scheduler = replica.scheduler
        assert scheduler is not None
        replica_log, tp = replica.log, replica.tp
        started: RemoteLogSegmentMetadata | None = None
        copying: RemoteLogSegmentId | None = None
        try:
            md, data = self._prepare_copy(replica, candidate)
            copying = md.segment_id
            self._copying.add(copying)  # before it is visible: never taken for dangling
            await self.metadata.add_remote_log_segment_metadata(md)
            started = md
            custom = await self._store_call(self._copiers, self.rsm.copy_log_segment_data, md, data)
            if previous is not None:
                await previous
            if replica.deleted:  # the remover may have listed the segments before this one
                await self._store_call(self._copiers, self.rsm.delete_log_segment_data, md)
                return
            if not scheduler.holds(candidate):
                # Abandoned (a copy before it failed): deleted once settled, like a failed
                # one, as a write of it the client gave up on may still land.
                await self._abandon(md)
                return
            await self.metadata.update_remote_log_segment_metadata(
                RemoteLogSegmentMetadataUpdate(
                    md.segment_id,
                    self.clock.now_ms(),
                    RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                    self.broker_id,
                    custom,
                )
            )
        except (RemoteStorageError, OSError, KafkaError, ValueError) as e:
            self.stats.failed_copy_requests += 1
            if scheduler.holds(candidate):
                scheduler.failed(candidate, self.clock.now_ms())
            log.warning(
                "%s: copying the segment at %d to the remote tier failed (retry %d): %s",
                tp,
                candidate.base_offset,
                scheduler.failures,
                e,
            )
            if started is not None:
                await self._abandon(started)  # the store may hold part of it
            return
        else:
            self.stats.copy_requests += 1
            self.stats.copy_bytes += candidate.size
            scheduler.copied(candidate)
            replica_log.update_highest_offset_in_remote_storage(candidate.end_offset)
            log.info(
                "%s: copied offsets %d-%d to the remote tier",
                tp,
                candidate.base_offset,
                candidate.end_offset,
            )
        finally:
            self._copying.discard(copying)
            replica.copy_done.pop(id(candidate), None)
            done.set_result(None)
        self._step(replica, expire=False)  # the next one may start

    async def _abandon(self, md: RemoteLogSegmentMetadata) -> None:
        """A copy that will not finish: DELETE_SEGMENT_STARTED now (never read), its
        objects deleted by an expiry pass once settled. If the mark fails as well, the
        segment stays COPY_SEGMENT_STARTED, which the expiry pass takes as dangling."""
        try:
            await self._segment_state(md, RemoteLogSegmentState.DELETE_SEGMENT_STARTED)
        except (RemoteStorageError, KafkaError, ValueError) as e:
            log.warning("%s: marking the copy cut short for deletion failed: %s", md.segment_id, e)

    async def _store_call(self, pool: ThreadPoolExecutor, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)``, a call of the store, on ``pool``; whether the store fails or is
        up again is kept (``_settled``, ``_delete_segment``)."""
        try:
            result = await asyncio.get_running_loop().run_in_executor(pool, fn, *args)
        except RemoteStorageError:
            self._store_failed_ms, self._store_up_since_ms = self.clock.now_ms(), None
            raise
        if self._store_up_since_ms is None:
            self._store_up_since_ms = self.clock.now_ms()
        return result

    def _prepare_copy(
        self, replica: _Replica, candidate: CopyCandidate
    ) -> tuple[RemoteLogSegmentMetadata, LogSegmentData]:
        replica_log = replica.log
        segment = next(
            (s for s in replica_log.segments if s.base_offset == candidate.base_offset), None
        )
        if segment is None:
            raise OffsetOutOfRangeError(f"segment {candidate.base_offset} is gone")
        entries = [(e, o) for e, o in replica_log.epoch_cache.entries if o <= candidate.end_offset]
        first = replica_log.epoch_cache.epoch_for_offset(candidate.base_offset)
        epochs = {e: o for e, o in entries if o > candidate.base_offset}
        epochs[first if first is not None else replica.leader_epoch] = candidate.base_offset
        md = RemoteLogSegmentMetadata(
            RemoteLogSegmentId.generate(replica.tp),
            candidate.base_offset,
            candidate.end_offset,
            candidate.max_timestamp,
            self.broker_id,
            self.clock.now_ms(),
            candidate.size,
            epochs,
        )
        snapshot = replica_log.dir / (file_stem(candidate.end_offset + 1) + SNAPSHOT_SUFFIX)
        checkpoint = "\n".join(["0", str(len(entries)), *(f"{e} {o}" for e, o in entries)])
        data = LogSegmentData(
            segment.path,
            segment.offset_index.path,
            segment.time_index.path,
            segment.txn_index.path if segment.txn_index.path.exists() else None,
            snapshot if snapshot.exists() else None,
            (checkpoint + "\n").encode(),
        )
        return md, data

    # -- expiry ----------------------------------------------------------------------
    async def _expire(self, replica: _Replica) -> None:
        """Total retention, DeleteRecords and lineage over the remote tier; then the log
        start offset follows the first remaining remote segment."""
        try:
            await self._expire_once(replica)
        finally:
            replica.expiring = False

    async def _expire_once(self, replica: _Replica) -> None:
        replica_log, tp = replica.log, replica.tp
        cache = self.metadata.cache(tp)
        for listed in cache.all_segments():
            # deletions that failed earlier and copies cut short (Kafka's dangling
            # segments): done before retention is looked at. Each looked at as it is now
            # (a copy may have finished while one before it was deleted); after a failure
            # none is settled for a window.
            md = cache.segment(listed.segment_id)
            if md is not None and self._dangling(md) and self._settled(md):
                await self._delete_segment(md)
        segments = self.metadata.segments(tp)
        if not segments:
            return
        config = replica_log.config
        highest = replica_log.highest_offset_in_remote_storage
        doomed = remote_segments_to_delete(
            segments,
            now_ms=self.clock.now_ms(),
            log_start_offset=replica_log.log_start_offset,
            retention_ms=config.retention_ms,
            retention_bytes=config.retention_bytes,
            local_only_bytes=sum(s.size for s in replica_log.segments if s.base_offset > highest),
            epochs=replica_log.epoch_cache.entries,
        )
        for md in doomed:
            if not await self._delete_segment(md):
                return
        remaining = self.metadata.segments(tp)
        start = remaining[0].start_offset if remaining else replica_log.local_log_start_offset
        replica_log.update_log_start_offset_from_remote_tier(start)

    def _dangling(self, md: RemoteLogSegmentMetadata) -> bool:
        """Being deleted, or a copy cut short: COPY_SEGMENT_STARTED by this broker with
        no upload of it under way (its copy failed and so did the mark, or this broker
        died meanwhile). Another broker's copy is never taken for one: a deposed leader
        may still finish it."""
        if md.state is RemoteLogSegmentState.DELETE_SEGMENT_STARTED:
            return True
        return (
            md.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED
            and md.broker_id == self.broker_id
            and md.segment_id not in self._copying
        )

    def _settled(self, md: RemoteLogSegmentMetadata) -> bool:
        """The window has passed since the segment's last event (a write of it the
        client gave up on lands meanwhile) and since the store last failed here (the
        backoff of deletions while it is down)."""
        since = max(md.event_timestamp_ms, self._store_failed_ms)
        return self.clock.now_ms() - since >= self.config.retry_backoff_max_ms

    async def _delete_segment(self, md: RemoteLogSegmentMetadata) -> bool:
        """DELETE_SEGMENT_STARTED, delete the objects, DELETE_SEGMENT_FINISHED (a retry
        repeats the same steps: the transitions allow it and deletion is idempotent).
        False if not finished: the store failed, or it was not up for a window when the
        delete was sent, so writes it was sent before may still land (deleted again)."""
        try:
            await self._segment_state(md, RemoteLogSegmentState.DELETE_SEGMENT_STARTED)
            sent = self.clock.now_ms()
            await self._store_call(self._expirers, self.rsm.delete_log_segment_data, md)
            up_since = self._store_up_since_ms
            if up_since is None or sent - up_since < self.config.retry_backoff_max_ms:
                return False
            await self._segment_state(md, RemoteLogSegmentState.DELETE_SEGMENT_FINISHED)
        except (RemoteStorageError, KafkaError) as e:
            self.stats.failed_delete_requests += 1
            log.warning("%s: deleting remote segment failed: %s", md.segment_id, e)
            return False
        self.stats.delete_requests += 1
        self.index_cache.remove(md.segment_id)
        return True

    async def _segment_state(
        self, md: RemoteLogSegmentMetadata, state: RemoteLogSegmentState
    ) -> None:
        await self.metadata.update_remote_log_segment_metadata(
            RemoteLogSegmentMetadataUpdate(
                md.segment_id, self.clock.now_ms(), state, self.broker_id
            )
        )

    # -- read ------------------------------------------------------------------------
    async def read(
        self,
        tp: TopicIdPartition,
        replica_log: UnifiedLog,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int,
        min_one_batch: bool,
        committed: bool,
    ) -> tuple[RemoteLogReadResult, list[AbortedTxn] | None]:
        """Whole batches of the remote segment holding ``offset`` (and, for
        read_committed, the aborted transactions they overlap) on a reader thread.
        Raises OffsetOutOfRangeError if no copied segment holds it and RemoteStorageError
        if the store fails."""
        segments = self.metadata.segments(tp)
        md = segment_for(segments, offset)
        if md is None or offset < replica_log.log_start_offset:
            raise OffsetOutOfRangeError(f"offset {offset} of {tp} is in no remote segment")
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(
                self._readers,
                lambda: read_remote(
                    self.rsm,
                    self.index_cache,
                    md,
                    offset,
                    max_bytes,
                    max_offset=max_offset,
                    min_one_batch=min_one_batch,
                ),
            )
            aborted = None
            if committed:
                aborted, complete = await loop.run_in_executor(
                    self._readers,
                    collect_remote_aborted,
                    self.index_cache,
                    segments,
                    offset,
                    result.next_offset,
                )
                if not complete:
                    aborted += replica_log.collect_aborted_transactions(
                        replica_log.local_log_start_offset, result.next_offset
                    )
        except RemoteStorageError:
            self.stats.failed_fetch_requests += 1
            raise
        self.stats.fetch_requests += 1
        self.stats.fetch_bytes += result.size
        return result, aborted

    async def offset_for_timestamp(
        self, tp: TopicIdPartition, replica_log: UnifiedLog, timestamp: int
    ) -> tuple[int, int] | None:
        """ListOffsets by timestamp over the remote tier (None: not in it)."""
        segments = self.metadata.segments(tp)
        return await asyncio.get_running_loop().run_in_executor(
            self._readers,
            remote_offset_for_timestamp,
            self.rsm,
            self.index_cache,
            segments,
            timestamp,
            replica_log.log_start_offset,
        )

    # -- operations ------------------------------------------------------------------
    def tier_sizes(self, tp: TopicPartition) -> PartitionTierSizes | None:
        replica = self._replicas.get(tp)
        if replica is None or not self.metadata.is_ready(replica.tp):
            return None
        segments = self.metadata.segments(replica.tp)
        replica_log = replica.log
        lag = (0, 0)
        if replica.leader_epoch >= 0:
            lso = replica_log.last_stable_offset(replica.high_watermark())
            lag = copy_lag(
                _local_segments(replica_log), replica_log.highest_offset_in_remote_storage, lso
            )
        return PartitionTierSizes(sum(s.segment_size_bytes for s in segments), len(segments), *lag)

    def leader_tier_sizes(self) -> list[tuple[TopicPartition, PartitionTierSizes]]:
        """The tier sizes of the partitions led here (the metrics' view)."""
        out = []
        for tp, replica in list(self._replicas.items()):
            if replica.leader_epoch >= 0 and (sizes := self.tier_sizes(tp)) is not None:
                out.append((tp, sizes))
        return out

    async def close(self) -> None:
        """Wait for copies in flight, then stop (tests; the broker calls ``shutdown``)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for pool in (self._copiers, self._expirers, self._readers):
            pool.shutdown(wait=True, cancel_futures=True)
        await asyncio.to_thread(self.rsm.close)

    def shutdown(self) -> None:
        """The broker stops: no new work. A copy cut short stays COPY_SEGMENT_STARTED
        (never read; dangling, deleted by this broker's expiry pass after its restart) and
        its segment stays local: the next leader copies it again."""
        self._replicas.clear()
        for task in self._tasks:
            task.cancel()
        for pool in (self._copiers, self._expirers, self._readers):
            pool.shutdown(wait=False, cancel_futures=True)


def _local_segments(replica_log: UnifiedLog) -> list[LocalSegment]:
    return [LocalSegment(s.base_offset, s.size, s.max_timestamp) for s in replica_log.segments]
