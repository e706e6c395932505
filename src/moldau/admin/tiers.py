"""The two tiers of a topic's partitions, from what any Kafka cluster with tiered storage
answers: ListOffsets (v9) gives the log start offset (-2, over both tiers), the local
log start offset (-4, KIP-405), the highest offset copied to the remote tier (-5,
KIP-1005) and the log end (-1), asked of each partition's leader; the local size is the
leader's DescribeLogDirs (``log_dirs``); the remote size is folded from the partition's
events in ``__remote_log_metadata`` (:func:`remote_log_sizes`), the same records the
brokers keep, since no Kafka API reports it."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from moldau.admin.log_dirs import partition_sizes
from moldau.protocol.client import Address, NetworkClient
from moldau.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from moldau.storage.remote.metadata_cache import RemoteLogMetadataCache
from moldau.storage.remote.metadata_records import (
    REMOTE_LOG_METADATA_TOPIC,
    MetadataRecordError,
    deserialize,
    metadata_partition,
)
from moldau.storage.remote.segment import TopicIdPartition

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient, TopicMetadata

LIST_OFFSETS_VERSION = 9
LATEST, EARLIEST, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -4, -5
REQUEST_TIMEOUT_MS = 30_000


@dataclass(frozen=True, slots=True)
class PartitionTiers:
    log_start_offset: int
    local_log_start_offset: int
    highest_offset_in_remote_storage: int  # -1: nothing copied (or not tiered)
    log_end_offset: int
    local_size_bytes: int | None = None  # the leader's replica (DescribeLogDirs)
    remote_size_bytes: int | None = None
    remote_segments: int | None = None


async def partition_tiers(
    topic: str, leaders: dict[int, Address]
) -> dict[int, PartitionTiers | None]:
    """``leaders``: partition -> its leader's address. None for a partition whose leader
    did not answer or answered an error."""
    by_leader: dict[Address, list[int]] = defaultdict(list)
    for partition, address in leaders.items():
        by_leader[address].append(partition)
    found: dict[int, PartitionTiers | None] = dict.fromkeys(leaders)
    client = NetworkClient("moldau-cli", request_timeout_ms=REQUEST_TIMEOUT_MS)
    try:
        answers = await asyncio.gather(
            *(_ask(client, address, topic, parts) for address, parts in by_leader.items()),
            return_exceptions=True,
        )
    finally:
        client.close()
    for answer in answers:
        if isinstance(answer, dict):
            found.update(answer)
    return found


async def _ask(
    client: NetworkClient, address: Address, topic: str, partitions: list[int]
) -> dict[int, PartitionTiers]:
    offsets: dict[int, list[int]] = defaultdict(list)
    for spec in (EARLIEST, EARLIEST_LOCAL, LATEST_TIERED, LATEST):
        request = ListOffsetsRequest(
            replica_id=-1,
            topics=[
                ListOffsetsTopic(
                    topic, [ListOffsetsPartition(p, timestamp=spec) for p in partitions]
                )
            ],
        )
        response = await client.send(address, request, LIST_OFFSETS_VERSION)
        for t in response.topics:
            for p in t.partitions:
                if p.error_code == 0:
                    offsets[p.partition_index].append(p.offset)
    return {p: PartitionTiers(*values) for p, values in offsets.items() if len(values) == 4}


@dataclass(frozen=True, slots=True)
class RemoteLogSize:
    size_bytes: int
    segments: int


def remote_log_sizes(
    client_config: dict[str, Any],
    topic_id: uuid.UUID,
    topic: str,
    partitions: list[int],
    metadata_partitions: int,
    timeout_s: float = 30.0,
) -> dict[int, RemoteLogSize]:
    """The bytes and segments readable in the remote tier per partition: the events of
    ``__remote_log_metadata`` read with a consumer (its partitions that hold ``topic``'s)
    and applied in order, as the brokers' RemoteLogMetadataCache does."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    caches = {p: RemoteLogMetadataCache() for p in partitions}
    wanted = {
        metadata_partition(TopicIdPartition(topic_id, topic, p), metadata_partitions)
        for p in partitions
    }
    consumer = Consumer(
        {
            **client_config,
            "group.id": "moldau-remote-log-sizes",  # never joined
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        ends = {}
        for mp in wanted:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(REMOTE_LOG_METADATA_TOPIC, mp), timeout=timeout_s
            )
            if high > low:
                ends[mp] = high
        consumer.assign(
            [TopicPartition(REMOTE_LOG_METADATA_TOPIC, mp, OFFSET_BEGINNING) for mp in ends]
        )
        deadline = time.monotonic() + timeout_s
        while ends:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{REMOTE_LOG_METADATA_TOPIC} not read within {timeout_s} s")
            for msg in consumer.consume(1000, timeout=0.5):
                part, offset, error = msg.partition(), msg.offset(), msg.error()
                if part not in ends or offset is None:
                    continue
                if error is not None and error.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"reading {REMOTE_LOG_METADATA_TOPIC}: {error}")
                if error is None and offset < ends[part]:
                    _apply(caches, topic_id, msg.value())
                if offset + (error is None) >= ends[part]:
                    del ends[part]
    finally:
        consumer.close()
    return {p: RemoteLogSize(c.size_bytes(), len(c.segments())) for p, c in caches.items()}


def _apply(caches: dict[int, RemoteLogMetadataCache], topic_id: uuid.UUID, value: Any) -> None:
    if not value:
        return
    try:
        event = deserialize(value)
    except MetadataRecordError:
        return  # the brokers skip it too
    tp = event.topic_id_partition
    if tp.topic_id == topic_id and tp.partition in caches:
        caches[tp.partition].apply(event)


def java_uuid(msb: int, lsb: int) -> uuid.UUID:
    """A Kafka Uuid from its two signed longs (confluent-kafka's ``Uuid``)."""
    mask = (1 << 64) - 1
    return uuid.UUID(int=((msb & mask) << 64) | (lsb & mask))


def describe_tiers(
    admin: AdminClient, topics: list[TopicMetadata], brokers: dict, config: dict
) -> dict[str, dict[int, PartitionTiers | None]]:
    """Per tiered topic and partition (``topics``: the Metadata of each, ``brokers`` its
    brokers by id, ``config`` a librdkafka configuration of the cluster): log start, local
    log start, last tiered offset, log end, and the local and remote sizes."""
    from confluent_kafka import TopicCollection

    names = [str(t.topic) for t in topics]
    described = admin.describe_topics(TopicCollection(names))
    local = asyncio.run(partition_sizes(config["bootstrap.servers"]))
    meta = admin.list_topics(
        REMOTE_LOG_METADATA_TOPIC, timeout=REQUEST_TIMEOUT_MS / 1000
    ).topics.get(REMOTE_LOG_METADATA_TOPIC)
    meta = meta if meta is not None and meta.error is None else None
    found: dict[str, dict[int, PartitionTiers | None]] = {}
    for topic in topics:
        name = str(topic.topic)
        leaders = {
            p.id: (brokers[p.leader].host, brokers[p.leader].port)
            for p in topic.partitions.values()
            if p.leader in brokers
        }
        offsets = asyncio.run(partition_tiers(name, leaders))
        remote = {}
        if meta is not None:
            tid = described[name].result().topic_id
            remote = remote_log_sizes(
                config,
                java_uuid(tid.get_most_significant_bits(), tid.get_least_significant_bits()),
                name,
                sorted(topic.partitions),
                len(meta.partitions),
            )
        found[name] = {
            p: None
            if tier is None
            else replace(
                tier,
                local_size_bytes=local.get((name, p)),
                remote_size_bytes=remote[p].size_bytes if p in remote else None,
                remote_segments=remote[p].segments if p in remote else None,
            )
            for p, tier in offsets.items()
        }
    return found
