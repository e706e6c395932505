"""Follower fetchers: how a broker keeps its follower replicas copied from their leaders.

As Kafka's ReplicaFetcherManager: the partitions this broker follows are grouped by
leader and spread over ``num.replica.fetchers`` fetchers per leader; each fetcher is one
connection that loops on Fetch requests (replica id set, ``replica.fetch.max.bytes`` per
partition, ``replica.fetch.response.max.bytes`` in all, ``replica.fetch.wait.max.ms`` of
long poll) and writes what comes back verbatim with ``append_as_follower``, taking the
leader's high watermark. A follower whose log diverged (it led an older epoch) gets the
diverging epoch in the response (KIP-320) and truncates exactly there; one that fell
below the leader's log start restarts its log at it. A partition whose leader is gone or
fenced waits for the next metadata update (``replica.fetch.backoff.ms``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from moldau.config.broker import BrokerConfig
from moldau.metadata.image import MetadataImage
from moldau.metadata.publisher import LocalChanges
from moldau.protocol.client import Address, ConnectionSecurity, NetworkClient
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from moldau.protocol.messages.fetch_response import PartitionData
from moldau.replication.replica_manager import ReplicaManager, TopicPartition
from moldau.security.client import ClientSecurity

log = logging.getLogger(__name__)

FETCH_VERSION = 12  # last fetched epoch and the diverging epoch (KIP-320)
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

    def close(self) -> None:
        self._task.cancel()
        self._client.close()

    async def _run(self) -> None:
        config = self.manager.config
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            ready = [tp for tp in self.partitions if self._delayed.get(tp, 0) <= now]
            request = self._request(ready)
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
            for topic in response.responses:
                for data in topic.partitions:
                    tp = (topic.topic, data.partition_index)
                    if tp in self.partitions:
                        self._handle(tp, data, loop.time())

    def _request(self, ready: list[TopicPartition]) -> FetchRequest | None:
        rm, config = self.manager.replica_manager, self.manager.config
        by_topic: dict[str, list[FetchPartition]] = {}
        for tp in ready:
            position = rm.follower_position(tp)
            if position is None or position.leader != self.leader:
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
        try:
            if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                self._out_of_range(tp, data)
            elif data.error_code != ErrorCode.NONE:
                raise KafkaError("fetch failed", ErrorCode(data.error_code))
            elif data.diverging_epoch is not None and data.diverging_epoch.end_offset >= 0:
                self._truncate(tp, data.diverging_epoch.epoch, data.diverging_epoch.end_offset)
            else:
                rm.append_as_follower(tp, data.records or b"", data.high_watermark)
        except KafkaError as e:
            if e.code not in RETRIABLE:
                log.warning("%s-%d: replication failed: %s", *tp, e)
            self._delayed[tp] = now + self.manager.config.backoff_ms / 1000

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
