"""Plain confluent-kafka helpers: the data source is judged by an independent client."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int = 0


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions)])[name].result(30)


def produce(
    bootstrap: str,
    topic: str,
    rows: list[tuple[int, bytes | None, bytes | None]],
    *,
    headers: list[tuple[str, bytes]] | None = None,
    timestamps: list[int] | None = None,
    config: dict[str, str] | None = None,
) -> list[Rec]:
    """Produce `(partition, key, value)` rows; returns them with their acknowledged offsets.

    `config` adds producer settings (e.g. `compression.type`)."""
    acked: list[Rec] = []
    failed: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg) -> None:  # noqa: ANN001
        if err is not None:
            failed.append(err)
            return
        ts = msg.timestamp()[1]
        acked.append(
            Rec(
                msg.partition(),
                msg.offset(),
                msg.key(),
                msg.value(),
                tuple(headers or ()),
                ts,
            )
        )

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **(config or {})})
    for i, (partition, key, value) in enumerate(rows):
        extra = {"timestamp": timestamps[i]} if timestamps else {}
        producer.produce(
            topic,
            value,
            key,
            partition=partition,
            headers=headers,
            on_delivery=on_delivery,
            **extra,
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not failed, failed
    return sorted(acked, key=lambda r: (r.partition, r.offset))


def consume_all(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[Rec]:
    """Every record in `topic` (all partitions, start to end), ordered by partition, offset.

    Under read_committed aborted records are dropped, and it first waits for every
    transaction to be complete (no transaction may be left open).
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "verify",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        if isolation == "read_committed":
            wait_stable(bootstrap, topic, len(meta.partitions))
        found: list[Rec] = []
        for p in sorted(meta.partitions):
            tp = TopicPartition(topic, p)
            low, high = consumer.get_watermark_offsets(tp, timeout=30, cached=False)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            at_end = False
            while not at_end:
                for m in consumer.consume(1000, timeout=5):
                    if m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF:
                        at_end = m.offset() >= high
                        continue
                    assert m.error() is None, m.error()
                    found.append(
                        Rec(
                            p,
                            m.offset(),
                            m.key(),
                            m.value(),
                            tuple(m.headers() or ()),
                            m.timestamp()[1],
                        )
                    )
        return found
    finally:
        consumer.close()


def transaction(
    bootstrap: str, transactional_id: str, topic: str, rows: list[tuple[int, bytes]]
) -> Producer:
    """Begin a transaction, produce `(partition, value)` rows and flush; the caller ends it."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 600_000,  # stays open across slow Spark queries
        }
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    for partition, value in rows:
        producer.produce(topic, value, partition=partition)
    assert producer.flush(60) == 0
    return producer


def wait_stable(bootstrap: str, topic: str, partitions: int, timeout: float = 60) -> None:
    """Until every partition's last stable offset reaches its high watermark.

    A transaction's commit returns before its markers are written; readers under
    read_committed see its records only once they are.
    """
    committed = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify"})
    dirty = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "verify",
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        deadline = time.monotonic() + timeout
        for p in range(partitions):
            tp = TopicPartition(topic, p)
            while True:
                lso = committed.get_watermark_offsets(tp, timeout=30, cached=False)[1]
                if lso >= dirty.get_watermark_offsets(tp, timeout=30, cached=False)[1]:
                    break
                assert time.monotonic() < deadline, f"{topic}-{p}: LSO stuck at {lso}"
                time.sleep(0.05)
    finally:
        committed.close()
        dirty.close()
