"""The broker glue of ``__remote_log_metadata``: events appended through this broker's
replica manager and read back from its log (also after a restart), and, for a metadata
partition led elsewhere, produced to and fetched from a real Moldau broker over the
Kafka protocol."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from moldau.clock import AsyncioScheduler
from moldau.config.topic import LogConfig
from moldau.metadata.image import (
    BrokerImage,
    Endpoint,
    MetadataImage,
    PartitionImage,
    TopicImage,
)
from moldau.metadata.publisher import MetadataPublisher
from moldau.protocol.client import NetworkClient
from moldau.replication.replica_manager import ReplicaManager
from moldau.server.remote_log_metadata import RemoteLogMetadataTopic
from moldau.storage.log_manager import LogManager
from moldau.storage.remote.metadata_records import (
    REMOTE_LOG_METADATA_TOPIC,
    deserialize,
    metadata_partition,
)
from moldau.storage.remote.segment import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from moldau.storage.remote.storage_manager import RemoteStorageError
from moldau.testing import broker

PARTITIONS = 4
ORDERS_ID = uuid.UUID("5d2e4a1c-9f3b-4e8a-b7c6-1a2b3c4d5e6f")
# a restarted node sees the same topic ids (its logs are matched to topics by id)
METADATA_TOPIC_ID = uuid.UUID("0c4f7a2e-3b1d-4f6a-9e8c-7d5b3a1f2e4c")


def topic(name: str, topic_id: uuid.UUID, partitions: int, leader: int, **configs: str):
    parts = {p: PartitionImage(p, (leader,), (leader,), leader, 0, 0) for p in range(partitions)}
    return TopicImage(name, topic_id.bytes, parts, configs)


def image(node: int, metadata_leader: int, port: int = 0) -> MetadataImage:
    topics = [
        topic(REMOTE_LOG_METADATA_TOPIC, METADATA_TOPIC_ID, PARTITIONS, metadata_leader),
        topic("orders", ORDERS_ID, 2, node, **{"remote.storage.enable": "true"}),
    ]
    brokers = {
        b: BrokerImage(b, (Endpoint("PLAINTEXT", "127.0.0.1", port),))
        for b in {node, metadata_leader}
    }
    return MetadataImage(
        topics={t.name: t for t in topics},
        topics_by_id={t.topic_id: t.name for t in topics},
        brokers=brokers,
    )


class Node:
    """One broker's replica manager and the glue, over ``data`` (no controller)."""

    def __init__(self, data: Path, node: int, img: MetadataImage) -> None:
        """Must be made on the event loop: the glue starts its readers there."""
        self.logs = LogManager([data], {})
        self.logs.load_logs()
        self.rm = ReplicaManager(node, self.logs, AsyncioScheduler(), lambda t: LogConfig())
        self.created: list[tuple[str, int, int, dict[str, str]]] = []
        self.network = NetworkClient("test-rlmm", request_timeout_ms=10_000)
        self.publisher = MetadataPublisher(node)
        self.glue = RemoteLogMetadataTopic(
            node,
            self.rm,
            self.network,
            self.create,
            lambda: self.publisher.image,
            lambda img, b: (e.host, e.port) if (e := img.brokers[b].endpoint()) else None,
            num_partitions=PARTITIONS,
            request_timeout_ms=10_000,
        )
        self.publisher.add_listener(self.rm)
        self.publisher.publish(img)
        # What the RemoteLogManager does for the tiered partitions this broker hosts.
        for p in (0, 1):
            self.glue.manager.on_partition_assigned(orders(p))

    async def create(self, *args: Any) -> None:
        self.created.append(args)

    async def ready(self, tp: TopicIdPartition) -> None:
        while not self.glue.manager.is_ready(tp):
            await asyncio.sleep(0.01)

    async def close(self) -> None:
        await self.glue.wait_closed()
        self.network.close()
        self.logs.shutdown()


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 120))


def orders(partition: int) -> TopicIdPartition:
    return TopicIdPartition(ORDERS_ID, "orders", partition)


def copy_events(tp: TopicIdPartition, start: int):
    md = RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate(tp), start, start + 99, 0, 1, 0, 4096, {0: start}
    )
    return md, RemoteLogSegmentMetadataUpdate(
        md.segment_id, 1, RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1
    )


