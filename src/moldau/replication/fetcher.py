"""Follower fetchers: how a broker keeps its follower replicas copied from their leaders.

As Kafka's ReplicaFetcherManager: the partitions this broker follows are grouped by
leader and spread over ``num.replica.fetchers`` fetchers per leader; each fetcher is one
connection that loops on Fetch requests (replica id set, ``replica.fetch.max.bytes`` per
partition, ``replica.fetch.response.max.bytes`` in all, ``replica.fetch.wait.max.ms`` of
long poll) and writes what comes back verbatim with ``append_as_follower``, taking the
leader's high watermark. Replicas throttled by the follower replication quota (KIP-73,
:mod:`moldau.replication.quota`) are left out of requests while it is exceeded and they
have not caught up. A follower whose log diverged (it led an older epoch) gets the
diverging epoch in the response (KIP-320) and truncates exactly there; one that fell
below the leader's log start restarts its log at it; one whose next offset the leader
holds only in the remote tier rebuilds its log from there (:mod:`tier_state_machine`,
KIP-405). A partition whose leader is gone or fenced waits for the next metadata update (``replica.fetch.backoff.ms``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from moldau.config.broker import BrokerConfig
from moldau.metadata.image import MetadataImage
from moldau.metadata.publisher import LocalChanges
from moldau.protocol.client import Address, ConnectionSecurity, NetworkClient
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from moldau.protocol.messages.fetch_response import PartitionData
from moldau.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from moldau.replication.quota import FOLLOWER, ReplicationQuota
from moldau.replication.remote_log_manager import RemoteLogManager
from moldau.replication.replica_manager import (
    EARLIEST_LOCAL_TIMESTAMP,
    ReplicaManager,
    TopicPartition,
)
from moldau.replication.tier_state_machine import RemoteTierBehindError
from moldau.security.client import ClientSecurity
from moldau.storage.remote.storage_manager import RemoteStorageError

log = logging.getLogger(__name__)

FETCH_VERSION = 12  # last fetched epoch and the diverging epoch (KIP-320)
LIST_OFFSETS_VERSION = 8  # earliest-local offsets (KIP-405)
# A rebuild waiting for this broker's view of the remote tier looks again this soon: it
# costs a ListOffsets and a look at local metadata, no remote read.
REMOTE_VIEW_RETRY_S = 0.1
RETRIABLE = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR,
}


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    num_fetchers: int = 1
    fetch_max_bytes: int = 1 << 20  # replica.fetch.max.bytes, per partition
    response_max_bytes: int = 10 << 20  # replica.fetch.response.max.bytes
    wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    backoff_ms: int = 1_000  # replica.fetch.backoff.ms
    quota_window_num: int = 11  # replication.quota.window.num
    quota_window_ms: int = 1_000  # replication.quota.window.size.seconds
    request_timeout_ms: int = 30_000
    security: ConnectionSecurity | None = None  # TLS and SASL of the inter-broker listener

    @classmethod
    def from_config(cls, config: BrokerConfig) -> FetcherConfig:
        return cls(
            num_fetchers=config.int("num.replica.fetchers"),
            fetch_max_bytes=config.int("replica.fetch.max.bytes"),
            response_max_bytes=config.int("replica.fetch.response.max.bytes"),
            wait_max_ms=config.int("replica.fetch.wait.max.ms"),
            min_bytes=config.int("replica.fetch.min.bytes"),
            backoff_ms=config.int("replica.fetch.backoff.ms"),
            quota_window_num=config.int("replication.quota.window.num"),
            quota_window_ms=1000 * config.int("replication.quota.window.size.seconds"),
            # Only a cluster has other brokers to fetch from (Kafka checks it always).
            security=ClientSecurity.inter_broker(config)
            if config.get("controller.quorum.voters")
            else None,
        )


class Fetcher:
    """One connection to one leader, fetching a set of partitions in a loop."""

    def __init__(
        self,
        manager: ReplicaFetcherManager,
        leader: int,
        fetcher_id: int,
    ) -> None:
        self.manager = manager
        self.leader = leader
        self.fetcher_id = fetcher_id
        self.partitions: set[TopicPartition] = set()
        self._delayed: dict[TopicPartition, float] = {}  # until this loop time
        # Partitions whose log is being rebuilt from the remote tier (KIP-405).
        self._rebuilding: dict[TopicPartition, asyncio.Task[None]] = {}
        self._in_sync: set[TopicPartition] = set()  # caught up to the leader's HW
        self._wakeup = asyncio.Event()
        self._client = NetworkClient(
            f"replica-fetcher-{manager.node_id}-{leader}-{fetcher_id}",
            request_timeout_ms=manager.config.request_timeout_ms + manager.config.wait_max_ms,
            security=manager.config.security,
        )
        self._task = asyncio.get_running_loop().create_task(self._run())

    def add(self, tp: TopicPartition) -> None:
        self.partitions.add(tp)
        self._delayed.pop(tp, None)
        self._wakeup.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.discard(tp)
        self._delayed.pop(tp, None)
        rebuild = self._rebuilding.pop(tp, None)
        if rebuild is not None:
            rebuild.cancel()  # before it touches the log (a new leader keeps its own)
        self._in_sync.discard(tp)

    def close(self) -> None:
        self._task.cancel()
        for rebuild in self._rebuilding.values():
            rebuild.cancel()
        self._client.close()

    async def _run(self) -> None:
        config = self.manager.config
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            delayed = self._delayed
            ready = [tp for tp in self.partitions if delayed.get(tp, 0) <= now] if delayed else None
            request = self._request(self.partitions if ready is None else ready)
            address = self.manager.address_of(self.leader)
            if request is None or address is None:
                self._wakeup.clear()
                delay = min((t - now for t in self._delayed.values()), default=1.0)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), max(0.01, min(delay, 1.0)))
                continue
            try:
                response = await self._client.send(address, request, FETCH_VERSION)
            except (ConnectionError, TimeoutError) as e:
                log.debug("fetch from broker %d failed: %s", self.leader, e)
                await asyncio.sleep(config.backoff_ms / 1000)
                continue
            if response.error_code != ErrorCode.NONE:
                await asyncio.sleep(config.backoff_ms / 1000)
                continue
            now = loop.time()
            for topic in response.responses:
                for data in topic.partitions:
                    tp = (topic.topic, data.partition_index)
                    if tp in self.partitions:
                        self._handle(tp, data, now)

    def _request(self, ready: Iterable[TopicPartition]) -> FetchRequest | None:
        rm, config, quota = self.manager.replica_manager, self.manager.config, self.manager.quota
        now_ms = rm.clock.now_ms()
        by_topic: dict[str, list[FetchPartition]] = {}
        for tp in ready:
            position = rm.follower_position(tp)
            if position is None or position.leader != self.leader:
                continue
            if quota.should_throttle(tp, tp in self._in_sync, now_ms):
                continue
            by_topic.setdefault(tp[0], []).append(
                FetchPartition(
                    partition=tp[1],
                    current_leader_epoch=position.leader_epoch,
                    fetch_offset=position.fetch_offset,
                    last_fetched_epoch=position.last_fetched_epoch,
                    log_start_offset=position.log_start_offset,
                    partition_max_bytes=config.fetch_max_bytes,
                )
            )
        if not by_topic:
            return None
        return FetchRequest(
            replica_id=self.manager.node_id,
            max_wait_ms=config.wait_max_ms,
            min_bytes=config.min_bytes,
            max_bytes=config.response_max_bytes,
            topics=[FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        )

    def _handle(self, tp: TopicPartition, data: PartitionData, now: float) -> None:
        rm = self.manager.replica_manager
        if tp in self._rebuilding:
            return  # fetched before the rebuild started: its log is being replaced
        try:
            if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                self._out_of_range(tp, data)
            elif data.error_code == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE:
                self._rebuild_from_remote_tier(tp)
            elif data.error_code != ErrorCode.NONE:
                raise KafkaError("fetch failed", ErrorCode(data.error_code))
            elif data.diverging_epoch is not None and data.diverging_epoch.end_offset >= 0:
                self._truncate(tp, data.diverging_epoch.epoch, data.diverging_epoch.end_offset)
            else:
                records = data.records or b""
                leo = rm.append_as_follower(tp, records, data.high_watermark)
                if records and self.manager.quota.is_throttled(tp):
                    self.manager.quota.record(len(records), rm.clock.now_ms())
                if leo >= data.high_watermark:
                    self._in_sync.add(tp)
                else:
                    self._in_sync.discard(tp)
        except KafkaError as e:
            if e.code not in RETRIABLE:
                log.warning("%s-%d: replication failed: %s", *tp, e)
            self._delayed[tp] = now + self.manager.config.backoff_ms / 1000

    def _rebuild_from_remote_tier(self, tp: TopicPartition) -> None:
        """KIP-405: the leader holds the offset only in the remote tier. The partition is
        paused while its log is rebuilt from there, then fetches on from its new end."""
        rlm = self.manager.replica_manager.remote_log_manager
        if rlm is None:
            raise KafkaError(
                "no remote tier on this broker", ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE
            )
        self._delayed[tp] = math.inf
        task = asyncio.get_running_loop().create_task(self._rebuild(tp, rlm))
        self._rebuilding[tp] = task

        def done(finished: asyncio.Task[None]) -> None:
            if self._rebuilding.get(tp) is finished:  # not a later rebuild of the partition
                del self._rebuilding[tp]

        task.add_done_callback(done)

    async def _rebuild(self, tp: TopicPartition, rlm: RemoteLogManager) -> None:
        rm = self.manager.replica_manager
        delay = 0.0
        try:
            next_offset = await rlm.rebuild_follower(tp, await self._leader_local_start(tp))
            partition, replica_log = rm.partition(tp), rm.local_log(tp)
            if partition is not None and replica_log is not None:
                partition.truncated(replica_log.log_start_offset, replica_log.log_end_offset)
            log.info("%s-%d: rebuilt from the remote tier, fetching from %d", *tp, next_offset)
        except RemoteTierBehindError as e:
            log.debug("%s-%d: waiting for the remote log metadata: %s", *tp, e)
            delay = REMOTE_VIEW_RETRY_S
        except (RemoteStorageError, KafkaError, OSError) as e:
            log.info("%s-%d: cannot rebuild from the remote tier yet: %s", *tp, e)
            delay = self.manager.config.backoff_ms / 1000
        except Exception:  # e.g. a corrupt remote snapshot: never leave the partition paused
            log.exception("%s-%d: rebuilding from the remote tier failed", *tp)
            delay = self.manager.config.backoff_ms / 1000
        if tp in self.partitions:
            self._delayed[tp] = asyncio.get_running_loop().time() + delay
            self._wakeup.set()

    async def _leader_local_start(self, tp: TopicPartition) -> int:
        """Where the leader's local log starts (ListOffsets earliest-local, as Kafka's
        TierStateMachine asks it). Raises KafkaError or OSError (retriable)."""
        position = self.manager.replica_manager.follower_position(tp)
        address = self.manager.address_of(self.leader)
        if position is None or address is None:
            raise KafkaError(f"{tp[0]}-{tp[1]}: no leader", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        request = ListOffsetsRequest(
            replica_id=self.manager.node_id,
            topics=[
                ListOffsetsTopic(
                    tp[0],
                    [ListOffsetsPartition(tp[1], position.leader_epoch, EARLIEST_LOCAL_TIMESTAMP)],
                )
            ],
        )
        response = await self._client.send(address, request, LIST_OFFSETS_VERSION)
        answer = response.topics[0].partitions[0]
        if answer.error_code != ErrorCode.NONE:
            raise KafkaError("earliest-local offset", ErrorCode(answer.error_code))
        offset: int = answer.offset
        return offset

    def _truncate(self, tp: TopicPartition, epoch: int, leader_end: int) -> None:
        """Cut the diverged tail: at the leader's end of ``epoch``, or earlier where this
        log's own end of that epoch is earlier (another round follows if needed)."""
        rm = self.manager.replica_manager
        replica_log = rm.local_log(tp)
        if replica_log is None:
            return
        leo = replica_log.log_end_offset
        local_epoch, local_end = replica_log.epoch_cache.end_offset_for(epoch, leo)
        target = min(leader_end, leo) if local_end < 0 else min(leader_end, local_end)
        rm.truncate(tp, target)

    def _out_of_range(self, tp: TopicPartition, data: PartitionData) -> None:
        rm = self.manager.replica_manager
        position = rm.follower_position(tp)
        if position is None:
            return
        if position.fetch_offset < data.log_start_offset:
            rm.truncate(tp, data.log_start_offset, fully=True)  # fell behind its retention
        else:
            rm.truncate(tp, max(data.high_watermark, 0))  # ahead of the leader: back to its HW


