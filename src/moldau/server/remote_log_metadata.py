"""The broker's side of ``__remote_log_metadata``: creates the topic, writes events to it
and feeds what it holds to this broker's remote log metadata manager.

As Kafka's TopicBasedRemoteLogMetadataManager, which produces to the topic and runs a
consumer on it, but with the broker's own parts:

- the topic is created like the broker's other internal topics, through the controller:
  ``remote.log.metadata.topic.num.partitions`` (50), ``retention.ms``
  ``remote.log.metadata.topic.retention.ms`` (-1: kept forever), replication
  ``remote.log.metadata.topic.replication.factor`` (3; 1 on a node that is its own quorum,
  as for ``__consumer_offsets``). As Kafka's manager, creation is retried until enough
  brokers are registered: a cluster started node by node gets all its replicas;
- an event goes to its metadata partition with acks=all: appended through the replica
  manager when this broker leads that partition, else produced to its leader;
- the RemoteLogManager assigns the manager the tiered partitions this broker leads or
  follows; one reader per metadata partition they need hands it every record below the
  high watermark: from the local replica when this broker hosts the partition, else
  fetched from its leader, as a consumer would.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable

from moldau.metadata.image import MetadataImage
from moldau.protocol.client import Address, NetworkClient
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from moldau.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from moldau.records.record import build_batch, decode_all
from moldau.replication.replica_manager import AppendOrigin, ReplicaManager
from moldau.storage.remote.metadata_manager import TopicBasedRemoteLogMetadataManager
from moldau.storage.remote.metadata_records import REMOTE_LOG_METADATA_TOPIC
from moldau.storage.remote.storage_manager import RemoteStorageError

log = logging.getLogger(__name__)

PRODUCE_VERSION = 9
FETCH_VERSION = 12
READ_CHUNK = 1 << 20
POLL_MS = 500  # a reader at the end looks again at least this often
RETRY_BACKOFF_MS = 200

CreateTopic = Callable[[str, int, int, dict[str, str]], Awaitable[None]]


class RemoteLogMetadataTopic:
    """Owns this broker's :class:`TopicBasedRemoteLogMetadataManager` (``manager``) and
    the IO it needs; ``start()`` creates the topic, ``close()`` stops the readers."""

    def __init__(
        self,
        node_id: int,
        replica_manager: ReplicaManager,
        network: NetworkClient,
        create_topic: CreateTopic,
        image: Callable[[], MetadataImage],
        endpoint: Callable[[MetadataImage, int], Address | None],
        *,
        num_partitions: int = 50,
        replication_factor: int = 3,
        retention_ms: int = -1,
        request_timeout_ms: int = 30_000,
    ) -> None:
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.network = network
        self.create_topic = create_topic
        self.image = image
        self.endpoint = endpoint
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.retention_ms = retention_ms
        self.request_timeout_ms = request_timeout_ms
        self.clock = replica_manager.clock
        self.manager = TopicBasedRemoteLogMetadataManager(
            self.publish, num_partitions, on_needed_change=self._run_readers
        )
        self._readers: dict[int, asyncio.Task[None]] = {}
        self._starting: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Create the topic in the background, retrying until the controller takes it
        (writes would create it too, but a broker that never copies still reads)."""
        self._starting = asyncio.get_running_loop().create_task(self._ensure_topic_eventually())

    async def _ensure_topic_eventually(self) -> None:
        logged = ""
        while True:
            try:
                await self.ensure_topic()
                return
            except (KafkaError, ConnectionError, TimeoutError) as e:
                if str(e) != logged:  # once per reason, not every retry
                    log.info("cannot create %s yet: %s", REMOTE_LOG_METADATA_TOPIC, e)
                    logged = str(e)
                await asyncio.sleep(RETRY_BACKOFF_MS / 1000)

    # -- the topic -----------------------------------------------------------------
    async def ensure_topic(self) -> None:
        if REMOTE_LOG_METADATA_TOPIC in self.image().topics:
            return
        await self.create_topic(
            REMOTE_LOG_METADATA_TOPIC,
            self.num_partitions,
            self.replication_factor,
            # As Kafka's: never compacted, never tiered itself.
            {
                "retention.ms": str(self.retention_ms),
                "cleanup.policy": "delete",
                "remote.storage.enable": "false",
            },
        )

    # -- writes --------------------------------------------------------------------
    async def publish(self, partition: int, value: bytes) -> int:
        """Append ``value`` to ``partition`` with acks=all; its offset. Retries while the
        topic is being created or its leader moves, up to the request timeout, then
        raises RemoteStorageError (the caller retries later)."""
        batch = build_batch([(None, value)], base_timestamp=self.clock.now_ms())
        deadline = self.clock.now_ms() + self.request_timeout_ms
        while True:
            try:
                await self.ensure_topic()
                leader = self._leader(partition)
                if leader == self.node_id:
                    return await self._append_locally(partition, batch)
                return await self._produce(leader, partition, batch)
            except (KafkaError, ConnectionError, TimeoutError) as e:
                if self.clock.now_ms() >= deadline:
                    raise RemoteStorageError(
                        f"cannot write to {REMOTE_LOG_METADATA_TOPIC}-{partition}: {e}"
                    ) from e
                await asyncio.sleep(RETRY_BACKOFF_MS / 1000)

    def _leader(self, partition: int) -> int:
        topic = self.image().topics.get(REMOTE_LOG_METADATA_TOPIC)
        part = topic.partitions.get(partition) if topic is not None else None
        if part is None or part.leader < 0:
            raise KafkaError(
                f"{REMOTE_LOG_METADATA_TOPIC}-{partition} has no leader",
                ErrorCode.LEADER_NOT_AVAILABLE,
            )
        return part.leader

    async def _append_locally(self, partition: int, batch: bytes) -> int:
        tp = (REMOTE_LOG_METADATA_TOPIC, partition)
        appended = self.replica_manager.append_to_leader(
            tp, bytearray(batch), origin=AppendOrigin.COORDINATOR, required_acks=-1
        )
        if appended.error != ErrorCode.NONE:
            raise KafkaError(appended.message or appended.error.name, appended.error)
        await self.replica_manager.await_high_watermark(
            tp, appended.last_offset, self.request_timeout_ms
        )
        return appended.last_offset

    def _address(self, node: int) -> Address:
        address = self.endpoint(self.image(), node)
        if address is None:
            raise ConnectionError(f"no endpoint known for broker {node}")
        return address

    async def _produce(self, leader: int, partition: int, batch: bytes) -> int:
        request = ProduceRequest(
            acks=-1,
            timeout_ms=self.request_timeout_ms,
            topic_data=[
                TopicProduceData(
                    name=REMOTE_LOG_METADATA_TOPIC,
                    partition_data=[PartitionProduceData(index=partition, records=batch)],
                )
            ],
        )
        response = await self.network.send(self._address(leader), request, PRODUCE_VERSION)
        answer = response.responses[0].partition_responses[0]
        if answer.error_code != ErrorCode.NONE:
            raise KafkaError(answer.error_message or "produce failed", ErrorCode(answer.error_code))
        offset: int = answer.base_offset
        return offset

    # -- the feed ------------------------------------------------------------------
    @property
    def reading(self) -> set[int]:
        """The metadata partitions this broker reads now."""
        return set(self._readers)

    def _run_readers(self, needed: Iterable[int]) -> None:
        needed = set(needed)
        for p in set(self._readers) - needed:
            self._readers.pop(p).cancel()
        for p in needed - set(self._readers):
            self._readers[p] = asyncio.get_running_loop().create_task(self._read(p))

    async def _read(self, partition: int) -> None:
        """Hand the manager every record of ``partition`` below the HW, for as long as it
        needs them; failures (no leader yet, a leader down) are retried."""
        tp = (REMOTE_LOG_METADATA_TOPIC, partition)
        while True:
            try:
                if self.replica_manager.partition(tp) is not None:
                    await self._read_locally(partition)
                else:
                    await self._fetch(partition)
            except (KafkaError, ConnectionError, TimeoutError) as e:
                log.debug("%s-%d: reading failed, retrying: %s", *tp, e)
                await asyncio.sleep(RETRY_BACKOFF_MS / 1000)

    def _hand_over(self, partition: int, records: bytes, high_watermark: int) -> None:
        m = self.manager
        for _, batch in decode_all(records):
            for record in batch:
                if m.position(partition) <= record.offset < high_watermark:
                    m.on_record(partition, record.offset, record.value)

    async def _read_locally(self, partition: int) -> None:
        tp = (REMOTE_LOG_METADATA_TOPIC, partition)
        rm, m = self.replica_manager, self.manager
        replica_log = rm.local_log(tp)
        if replica_log is None:
            raise KafkaError(f"{tp[0]}-{tp[1]} is not open", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        hw = rm.high_watermark(tp)
        before = m.position(partition)
        start = max(before, replica_log.log_start_offset)
        if start < hw:
            data = replica_log.read_bytes(start, READ_CHUNK, max_offset=hw)
            self._hand_over(partition, data, hw)
        if m.position(partition) >= hw:
            m.on_caught_up(partition, hw)
            await rm.purgatory.wait([("hw", tp)], self.clock.now_ms() + POLL_MS)
        elif m.position(partition) == before:  # nothing readable there yet: do not spin
            await asyncio.sleep(POLL_MS / 1000)
        else:
            await asyncio.sleep(0)  # a long partition loads a chunk per turn of the loop

    async def _fetch(self, partition: int) -> None:
        """One consumer Fetch from the partition's leader (long-polling at the end)."""
        m = self.manager
        position = m.position(partition)
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=POLL_MS,
            min_bytes=1,
            max_bytes=READ_CHUNK,
            topics=[
                FetchTopic(
                    topic=REMOTE_LOG_METADATA_TOPIC,
                    partitions=[
                        FetchPartition(
                            partition=partition,
                            fetch_offset=position,
                            partition_max_bytes=READ_CHUNK,
                        )
                    ],
                )
            ],
        )
        leader = self._address(self._leader(partition))
        response = await self.network.send(leader, request, FETCH_VERSION)
        data = response.responses[0].partitions[0]
        if data.error_code != ErrorCode.NONE:
            raise KafkaError("fetch failed", ErrorCode(data.error_code))
        self._hand_over(partition, bytes(data.records or b""), data.high_watermark)
        if m.position(partition) >= data.high_watermark:
            m.on_caught_up(partition, data.high_watermark)

    def close(self) -> None:
        tasks = [*self._readers.values(), *([self._starting] if self._starting else [])]
        for task in tasks:
            task.cancel()
        self._readers.clear()
        self._starting = None

    async def wait_closed(self) -> None:
        """Close and wait for the readers to end (tests)."""
        tasks = [*self._readers.values(), *([self._starting] if self._starting else [])]
        self.close()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
