"""The replica manager: the one API through which this node appends to and reads from logs.

Handlers, the group coordinator and the transaction coordinator's markers all go through
it, as in Kafka's ``ReplicaManager``. It owns the :class:`Partition` state of every
replica hosted here, creates and drops logs as the metadata publisher says, and is the
only caller of ``Partition.maybe_increment_high_watermark``/``update_follower_fetch``,
waking what waits on the partition:

- ``("hw", tp)``: the high watermark moved (consumer fetches, acks=all produce,
  coordinator writes waiting to be committed);
- ``("leo", tp)``: the leader appended (follower fetches).

Whole batches only: records are validated by header and CRC once, appended as one buffer,
and read back as file ranges for sendfile. read_committed reads stop at the last stable
offset and come with the aborted transactions they overlap (``replication/
txn_verification.py`` guards the start of transactions, KIP-890).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from moldau.clock import Scheduler, TimerHandle
from moldau.config.broker import RACK_AWARE_SELECTOR, BrokerConfig
from moldau.config.topic import LogConfig
from moldau.metadata.image import MetadataImage, PartitionImage
from moldau.metadata.publisher import LocalChanges
from moldau.metadata.topics import is_internal
from moldau.protocol.errors import ErrorCode, KafkaError, OffsetMovedToTieredStorageError
from moldau.records.batch import scan_batches
from moldau.records.compression import Compression
from moldau.replication.partition import IsrProposal, Partition, Role
from moldau.replication.purgatory import Purgatory
from moldau.replication.quota import LEADER, ReplicationQuota
from moldau.replication.remote_log_manager import RemoteLogManager
from moldau.replication.replica_selector import preferred_read_replica
from moldau.replication.txn_verification import Guard, TransactionVerifier
from moldau.stats.counters import IsrStats, TopicStats
from moldau.stats.timing import parked
from moldau.storage.local_log import LogReadResult
from moldau.storage.log_manager import LogManager
from moldau.storage.producer_state import ProducerEntry
from moldau.storage.remote.metadata_manager import RemoteLogMetadataNotReadyError
from moldau.storage.remote.remote_log_reader import RemoteLogReadResult
from moldau.storage.remote.segment import TopicIdPartition
from moldau.storage.remote.storage_manager import RemoteStorageError
from moldau.storage.txn_index import AbortedTxn
from moldau.storage.unified_log import UnifiedLog

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
ProposeIsrChange = Callable[[TopicPartition, IsrProposal], None]
# A change bringing more new replicas than this opens them a slice at a time: opening a log
# costs a few file-system calls, so one CreatePartitions of 10,000 would otherwise hold
# every request for many seconds.
HOST_BATCH = 200
# Produced batches from this size on are recompressed to their topic's compression.type in
# a worker thread: megabytes to decompress and compress again would stall the event loop.
RECOMPRESS_INLINE_MAX = 64 << 10
HOST_SLICE_S = 0.02  # real time (not the injectable clock): it bounds the event loop's stall
Writable = bytearray | memoryview  # batches are stamped in place: the frame's own buffer

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4  # KIP-405 (ListOffsets v8): the local log start offset
LATEST_TIERED_TIMESTAMP = -5  # KIP-1005 (ListOffsets v9): the highest copied offset
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


class AppendOrigin(Enum):
    CLIENT = "client"  # a producer: internal topics are refused
    COORDINATOR = "coordinator"  # the group/transaction coordinator's own records
    TXN_MARKER = "txn_marker"  # COMMIT/ABORT markers the transaction coordinator sends


@dataclass(frozen=True, slots=True)
class ReplicationConfig:
    replica_lag_time_max_ms: int = 30_000
    quota_window_num: int = 11  # replication.quota.window.num
    quota_window_ms: int = 1_000  # replication.quota.window.size.seconds
    rack_aware: bool = False  # replica.selector.class: KIP-392 fetch from the closest replica

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ReplicationConfig:
        return cls(
            replica_lag_time_max_ms=config.int("replica.lag.time.max.ms"),
            quota_window_num=config.int("replication.quota.window.num"),
            quota_window_ms=1000 * config.int("replication.quota.window.size.seconds"),
            rack_aware=config.get("replica.selector.class") == RACK_AWARE_SELECTOR,
        )


@dataclass(slots=True)
class AppendResult:
    """One partition's answer to an append (error NONE, or why it failed)."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    base_offset: int = -1
    last_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    record_errors: tuple[tuple[int, str], ...] = ()  # (batch-relative index, why)


# Fetch dataclasses are built per request: not frozen, whose __init__ costs twice as much.
@dataclass(slots=True)
class FetchParams:
    replica_id: int = -1  # a follower's broker id; -1 for consumers
    max_wait_ms: int = 0
    min_bytes: int = 1
    max_bytes: int = 0x7FFFFFFF
    isolation_level: int = READ_UNCOMMITTED
    # A consumer's rack from Fetch v11 on (KIP-392; "" if unset); None before v11, whose
    # consumers only read from leaders.
    rack_id: str | None = None

    @property
    def from_follower(self) -> bool:
        return self.replica_id >= 0


@dataclass(slots=True)
class FetchRequestPartition:
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1  # a follower's
    last_fetched_epoch: int = -1  # a follower's: the epoch of its last batch (KIP-320)


@dataclass(slots=True)
class FetchResult:
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: LogReadResult | RemoteLogReadResult | None = None
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset): truncate there
    aborted: list[AbortedTxn] | None = None  # read_committed: transactions to drop
    preferred_read_replica: int = -1  # KIP-392: fetch from this follower instead
    remote: RemoteFetch | None = None  # to read from the remote tier before answering

    @property
    def size(self) -> int:
        return self.records.size if self.records is not None else 0


@dataclass(frozen=True, slots=True)
class RemoteFetch:
    """A consumer's read below the local log start (Kafka's RemoteStorageFetchInfo)."""

    tp: TopicIdPartition
    log: UnifiedLog
    offset: int
    max_bytes: int
    max_offset: int
    min_one_batch: bool
    committed: bool


@dataclass(slots=True)
class FollowerPosition:
    leader: int
    leader_epoch: int
    fetch_offset: int  # the follower's log end offset
    last_fetched_epoch: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class OffsetLookup:
    error: ErrorCode = ErrorCode.NONE
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1