class ReplicaFetcherManager:
    """Assigns followed partitions to fetchers as metadata changes."""

    def __init__(
        self,
        node_id: int,
        replica_manager: ReplicaManager,
        endpoint: Callable[[MetadataImage, int], Address | None],
        config: FetcherConfig | None = None,
    ) -> None:
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.endpoint = endpoint
        self.config = config or FetcherConfig()
        self._image = MetadataImage()
        self._fetchers: dict[tuple[int, int], Fetcher] = {}
        self._assigned: dict[TopicPartition, tuple[int, int]] = {}
        # KIP-73: bytes fetched for throttled replicas (a metadata listener)
        self.quota = ReplicationQuota(
            FOLLOWER, node_id, self.config.quota_window_num, self.config.quota_window_ms
        )

    def address_of(self, broker_id: int) -> Address | None:
        broker = self._image.brokers.get(broker_id)
        if broker is None or broker.fenced:
            return None
        return self.endpoint(self._image, broker_id)

    def on_metadata_update(
        self, old: MetadataImage, new: MetadataImage, changes: LocalChanges
    ) -> None:
        self._image = new
        for tp in (*changes.leaders, *changes.deletes):
            self._unassign(tp)
        for tp, part in changes.followers.items():
            if part.leader < 0:
                self._unassign(tp)
            else:
                self._assign(tp, part.leader)
        if old.brokers is not new.brokers:
            for fetcher in self._fetchers.values():
                fetcher._wakeup.set()  # a leader's endpoint or fencing may have changed

    def _assign(self, tp: TopicPartition, leader: int) -> None:
        key = (leader, zlib.crc32(f"{tp[0]}-{tp[1]}".encode()) % self.config.num_fetchers)
        if self._assigned.get(tp) == key:
            self._fetchers[key].add(tp)  # a new epoch: fetch again at once
            return
        self._unassign(tp)
        fetcher = self._fetchers.get(key)
        if fetcher is None:
            fetcher = self._fetchers[key] = Fetcher(self, *key)
        fetcher.add(tp)
        self._assigned[tp] = key

    def _unassign(self, tp: TopicPartition) -> None:
        key = self._assigned.pop(tp, None)
        if key is None:
            return
        fetcher = self._fetchers[key]
        fetcher.remove(tp)
        if not fetcher.partitions:
            fetcher.close()
            del self._fetchers[key]

    def close(self) -> None:
        for fetcher in self._fetchers.values():
            fetcher.close()
        self._fetchers.clear()
        self._assigned.clear()
