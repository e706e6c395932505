"""Transactional producers and isolation-aware readers for the transaction tests.

Every reader returns ``{partition: [value, ...]}`` read from offset 0 up to the end the
broker reports for the isolation level (the LSO for read_committed, the high watermark
otherwise), so a test compares exactly what each client saw.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

DEADLINE_S = 60.0
Seen = dict[int, list[bytes]]


def values(partitions: int, prefix: str, n: int) -> list[tuple[int, bytes]]:
    """``n`` (partition, value) pairs ``prefix-i``, round robin over ``partitions``."""
    return [(i % partitions, f"{prefix}-{i}".encode()) for i in range(n)]


def by_partition(partitions: int, records: list[tuple[int, bytes]]) -> dict[int, list[bytes]]:
    """The values of ``records`` per partition, in order (what a reader must see)."""
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    for partition, value in records:
        out[partition].append(value)
    return out


def txn_producer(bootstrap: str, transactional_id: str, **config: Any) -> Producer:
    """A confluent-kafka transactional producer, its transactions initialised."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5}
        | config
    )
    producer.init_transactions(DEADLINE_S)
    return producer


def send_txn(
    producer: Producer, topic: str, values: Iterable[tuple[int, bytes]], commit: bool
) -> None:
    """One whole transaction: ``(partition, value)`` records, then commit or abort."""
    producer.begin_transaction()
    for partition, value in values:
        producer.produce(topic, value=value, partition=partition)
    producer.flush(DEADLINE_S)
    if commit:
        producer.commit_transaction(DEADLINE_S)
    else:
        producer.abort_transaction(DEADLINE_S)


def read_confluent(bootstrap: str, topic: str, partitions: int, isolation: str) -> Seen:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "moldau-txn-tests-unused",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    seen: Seen = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + DEADLINE_S
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"confluent-kafka stuck: {at_end}"
            for msg in consumer.consume(1000, timeout=0.5):
                error = msg.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, str(error)
                    at_end.add(msg.partition())
                else:
                    at_end.discard(msg.partition())
                    seen[msg.partition()].append(msg.value())
    finally:
        consumer.close()
    return seen


def read_kafka_python(bootstrap: str, topic: str, partitions: int, isolation: str) -> Seen:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False
    )
    seen: Seen = {p: [] for p in range(partitions)}
    try:
        tps = [KpTopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(tps)
        deadline = time.monotonic() + DEADLINE_S
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "kafka-python stuck"
            for tp, records in consumer.poll(timeout_ms=500).items():
                seen[tp.partition].extend(r.value for r in records)
    finally:
        consumer.close()
    return seen


def read_aiokafka(bootstrap: str, topic: str, partitions: int, isolation: str) -> Seen:
    async def run() -> Seen:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False
        )
        await consumer.start()
        seen: Seen = {p: [] for p in range(partitions)}
        try:
            tps = [AioTopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning()
            ends = await consumer.end_offsets(tps)
            deadline = time.monotonic() + DEADLINE_S
            while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
                assert time.monotonic() < deadline, "aiokafka stuck"
                for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                    seen[tp.partition].extend(r.value for r in records if r.value is not None)
        finally:
            await consumer.stop()
        return seen

    return asyncio.run(run())


READERS = {
    "confluent": read_confluent,
    "kafka-python": read_kafka_python,
    "aiokafka": read_aiokafka,
}


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation: str) -> dict[int, int]:
    """ListOffsets latest under ``isolation`` (the LSO for read_committed)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation)
    try:
        tps = [KpTopicPartition(topic, p) for p in range(partitions)]
        return {tp.partition: offset for tp, offset in consumer.end_offsets(tps).items()}
    finally:
        consumer.close()