class ReplicaManager:
    def __init__(
        self,
        node_id: int,
        log_manager: LogManager,
        scheduler: Scheduler,
        config_for: Callable[[str], LogConfig],
        config: ReplicationConfig | None = None,
        *,
        propose_isr_change: ProposeIsrChange | None = None,
        transaction_verifier: TransactionVerifier | None = None,
    ) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.scheduler = scheduler
        self.clock = scheduler.clock
        self.config = config or ReplicationConfig()
        self._config_for = config_for
        self.purgatory = Purgatory(scheduler)
        # KIP-73: bytes sent to followers of throttled replicas (a metadata listener)
        self.leader_quota = ReplicationQuota(
            LEADER, node_id, self.config.quota_window_num, self.config.quota_window_ms
        )
        self._partitions: dict[TopicPartition, Partition] = {}
        self._offline: set[TopicPartition] = set()  # logs that could not be opened
        # New replicas of a large change, opened a slice at a time or at their first
        # request (value: the part, whether this node leads it and the topic id).
        self._pending: dict[TopicPartition, tuple[PartitionImage, bool, bytes]] = {}
        self._hosting: TimerHandle | None = None
        # Where ISR changes go (the AlterPartition manager); a single broker has none.
        self.propose_isr_change = propose_isr_change or _no_isr_changes
        # KIP-890 checks with the transaction coordinator (None: not verified)
        self.transaction_verifier = transaction_verifier
        # Where each partition's HW was at the last checkpoint: a restarted replica starts
        # from it (capped by its log), never from its log end.
        self._checkpointed_hw = log_manager.read_replication_checkpoint()
        self.topic_stats = TopicStats()
        self.isr_stats = IsrStats()
        self._racks: dict[int, str] = {}  # live brokers' broker.rack, for KIP-392
        self._ineligible: frozenset[int] = frozenset()  # brokers fenced or shutting down
        # Tiered storage (None: remote.log.storage.system.enable is off); the latest
        # image gives the topic ids of the remote tier's TopicIdPartitions.
        self.remote_log_manager: RemoteLogManager | None = None
        self._image = MetadataImage()

    # -- metadata ------------------------------------------------------------------
    def on_metadata_update(
        self, old: MetadataImage, new: MetadataImage, changes: LocalChanges
    ) -> None:
        """Become leader/follower, drop deleted replicas, apply topic config changes.

        When a change brings more than HOST_BATCH new replicas, those of ordinary topics
        are opened a slice (HOST_SLICE_S) per turn of the event loop (as Kafka's brokers apply a large
        delta off the request threads); internal topics' replicas are opened at once, the
        coordinators load from them."""
        self._racks = {b.broker_id: b.rack for b in new.brokers.values() if b.rack and b.alive}
        self._image = new
        ineligible = frozenset(b.broker_id for b in new.brokers.values() if not b.alive)
        if ineligible != self._ineligible:
            self._ineligible = ineligible
            for tp in self._partitions:
                self._set_ineligible(tp)
        if old.offset < 0 <= new.offset:
            # The first image of the log is a caught-up one (the loader waits for the
            # quorum's high watermark); the broker opened its logs with it just before.
            self.log_manager.delete_stray_logs(
                {name: topic.topic_id for name, topic in new.topics.items()}
            )
        for tp, topic_id in changes.deletes.items():
            self._pending.pop(tp, None)
            self._stop_replica(tp, topic_id, delete_remote=self._deletes_remote(old, new, tp))
        if changes.deletes:
            self.topic_stats.retain(new.topics)
            # As Kafka rewrites a log dir's checkpoints on every delete: a partition created
            # again under the same name must not restart from the deleted one's log start
            # offset, recovery point or HW after a crash.
            self.log_manager.checkpoint()
            self.checkpoint_high_watermarks()
        becoming = [
            *((tp, part, True) for tp, part in changes.leaders.items()),
            *((tp, part, False) for tp, part in changes.followers.items()),
        ]
        opening = sum(tp not in self._partitions for tp, _, _ in becoming)
        for tp, part, leads in becoming:
            self._pending.pop(tp, None)
            topic_id = new.topics[tp[0]].topic_id
            if opening > HOST_BATCH and tp not in self._partitions and not is_internal(tp[0]):
                self._pending[tp] = (part, leads, topic_id)
            else:
                self._become(tp, part, leads, topic_id)
        if self._pending and self._hosting is None:
            log.info("opening %d new replicas, a slice at a time", len(self._pending))
            self._hosting = self.scheduler.call_at(self.clock.now_ms(), self._host_pending)
        for topic in changes.config_changed:
            self.log_manager.update_config(topic, self._config_for(topic))

    def _host_pending(self) -> None:
        self._hosting = None
        deadline = time.monotonic() + HOST_SLICE_S
        for _ in range(min(HOST_BATCH, len(self._pending))):
            if time.monotonic() > deadline:
                break
            tp = next(iter(self._pending))
            self._become(tp, *self._pending.pop(tp))
        if self._pending:
            self._hosting = self.scheduler.call_at(self.clock.now_ms(), self._host_pending)
        else:
            log.info("the new replicas are open")

    def _open_now(self, tp: TopicPartition) -> None:
        """A request for a replica still waiting its turn opens it at once (a few file-
        system calls), rather than failing: clients back off for long on retriable errors."""
        pending = self._pending.pop(tp, None)
        if pending is not None:
            self._become(tp, *pending)

    def close(self) -> None:
        """Stop opening pending replicas (the broker is stopping)."""
        if self._hosting is not None:
            self._hosting.cancel()
            self._hosting = None

    def _become(
        self, tp: TopicPartition, part: PartitionImage, leads: bool, topic_id: bytes
    ) -> None:
        hosted = self._host(tp, topic_id)
        if hosted is None:
            return
        partition, replica_log = hosted
        self._set_ineligible(tp)
        if leads:
            self.isr_stats.leader_update(partition, part)
            if partition.make_leader(part, replica_log.log_end_offset, self.clock.now_ms()):
                replica_log.assign_epoch_start_offset(part.leader_epoch)
        else:
            partition.make_follower(part, replica_log.log_end_offset)
        self._high_watermark_changed(tp)
        self._tier(tp, partition, replica_log, leads)

    def _set_ineligible(self, tp: TopicPartition) -> None:
        partition, replica_log = self._partitions[tp], self.log_manager.get_log(*tp)
        leo = replica_log.log_end_offset if replica_log is not None else 0
        if partition.set_ineligible(self._ineligible, leo, self.clock.now_ms()):
            self._high_watermark_changed(tp)

    def _tier(
        self, tp: TopicPartition, partition: Partition, replica_log: UnifiedLog, leads: bool
    ) -> None:
        """Tell the RemoteLogManager this broker leads or follows a tiered partition."""
        rlm = self.remote_log_manager
        if rlm is None:
            return
        topic_id = self._topic_id(tp[0])
        if topic_id is None:
            return
        if not replica_log.remote_log_enabled:
            rlm.stop_partition(tp)
            return
        tip = TopicIdPartition(topic_id, *tp)
        if leads:
            rlm.on_leader(
                tip, replica_log, partition.leader_epoch, lambda: partition.high_watermark
            )
        else:
            rlm.on_follower(tip, replica_log)

    def _host(self, tp: TopicPartition, topic_id: bytes) -> tuple[Partition, UnifiedLog] | None:
        try:
            replica_log = self.log_manager.get_or_create_log(*tp, self._config_for(tp[0]), topic_id)
        except (OSError, KafkaError) as e:
            if isinstance(e, KafkaError) and e.code == ErrorCode.INCONSISTENT_TOPIC_ID:
                # A node replaying its metadata log meets a topic's earlier incarnation
                # while the log on disk is a later one's: a later image hosts it.
                log.info("%s-%d: not hosted for now: %s", *tp, e)
                return None
            log.error("%s-%d: cannot open the log, the replica is offline: %s", *tp, e)
            self._offline.add(tp)
            return None
        self._offline.discard(tp)
        partition = self._partitions.get(tp)
        if partition is None:
            hw = min(self._checkpointed_hw.get(tp, 0), replica_log.log_end_offset)
            partition = self._partitions[tp] = Partition(
                tp[0],
                tp[1],
                self.node_id,
                self.config.replica_lag_time_max_ms,
                high_watermark=max(hw, replica_log.log_start_offset),
            )
        return partition, replica_log

    def _topic_id(self, topic: str) -> uuid.UUID | None:
        image = self._image.topics.get(topic)
        return uuid.UUID(bytes=image.topic_id) if image is not None else None

    def _deletes_remote(self, old: MetadataImage, new: MetadataImage, tp: TopicPartition) -> bool:
        """Whether this broker deletes ``tp``'s remote log: the topic is gone and this was
        its leader (its first replica if it had none)."""
        topic = old.topics.get(tp[0])
        if self.remote_log_manager is None or tp[0] in new.topics or topic is None:
            return False
        part = topic.partitions.get(tp[1])
        if part is None:
            return False
        leader = part.leader if part.leader >= 0 else part.replicas[0] if part.replicas else -1
        return leader == self.node_id

    def _waiting_for_remote_tier(self, tp: TopicPartition) -> str:
        """For a tiered partition whose closed segments are not copied yet (the remote
        store is down or slow), why its disk keeps filling: local retention deletes only
        copied segments."""
        rlm = self.remote_log_manager
        sizes = rlm.tier_sizes(tp) if rlm is not None else None
        if sizes is None or not sizes.copy_lag_segments:
            return ""
        return (
            f"; {sizes.copy_lag_segments} closed segments ({sizes.copy_lag_bytes} bytes) wait "
            "to be copied to the remote tier and stay on this disk until then"
        )

    def _stop_replica(
        self, tp: TopicPartition, topic_id: bytes, *, delete_remote: bool = False
    ) -> None:
        if self.remote_log_manager is not None:
            self.remote_log_manager.stop_partition(tp, delete_remote=delete_remote)
        self._partitions.pop(tp, None)
        self._offline.discard(tp)
        self.log_manager.delete_log(*tp, topic_id)
        self._wake(tp)

    # -- lookups -------------------------------------------------------------------
    def partition(self, tp: TopicPartition) -> Partition | None:
        return self._partitions.get(tp)

    def local_log(self, tp: TopicPartition) -> UnifiedLog | None:
        return self.log_manager.get_log(*tp)

    @property
    def offline_replicas(self) -> int:
        """Replicas assigned here whose log could not be opened (Kafka's OfflineReplicaCount)."""
        return len(self._offline)

    def high_watermark(self, tp: TopicPartition) -> int:
        partition = self._partitions.get(tp)
        return partition.high_watermark if partition is not None else -1

    def _leader(
        self, tp: TopicPartition, current_leader_epoch: int = -1, *, follower_ok: bool = False
    ) -> tuple[Partition, UnifiedLog]:
        """The partition and its log if this node leads it (or, ``follower_ok``, follows
        it), else the Kafka error."""
        if self._pending:
            self._open_now(tp)
        partition = self._partitions.get(tp)
        replica_log = self.log_manager.get_log(*tp)
        if partition is None or replica_log is None:
            if tp in self._offline:
                raise KafkaError(f"{tp[0]}-{tp[1]} is offline", ErrorCode.KAFKA_STORAGE_ERROR)
            raise KafkaError(
                f"{tp[0]}-{tp[1]} is not hosted here", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
        if current_leader_epoch >= 0:
            if current_leader_epoch < partition.leader_epoch:
                raise KafkaError(
                    f"leader epoch {current_leader_epoch} is older than {partition.leader_epoch}",
                    ErrorCode.FENCED_LEADER_EPOCH,
                )
            if current_leader_epoch > partition.leader_epoch:
                raise KafkaError(
                    f"leader epoch {current_leader_epoch} is newer than {partition.leader_epoch}",
                    ErrorCode.UNKNOWN_LEADER_EPOCH,
                )
        if not partition.is_leader and not (follower_ok and partition.role is Role.FOLLOWER):
            raise KafkaError(
                f"{tp[0]}-{tp[1]} is led by {partition.leader}", ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
        return partition, replica_log

    # -- append --------------------------------------------------------------------
    def append_to_leader(
        self,
        tp: TopicPartition,
        records: Writable,
        *,
        origin: AppendOrigin,
        required_acks: int = 1,
        allow_zstd: bool = True,
        verification: Guard | None = None,
        now_ms: int | None = None,
    ) -> AppendResult:
        """Validate and append one partition's batches now (no waiting for followers).

        Errors come back in the result, never as exceptions: one bad partition does not
        fail the others of a request. ``verification``: the guard of a transaction start
        the coordinator confirmed; a marker written since voids it. ``now_ms``: the
        request's time (one clock read for all its partitions)."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        verifier = self.transaction_verifier
        try:
            partition, replica_log = self._leader(tp)
            if verification is not None and not (
                verifier is not None and verifier.still_valid(tp, verification)
            ):
                raise KafkaError(
                    "the transaction ended while the partition was verified",
                    ErrorCode.INVALID_TXN_STATE,
                )
            if origin is AppendOrigin.CLIENT and is_internal(tp[0]):
                raise KafkaError(
                    f"Cannot append to internal topic {tp[0]}", ErrorCode.INVALID_TOPIC_EXCEPTION
                )
            if required_acks == -1:
                error = partition.check_min_isr(replica_log.config.min_insync_replicas)
                if error is not None:
                    raise KafkaError(
                        f"The size of the current ISR {list(partition.isr)} is insufficient to "
                        f"satisfy the min.isr requirement of "
                        f"{replica_log.config.min_insync_replicas} for partition {tp[0]}-{tp[1]}",
                        error,
                    )
            if not records:
                raise KafkaError("no records", ErrorCode.CORRUPT_MESSAGE)
            infos = scan_batches(
                records,
                max_batch_size=replica_log.config.max_message_bytes,
                strict=origin is AppendOrigin.CLIENT,
            )
            if not allow_zstd and any(i.compression == Compression.ZSTD for i in infos):
                raise KafkaError(
                    "zstd needs produce v7 or later", ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
                )
            if origin is AppendOrigin.TXN_MARKER and not all(i.is_control for i in infos):
                raise KafkaError("markers must be control batches", ErrorCode.INVALID_RECORD)
            appended = replica_log.append_as_leader(
                records, infos, leader_epoch=partition.leader_epoch, now_ms=now
            )
        except KafkaError as e:
            return AppendResult(e.code, str(e))
        except OSError as e:
            log.error("append to %s-%d failed: %s%s", *tp, e, self._waiting_for_remote_tier(tp))
            self.log_manager.report_error(tp, e)
            return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR, f"append failed: {e.strerror}")
        self.topic_stats.appended(tp[0], len(records), appended.base_offset, appended.last_offset)
        if verifier is not None and (verification is not None or origin is AppendOrigin.TXN_MARKER):
            for info in infos:
                verifier.done(tp, info.producer_id)
        self.purgatory.notify(("leo", tp))
        if partition.maybe_increment_high_watermark(replica_log.log_end_offset, now):
            self._high_watermark_changed(tp)
        return AppendResult(
            base_offset=appended.base_offset,
            last_offset=appended.last_offset,
            log_append_time=appended.log_append_time,
            log_start_offset=appended.log_start_offset,
        )

    async def append_records(
        self,
        entries: Mapping[TopicPartition, Writable],
        *,
        required_acks: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        allow_zstd: bool = True,
        transactional_id: str | None = None,
    ) -> dict[TopicPartition, AppendResult]:
        """Produce: append every partition, without waiting for the followers (acks=all
        then waits with :meth:`await_replication`). A transactional producer's first batch
        on a partition is verified with its coordinator first (KIP-890)."""
        refused: dict[TopicPartition, ErrorCode] = {}
        guards: dict[TopicPartition, Guard] = {}
        if transactional_id and origin is AppendOrigin.CLIENT:
            refused, guards = await self._verify(transactional_id, entries)
        if origin is AppendOrigin.CLIENT:
            entries = await self._recompress_big_batches(entries)
        now = self.clock.now_ms()
        results = {
            tp: AppendResult(refused[tp], "the partition is not in the transaction")
            if tp in refused
            else self.append_to_leader(
                tp,
                records,
                origin=origin,
                required_acks=required_acks,
                allow_zstd=allow_zstd,
                verification=guards.get(tp),
                now_ms=now,
            )
            for tp, records in entries.items()
        }
        return results

    async def _recompress_big_batches(
        self, entries: Mapping[TopicPartition, Writable]
    ) -> Mapping[TopicPartition, Writable]:
        """Big batches whose topic wants another codec, recompressed in worker threads; the
        append then finds them in the topic's codec (smaller ones it recompresses itself)."""
        work = {}
        for tp, records in entries.items():
            if len(records) < RECOMPRESS_INLINE_MAX:
                continue  # the common case, decided without looking the log up
            replica_log = self.log_manager.get_log(*tp)
            if replica_log is not None and replica_log.config.compression_type != "producer":
                work[tp] = asyncio.to_thread(replica_log.recompressed, records)
        if not work:
            return entries
        done = dict(zip(work, await asyncio.gather(*work.values()), strict=True))
        return {tp: done.get(tp, records) for tp, records in entries.items()}

    async def _verify(
        self, transactional_id: str, entries: Mapping[TopicPartition, Writable]
    ) -> tuple[dict[TopicPartition, ErrorCode], dict[TopicPartition, Guard]]:
        verifier = self.transaction_verifier
        if verifier is None:
            return {}, {}
        wanted: list[TopicPartition] = []
        producer = (-1, -1)
        for tp, records in entries.items():
            replica_log = self.log_manager.get_log(*tp)
            found = verifier.needs_verification(replica_log, records) if replica_log else None
            if found is not None:
                wanted.append(tp)
                producer = found
        if not wanted:
            return {}, {}
        return await verifier.check(transactional_id, *producer, wanted)

    async def await_replication(
        self, results: Mapping[TopicPartition, AppendResult], timeout_ms: int
    ) -> None:
        """Kafka's delayed produce: wait (woken by HW moves) until every successful append is
        below its partition's HW, then check the ISR still meets min.insync.replicas."""
        await parked(self.replicated(results, timeout_ms))

    def replicated(
        self, results: Mapping[TopicPartition, AppendResult], timeout_ms: int
    ) -> asyncio.Future[None]:
        """:meth:`await_replication` as a future, done (each result's error set) in the
        very call that moves the last high watermark it waits for: no task, no wake-up
        between the follower's fetch and the produce's answer."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        pending = {tp: r for tp, r in results.items() if r.error == ErrorCode.NONE}

        def check(expired: bool) -> bool:
            if done.done():  # cancelled: its connection closed
                return True
            for tp, result in list(pending.items()):
                error = self._replication_state(tp, result)
                if error is not None:
                    result.error = error
                    del pending[tp]
            if pending and not expired:
                return False
            for result in pending.values():
                result.error = ErrorCode.REQUEST_TIMED_OUT
            done.set_result(None)
            return True

        if not check(False):
            deadline = self.clock.now_ms() + timeout_ms
            self.purgatory.watch([("hw", tp) for tp in pending], deadline, check)
        return done

    def _replication_state(self, tp: TopicPartition, result: AppendResult) -> ErrorCode | None:
        """None while waiting; NONE once replicated; the error otherwise."""
        partition = self._partitions.get(tp)
        replica_log = self.log_manager.get_log(*tp)
        if partition is None or replica_log is None or not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if partition.high_watermark <= result.last_offset:
            return None
        if partition.check_min_isr(replica_log.config.min_insync_replicas) is not None:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    async def await_high_watermark(self, tp: TopicPartition, offset: int, timeout_ms: int) -> None:
        """Wait until the HW of ``tp`` passes ``offset`` (a coordinator's committed write).

        Raises NOT_LEADER_OR_FOLLOWER if leadership is lost, REQUEST_TIMED_OUT on timeout."""
        result = AppendResult(last_offset=offset)
        await self.await_replication({tp: result}, timeout_ms)
        if result.error not in (ErrorCode.NONE, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
            raise KafkaError(f"{tp[0]}-{tp[1]}: write not committed", result.error)

    # -- fetch ---------------------------------------------------------------------
    async def fetch_messages(
        self, params: FetchParams, requested: Sequence[FetchRequestPartition]
    ) -> list[FetchResult]:
        """Read every partition; long-poll (woken by HW moves, or appends for followers)
        until ``min_bytes`` are there, ``max_wait_ms`` passes or a partition has an error.
        No partitions (e.g. a fetch that closes its session) is answered at once, as Kafka
        does: nothing could ever arrive. A follower's bytes of throttled replicas count
        against the leader's replication quota."""
        results = await self._fetch(params, requested)
        if params.from_follower:
            self._record_follower_bytes(requested, results)
        return results

    def follower_fetch(
        self, params: FetchParams, requested: Sequence[FetchRequestPartition]
    ) -> list[FetchResult] | asyncio.Future[list[FetchResult]]:
        """A follower's fetch as :meth:`fetch_messages` does it, but its long poll is a
        purgatory watch (Kafka's DelayedFetch): the results now, or a future set by a
        callback right after the appends it waits for, with no task parked and woken per
        follower fetch. The answer is read once the event loop's current turn is over, so
        it carries every produce handled in that turn."""
        assert params.from_follower
        results, total = self._read_all(params, requested)
        if (
            not requested
            or total >= params.min_bytes
            or params.max_wait_ms <= 0
            or _respond_now(results)
        ):
            self._record_follower_bytes(requested, results)
            return results
        loop = asyncio.get_running_loop()
        done: asyncio.Future[list[FetchResult]] = loop.create_future()
        keys = [("leo", (p.topic, p.partition)) for p in requested]
        deadline = self.clock.now_ms() + params.max_wait_ms

        def complete(expired: bool) -> None:
            if done.done():  # cancelled: its connection closed
                return
            try:
                # As Kafka's DelayedFetch: the follower's position was recorded when its
                # fetch arrived; the read that answers it records nothing again.
                fresh, size = self._read_all(params, requested, bookkeeping=False)
                if size < params.min_bytes and not expired and not _respond_now(fresh):
                    self.purgatory.watch(keys, deadline, check)  # e.g. nothing new after all
                    return
                self._record_follower_bytes(requested, fresh)
                done.set_result(fresh)
            except Exception as e:  # the fetch's own failure, never the notifier's
                done.set_exception(e)

        def check(expired: bool) -> bool:
            if expired:
                complete(True)
            elif not done.done():
                loop.call_soon(complete, False)
            return True

        self.purgatory.watch(keys, deadline, check)
        return done

    def _record_follower_bytes(
        self, requested: Sequence[FetchRequestPartition], results: Sequence[FetchResult]
    ) -> None:
        """A follower's bytes of throttled replicas count against the replication quota."""
        quota = self.leader_quota
        if not quota.throttles_any:  # the common case: no throttled replica at all
            return
        size = sum(
            r.size
            for p, r in zip(requested, results, strict=True)
            if r.size and quota.is_throttled((p.topic, p.partition))
        )
        if size:
            quota.record(size, self.clock.now_ms())

    async def _fetch(
        self, params: FetchParams, requested: Sequence[FetchRequestPartition]
    ) -> list[FetchResult]:
        results, total = self._read_all(params, requested)
        if any(r.remote is not None for r in results):
            # As Kafka's DelayedRemoteFetch: answered once the remote reads are done.
            await asyncio.gather(*(self._read_remote(r) for r in results if r.remote))
            return results
        if (
            not requested
            or total >= params.min_bytes
            or params.max_wait_ms <= 0
            or _respond_now(results)
        ):
            return results
        kind = "leo" if params.from_follower else "hw"
        keys = [(kind, (p.topic, p.partition)) for p in requested]
        deadline = self.clock.now_ms() + params.max_wait_ms
        while total < params.min_bytes and await self.purgatory.wait(keys, deadline):
            results, total = self._read_all(params, requested)
            if _respond_now(results):
                break
        return results

    def _read_all(
        self,
        params: FetchParams,
        requested: Sequence[FetchRequestPartition],
        *,
        bookkeeping: bool = True,
    ) -> tuple[list[FetchResult], int]:
        total = 0
        results = []
        for p in requested:
            budget = max(params.max_bytes - total, 0)
            result = self._read(params, p, budget, first=total == 0, bookkeeping=bookkeeping)
            total += result.size
            results.append(result)
        return results, total

    def _read(
        self,
        params: FetchParams,
        p: FetchRequestPartition,
        budget: int,
        *,
        first: bool,
        bookkeeping: bool = True,
    ) -> FetchResult:
        tp = (p.topic, p.partition)
        try:
            # Consumers with client metadata (v11+) may read from followers (KIP-392).
            partition, replica_log = self._leader(
                tp, p.current_leader_epoch, follower_ok=params.rack_id is not None
            )
        except KafkaError as e:
            return FetchResult(e.code)
        if params.from_follower:
            refused = self._follower_fetched(params, p, partition, replica_log, bookkeeping)
            if refused is not None:
                return refused
        hw = partition.high_watermark
        lso = replica_log.last_stable_offset(hw)
        committed = params.isolation_level == READ_COMMITTED and not params.from_follower
        limit = replica_log.log_end_offset if params.from_follower else lso if committed else hw
        out = FetchResult(
            high_watermark=hw,
            last_stable_offset=lso,
            log_start_offset=replica_log.log_start_offset,
            aborted=[] if committed else None,
        )
        if params.rack_id and self.config.rack_aware and partition.is_leader:
            preferred = preferred_read_replica(
                partition, self._racks, params.rack_id, p.fetch_offset, self.clock.now_ms()
            )
            if preferred is not None:
                out.preferred_read_replica = preferred
                return out  # no records: the client fetches from ``preferred`` next
        if p.fetch_offset == limit and p.fetch_offset >= out.log_start_offset:
            return out  # caught up: nothing to read (the common case of idle partitions)
        if params.from_follower and self.leader_quota.should_throttle(
            tp, params.replica_id in partition.isr, self.clock.now_ms()
        ):
            return out  # over the replication quota: this replica gets nothing this time
        self._read_records(
            params, p, replica_log, out, min(p.max_bytes, budget), limit, first, committed
        )
        return out

    def _follower_fetched(
        self,
        params: FetchParams,
        p: FetchRequestPartition,
        partition: Partition,
        replica_log: UnifiedLog,
        bookkeeping: bool,
    ) -> FetchResult | None:
        """A follower's fetch as the leader's bookkeeping (unless ``bookkeeping`` is
        False): its fetch offset is its log end offset, which may move the HW and bring
        it back into the ISR. The answer when it gets no records: it is not a replica, or
        it must truncate first."""
        tp = (p.topic, p.partition)
        if not partition.is_known_replica(params.replica_id):
            return FetchResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        diverging = _divergence(replica_log, p, partition.high_watermark)
        if diverging is not None:
            # The follower's log went its own way after this point (it led an older
            # epoch): it truncates there before fetching (KIP-320, WE-11).
            return FetchResult(
                high_watermark=partition.high_watermark,
                last_stable_offset=partition.high_watermark,
                log_start_offset=replica_log.log_start_offset,
                diverging_epoch=diverging,
            )
        if not bookkeeping:
            return None
        if partition.update_follower_fetch(
            params.replica_id,
            p.fetch_offset,
            p.log_start_offset,
            replica_log.log_end_offset,
            self.clock.now_ms(),
        ):
            self._high_watermark_changed(tp)
        proposal = partition.isr_expansion(params.replica_id)
        if proposal is not None:
            self.propose_isr_change(tp, proposal)
        return None

    def _read_records(
        self,
        params: FetchParams,
        p: FetchRequestPartition,
        replica_log: UnifiedLog,
        out: FetchResult,
        max_bytes: int,
        limit: int,
        first: bool,
        committed: bool,
    ) -> None:
        """Fill ``out`` from the local log up to ``limit``; a read below the local log
        start is handed to the remote tier (``out.remote``) for consumers."""
        try:
            out.records = replica_log.read(
                p.fetch_offset, max_bytes, max_offset=limit, min_one_batch=first
            )
        except OffsetMovedToTieredStorageError as e:
            topic_id = self._topic_id(p.topic)
            if params.from_follower or self.remote_log_manager is None or topic_id is None:
                out.error = e.code  # a follower rebuilds from the remote tier (KIP-405)
                return
            out.remote = RemoteFetch(
                TopicIdPartition(topic_id, p.topic, p.partition),
                replica_log,
                p.fetch_offset,
                max_bytes,
                limit,
                first,
                committed,
            )
            return
        except KafkaError as e:
            out.error = e.code
            return
        if committed and out.records.size:
            out.aborted = replica_log.collect_aborted_transactions(
                p.fetch_offset, out.records.next_offset
            )

    async def _read_remote(self, out: FetchResult) -> None:
        """Fill ``out`` from the remote tier (on the RemoteLogManager's reader threads);
        a failure is this partition's error only (:func:`remote_error`)."""
        fetch, rlm = out.remote, self.remote_log_manager
        assert fetch is not None and rlm is not None
        out.remote = None
        try:
            out.records, aborted = await rlm.read(
                fetch.tp,
                fetch.log,
                fetch.offset,
                fetch.max_bytes,
                max_offset=fetch.max_offset,
                min_one_batch=fetch.min_one_batch,
                committed=fetch.committed,
            )
        except KafkaError as e:
            out.error = e.code
            return
        except RemoteStorageError as e:
            out.error = remote_error(e, f"{fetch.tp}: reading the remote tier")
            return
        if aborted is not None:
            out.aborted = aborted

    # -- ISR -------------------------------------------------------------------------
    def maybe_shrink_isr(self) -> None:
        """Propose dropping followers that have not caught up for replica.lag.time.max.ms
        (run every half of it)."""
        now = self.clock.now_ms()
        for tp, partition in self._partitions.items():
            if len(partition.isr) < 2:
                continue  # no follower to drop (and no log end to read, at 10k partitions)
            replica_log = self.log_manager.get_log(*tp)
            if not partition.is_leader or replica_log is None:
                continue
            proposal = partition.isr_shrink(replica_log.log_end_offset, now)
            if proposal is not None:
                self.propose_isr_change(tp, proposal)

    def handle_log_dir_failures(self) -> int:
        """Take the log dirs reported failed offline (Kafka's LogDirFailureChannel): their
        partitions go offline here, and those this broker leads are handed to the rest of
        their ISR by an AlterPartition without this broker (followers leave the ISR the
        same way, at once rather than after replica.lag.time.max.ms). Returns the dirs
        failed."""
        failed = self.log_manager.failures.take()
        for log_dir, reason in failed:
            lost = self.log_manager.fail_dir(log_dir, reason)
            for tp in lost:
                self._pending.pop(tp, None)
                self._offline.add(tp)
                partition = self._partitions.pop(tp, None)
                if partition is not None and self.node_id in partition.isr:
                    others = tuple(r for r in partition.isr if r != self.node_id)
                    if others:
                        proposal = IsrProposal(
                            partition.leader_epoch, partition.partition_epoch, others
                        )
                        self.propose_isr_change(tp, proposal)
                self._wake(tp)
            log.error("log dir %s failed: %d partition(s) offline here", log_dir, len(lost))
        return len(failed)

    def isr_change_failed(self, tp: TopicPartition) -> None:
        partition = self._partitions.get(tp)
        if partition is not None:
            partition.isr_change_failed()

    # -- follower side -------------------------------------------------------------
    def follower_position(self, tp: TopicPartition) -> FollowerPosition | None:
        """Where this follower fetches ``tp`` from (None: it does not follow it now)."""
        if self._pending:
            self._open_now(tp)
        partition = self._partitions.get(tp)
        replica_log = self.log_manager.get_log(*tp)
        if partition is None or replica_log is None or partition.role is not Role.FOLLOWER:
            return None
        latest = replica_log.epoch_cache.latest_epoch
        return FollowerPosition(
            leader=partition.leader,
            leader_epoch=partition.leader_epoch,
            fetch_offset=replica_log.log_end_offset,
            last_fetched_epoch=-1 if latest is None else latest,
            log_start_offset=replica_log.log_start_offset,
        )

    def append_as_follower(
        self, tp: TopicPartition, records: Writable | bytes, high_watermark: int
    ) -> int:
        """Write batches fetched from the leader verbatim (its offsets and epochs) and take
        its HW; returns this replica's new log end offset. Raises KafkaError."""
        partition = self._partitions.get(tp)
        replica_log = self.log_manager.get_log(*tp)
        if partition is None or replica_log is None or partition.role is not Role.FOLLOWER:
            raise KafkaError(
                f"{tp[0]}-{tp[1]} is not followed here", ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
        if records:
            view = memoryview(records)
            try:
                replica_log.append_as_follower(view, scan_batches(view, strict=False))
            except OSError as e:
                self.log_manager.report_error(tp, e)
                raise KafkaError(
                    f"follower append failed: {e.strerror}", ErrorCode.KAFKA_STORAGE_ERROR
                ) from e
            self.topic_stats.replicated(len(view))
        leo = replica_log.log_end_offset
        if partition.follower_update_high_watermark(high_watermark, leo):
            self._high_watermark_changed(tp)
        return leo

    def truncate(self, tp: TopicPartition, offset: int, *, fully: bool = False) -> None:
        """A follower cuts its log at ``offset`` (diverged), or restarts it there
        (``fully``: it fell below the leader's log start)."""
        replica_log = self.log_manager.get_log(*tp)
        partition = self._partitions.get(tp)
        if replica_log is None or partition is None:
            return
        if fully:
            replica_log.truncate_fully_and_start_at(offset)
        else:
            replica_log.truncate_to(offset)
        partition.truncated(replica_log.log_start_offset, replica_log.log_end_offset)
        log.info("%s-%d: truncated to %d", *tp, offset)

    # -- offsets -------------------------------------------------------------------
    def offset_for_timestamp(
        self,
        tp: TopicPartition,
        timestamp: int,
        *,
        isolation_level: int = READ_UNCOMMITTED,
        current_leader_epoch: int = -1,
    ) -> OffsetLookup:
        """ListOffsets: earliest, latest (the HW, or the LSO for read_committed), max
        timestamp, or by timestamp (below the same bound)."""
        try:
            partition, replica_log = self._leader(tp, current_leader_epoch)
        except KafkaError as e:
            return OffsetLookup(e.code)
        hw = partition.high_watermark
        if hw < partition.leader_epoch_start_offset:
            # A new leader whose HW has not caught up yet: answering would be a guess.
            return OffsetLookup(ErrorCode.OFFSET_NOT_AVAILABLE)
        epoch = partition.leader_epoch
        if isolation_level == READ_COMMITTED:
            hw = replica_log.last_stable_offset(hw)
        if timestamp == EARLIEST_TIMESTAMP:
            return OffsetLookup(offset=replica_log.log_start_offset, leader_epoch=epoch)
        if timestamp == EARLIEST_LOCAL_TIMESTAMP:
            return OffsetLookup(offset=replica_log.local_log_start_offset, leader_epoch=epoch)
        if timestamp == LATEST_TIERED_TIMESTAMP:
            if not replica_log.remote_log_enabled:
                return OffsetLookup()
            return OffsetLookup(
                offset=replica_log.highest_offset_in_remote_storage, leader_epoch=epoch
            )
        if timestamp == LATEST_TIMESTAMP:
            return OffsetLookup(offset=hw, leader_epoch=epoch)
        if timestamp == MAX_TIMESTAMP:
            offset, ts = replica_log.max_timestamp_offset()
            if offset < 0:
                return OffsetLookup()  # an empty log: like Kafka, no offset and no epoch
            return OffsetLookup(offset=offset, timestamp=ts, leader_epoch=epoch)
        if timestamp < 0:
            return OffsetLookup(ErrorCode.INVALID_REQUEST)
        found = replica_log.offset_for_timestamp(timestamp, max_offset=hw)
        if found is None:
            return OffsetLookup()  # nothing at or after it: no offset and no epoch (Kafka's -1s)
        return OffsetLookup(offset=found[0], timestamp=found[1], leader_epoch=epoch)

    async def list_offset(
        self,
        tp: TopicPartition,
        timestamp: int,
        *,
        isolation_level: int = READ_UNCOMMITTED,
        current_leader_epoch: int = -1,
    ) -> OffsetLookup:
        """ListOffsets over both tiers: a timestamp is searched in the remote tier's time
        indexes first when the log has records there (on a reader thread)."""
        found = self.offset_for_timestamp(
            tp,
            timestamp,
            isolation_level=isolation_level,
            current_leader_epoch=current_leader_epoch,
        )
        rlm, replica_log = self.remote_log_manager, self.local_log(tp)
        if (
            timestamp < 0
            or found.error != ErrorCode.NONE
            or rlm is None
            or replica_log is None
            or replica_log.log_start_offset >= replica_log.local_log_start_offset
            or (topic_id := self._topic_id(tp[0])) is None
        ):
            return found
        try:
            remote = await rlm.offset_for_timestamp(
                TopicIdPartition(topic_id, *tp), replica_log, timestamp
            )
        except RemoteStorageError as e:
            return OffsetLookup(remote_error(e, f"{tp[0]}-{tp[1]}: searching the remote tier"))
        if remote is None:
            return found
        partition = self._partitions.get(tp)
        epoch = partition.leader_epoch if partition is not None else -1
        return OffsetLookup(offset=remote[0], timestamp=remote[1], leader_epoch=epoch)

    def end_offset_for_epoch(
        self, tp: TopicPartition, leader_epoch: int, current_leader_epoch: int = -1
    ) -> tuple[ErrorCode, int, int]:
        """OffsetForLeaderEpoch on the leader: (error, epoch, end offset) where the epoch
        is the largest one <= ``leader_epoch`` this log holds and the end offset where it
        ends (the log end offset for the latest), -1s if unknown. A stale or future
        ``current_leader_epoch`` is fenced as in Fetch."""
        try:
            _, replica_log = self._leader(tp, current_leader_epoch)
        except KafkaError as e:
            return e.code, -1, -1
        epoch, end = replica_log.epoch_cache.end_offset_for(
            leader_epoch, replica_log.log_end_offset
        )
        return ErrorCode.NONE, epoch, end

    def active_producers(self, tp: TopicPartition) -> list[ProducerEntry]:
        """DescribeProducers on the leader; raises KafkaError."""
        _, replica_log = self._leader(tp)
        return list(replica_log.producer_state.producers.values())

    def delete_records(self, tp: TopicPartition, offset: int) -> tuple[ErrorCode, int]:
        """DeleteRecords on the leader: (error, new low watermark)."""
        try:
            partition, replica_log = self._leader(tp)
            if is_internal(tp[0]):
                raise KafkaError(
                    f"Cannot delete records of internal topic {tp[0]}",
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                )
            if not replica_log.config.delete_enabled:
                raise KafkaError(
                    f"Records of partition {tp[0]}-{tp[1]} can not be deleted due to the "
                    "configured policy",
                    ErrorCode.POLICY_VIOLATION,
                )
            low = replica_log.delete_records_before(offset, partition.high_watermark)
            return ErrorCode.NONE, low
        except KafkaError as e:
            return e.code, -1

    # -- internals -----------------------------------------------------------------
    def _high_watermark_changed(self, tp: TopicPartition) -> None:
        self.purgatory.notify(("hw", tp))

    def high_watermarks(self) -> dict[TopicPartition, int]:
        """Every hosted partition's HW (a copy: retention and the cleaner read it in a
        worker thread)."""
        return {tp: p.high_watermark for tp, p in self._partitions.items()}

    def last_stable_offsets(self) -> dict[TopicPartition, int]:
        """Every hosted partition's LSO (what the cleaner may compact up to); logs not
        opened since the restart have none (the cleaner skips them)."""
        out = {}
        for tp, p in self._partitions.items():
            replica_log = self.log_manager.get_log(*tp)
            if replica_log is not None and replica_log.loaded:
                out[tp] = replica_log.last_stable_offset(p.high_watermark)
        return out

    def checkpoint_high_watermarks(self) -> None:
        """``replication-offset-checkpoint``: where each HW restarts from (replicas still
        waiting to be opened keep the HW they were checkpointed with)."""
        waiting = {
            tp: self._checkpointed_hw[tp] for tp in self._pending if tp in self._checkpointed_hw
        }
        hws = waiting | self.high_watermarks()
        self.log_manager.write_replication_checkpoint(hws)
        self._checkpointed_hw = hws

    def _wake(self, tp: TopicPartition) -> None:
        self.purgatory.notify(("hw", tp))
        self.purgatory.notify(("leo", tp))


def remote_error(e: RemoteStorageError, doing: str) -> ErrorCode:
    """What a client is answered when the remote tier cannot be read, both retried:
    REPLICA_NOT_AVAILABLE while the partition's remote log metadata is loading (as
    Kafka's RemotePartitionMetadataStore; a restarted broker reads it back from
    ``__remote_log_metadata`` first), UNKNOWN_SERVER_ERROR when the store failed."""
    if isinstance(e, RemoteLogMetadataNotReadyError):
        log.debug("%s: %s", doing, e)
        return ErrorCode.REPLICA_NOT_AVAILABLE
    log.warning("%s failed: %s", doing, e)
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _no_isr_changes(tp: TopicPartition, proposal: IsrProposal) -> None:
    """A single-replica world never changes an ISR; a cluster's broker replaces this."""


def _divergence(
    replica_log: UnifiedLog, p: FetchRequestPartition, high_watermark: int
) -> tuple[int, int] | None:
    """Where a follower's log diverges from this leader's, if it does: the leader's end
    of the follower's last epoch is before the follower's fetch offset. An epoch this
    leader cannot place (none can be above the one it recorded on becoming leader; Kafka
    answers OFFSET_OUT_OF_RANGE) sends the follower back to the HW."""
    if p.last_fetched_epoch < 0:
        return None
    epoch, end = replica_log.epoch_cache.end_offset_for(
        p.last_fetched_epoch, replica_log.log_end_offset
    )
    if end < 0:
        return -1, high_watermark
    if epoch < p.last_fetched_epoch or end < p.fetch_offset:
        return epoch, end
    return None


def _respond_now(results: Sequence[FetchResult]) -> bool:
    """An error or a redirection to another replica is not worth waiting for."""
    return any(r.error != ErrorCode.NONE or r.preferred_read_replica >= 0 for r in results)
