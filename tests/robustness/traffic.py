"""Real client traffic to capture: admin, produce, fetch and consumer groups, from
confluent-kafka (librdkafka), kafka-python and aiokafka, so the captured requests cover
many APIs, versions (flexible and not) and codecs."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from aiokafka import AIOKafkaConsumer
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)
from kafka import KafkaConsumer

from tests.integration.group_helpers import group_consumer, poll_all
from tests.integration.helpers import (
    DEADLINE_S,
    admin,
    consume_confluent,
    make_records,
    produce_aiokafka,
    produce_confluent,
    produce_kafka_python,
    wait_for_topic,
)

TOPIC = "replay-main"  # 3 partitions, then 4
COMPACTED = "replay-compacted"  # 1 partition, cleanup.policy=compact
DOOMED = "replay-doomed"  # deleted at the end
TOPICS = (TOPIC, COMPACTED, DOOMED)
GROUPS = ("replay-confluent", "replay-kafka-python", "replay-aiokafka")


def _done(futures: dict[Any, Any]) -> None:
    """Wait for admin futures; the calls are there to be captured, so errors are kept out
    of the way (the broker answering with an error code is traffic too)."""
    for future in futures.values():
        with contextlib.suppress(Exception):  # any client-side verdict is fine here
            future.result(timeout=30)


def generate(bootstrap: str) -> int:
    """Drive every client through ``bootstrap``; returns the records produced to TOPIC."""
    client = admin(bootstrap)  # must outlive its futures
    client.create_topics(
        [
            NewTopic(TOPIC, 3, 1),
            NewTopic(COMPACTED, 1, 1, config={"cleanup.policy": "compact"}),
            NewTopic(DOOMED, 1, 1),
        ],
        operation_timeout=30,
    )[TOPIC].result(timeout=30)
    for name, partitions in ((TOPIC, 3), (COMPACTED, 1), (DOOMED, 1)):
        wait_for_topic(bootstrap, name, partitions)

    main = make_records(120, seed=1)
    produce_confluent(
        bootstrap, TOPIC, main[:40], "lz4", **{"enable.idempotence": True, "acks": "all"}
    )
    produce_kafka_python(bootstrap, TOPIC, main[40:80], "gzip")
    produce_aiokafka(bootstrap, TOPIC, main[80:], "zstd")
    produce_confluent(bootstrap, COMPACTED, make_records(30, seed=2, keys=5), "snappy")
    produce_kafka_python(bootstrap, DOOMED, make_records(10, seed=3))
    # Three partitioners place keys differently: compare contents, not placement.
    consumed = consume_confluent(bootstrap, TOPIC)
    got = sorted(g.value or b"" for gots in consumed.values() for g in gots)
    assert got == sorted(r.value for r in main), "the proxy lost or changed records"

    _admin_calls(bootstrap)
    _confluent_group(bootstrap, len(main))
    _kafka_python_group(bootstrap, len(main))
    _aiokafka_group(bootstrap, len(main))
    client = admin(bootstrap)  # must outlive its futures
    _done(client.describe_consumer_groups(list(GROUPS)))
    _done(client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUPS[0])]))
    _done(client.delete_consumer_groups([GROUPS[2]], request_timeout=30))
    _done(client.delete_records([TopicPartition(TOPIC, 0, 5)], request_timeout=30))
    _done(client.delete_topics([DOOMED], operation_timeout=30))
    return len(main)


def _admin_calls(bootstrap: str) -> None:
    client = admin(bootstrap)  # must outlive its futures
    topic = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    _done(client.describe_configs([topic, ConfigResource(ConfigResource.Type.BROKER, "1")]))
    retention = ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)
    _done(
        client.incremental_alter_configs(
            [ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=[retention])]
        )
    )
    _done(client.create_partitions([NewPartitions(TOPIC, 4)], operation_timeout=30))
    wait_for_topic(bootstrap, TOPIC, 4)
    _done(client.list_offsets({TopicPartition(TOPIC, p): OffsetSpec.latest() for p in range(4)}))
    _done({0: client.describe_cluster()})
    _done({0: client.list_consumer_groups()})


def _confluent_group(bootstrap: str, expected: int) -> None:
    member = group_consumer(bootstrap, GROUPS[0], [TOPIC])
    try:
        poll_all([member], lambda: len(member.records) >= expected, "confluent group consumer")
        member.consumer.commit(asynchronous=False)
    finally:
        member.consumer.close()


def _kafka_python_group(bootstrap: str, expected: int) -> None:
    consumer = KafkaConsumer(
        TOPIC,
        bootstrap_servers=bootstrap,
        group_id=GROUPS[1],
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        got = 0
        deadline = time.monotonic() + DEADLINE_S
        while got < expected:
            assert time.monotonic() < deadline, "kafka-python group consumer got stuck"
            got += sum(len(m) for m in consumer.poll(timeout_ms=200).values())
        consumer.commit()
    finally:
        consumer.close()


def _aiokafka_group(bootstrap: str, expected: int) -> None:
    async def run() -> None:
        consumer = AIOKafkaConsumer(
            TOPIC,
            bootstrap_servers=bootstrap,
            group_id=GROUPS[2],
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            got = 0
            deadline = time.monotonic() + DEADLINE_S
            while got < expected:
                assert time.monotonic() < deadline, "aiokafka group consumer got stuck"
                batches = await consumer.getmany(timeout_ms=200)
                got += sum(len(m) for m in batches.values())
            await consumer.commit()
        finally:
            await consumer.stop()

    asyncio.run(run())