def test_events_go_through_the_local_log_and_come_back_after_a_restart(tmp_path: Path) -> None:
    async def test() -> None:
        node = Node(tmp_path, 1, image(1, 1))
        m = node.glue.manager
        needed = {metadata_partition(orders(p), PARTITIONS) for p in (0, 1)}
        assert m.needed_metadata_partitions() == needed == node.glue.reading
        await node.ready(orders(0))
        md, done = copy_events(orders(0), 0)
        await m.add_remote_log_segment_metadata(md)
        await m.update_remote_log_segment_metadata(done)
        assert [s.state for s in m.segments(orders(0))] == [done.state]
        # Kafka's bytes, in Kafka's metadata partition, through the replica manager.
        p = metadata_partition(orders(0), PARTITIONS)
        local = node.rm.local_log((REMOTE_LOG_METADATA_TOPIC, p))
        assert local is not None and local.log_end_offset == 2
        assert node.rm.high_watermark((REMOTE_LOG_METADATA_TOPIC, p)) == 2
        assert node.created == []  # the topic is there already
        for p in (0, 1):
            m.on_partition_unassigned(orders(p))
        assert node.glue.reading == set()
        await node.close()

        again = Node(tmp_path, 1, image(1, 1))
        await again.ready(orders(0))
        (segment,) = again.glue.manager.segments(orders(0))
        assert segment.segment_id == md.segment_id and segment.end_offset == 99
        assert again.glue.manager.segments(orders(1)) == []
        await again.close()

    run(test)


def test_the_topic_is_created_with_the_configured_replication(tmp_path: Path) -> None:
    """Not capped by the brokers alive now (one here): the controller refuses too few
    brokers and the glue tries again, as Kafka's manager does."""

    async def test() -> None:
        img = image(1, 1)
        node = Node(tmp_path, 1, MetadataImage(brokers=img.brokers))
        await node.glue.ensure_topic()
        configs = {
            "retention.ms": "-1",
            "cleanup.policy": "delete",
            "remote.storage.enable": "false",
        }
        assert node.created == [(REMOTE_LOG_METADATA_TOPIC, PARTITIONS, 3, configs)]
        await node.close()

    run(test)


@pytest.fixture(scope="module")
def remote_broker():
    with broker(num_partitions=1) as b:
        b.create_topic(REMOTE_LOG_METADATA_TOPIC, PARTITIONS)
        yield b


def test_a_metadata_partition_led_elsewhere_is_produced_to_and_fetched(
    tmp_path: Path, remote_broker
) -> None:
    """This node (2) hosts `orders` but none of the metadata partitions: broker 1 (a real
    Moldau broker process) leads them all."""
    events: list[Any] = []

    async def test() -> None:
        node = Node(tmp_path, 2, image(2, 1, remote_broker.port))
        m = node.glue.manager
        await node.ready(orders(1))
        md, done = copy_events(orders(1), 500)
        await m.add_remote_log_segment_metadata(md)
        await m.update_remote_log_segment_metadata(done)
        assert [s.segment_id for s in m.segments(orders(1))] == [md.segment_id]
        events.extend([md, done])
        await node.close()

    run(test)
    # What a Kafka client reads from the topic: Kafka's values, unkeyed, in Kafka's partition.
    p = metadata_partition(orders(1), PARTITIONS)
    records = remote_broker.consume(REMOTE_LOG_METADATA_TOPIC, 2)
    assert [(r.partition, r.key) for r in records] == [(p, None), (p, None)]
    assert [deserialize(r.value) for r in records] == events


def test_an_unreachable_metadata_leader_fails_writes_retriably_in_bounded_time(
    tmp_path: Path,
) -> None:
    """Broker 1 leads the metadata partitions but nothing listens at its address."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]

    async def test() -> None:
        node = Node(tmp_path, 2, image(2, 1, dead_port))
        node.glue.request_timeout_ms = 2_000
        started = time.monotonic()
        with pytest.raises(RemoteStorageError, match="cannot write"):
            await node.glue.publish(metadata_partition(orders(0), PARTITIONS), b"x")
        assert time.monotonic() - started < 30
        assert not node.glue.manager.is_ready(orders(0))  # its reader keeps retrying
        await node.close()

    run(test)
