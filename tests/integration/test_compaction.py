"""Log compaction end to end: a compacted topic keeps the latest value of every key, at the
offsets the producer was acknowledged, while the broker's cleaner runs in the background."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from tests.integration.helpers import (
    FreshBroker,
    Got,
    consume_confluent,
    create_topic,
    flatten,
    make_records,
    produce_confluent,
    wait_until,
)

CLEANER_BROKER = {"log.cleaner.backoff.ms": "200"}
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "2000",
    "min.cleanable.dirty.ratio": "0.01",
}


def test_compacted_topic_keeps_latest_value_per_key(fresh_broker: FreshBroker, topic: str) -> None:
    b = fresh_broker(CLEANER_BROKER)
    create_topic(b.bootstrap, topic, 1, COMPACTED)
    records = make_records(600, seed=70, keys=8, headers=False)
    acked = produce_confluent(b.bootstrap, topic, records, **{"batch.num.messages": 10})
    latest = {r.key: r.value for r in records}
    partition_dir = b.data_dir / f"{topic}-0"
    consumed: list[Got] = []

    def compacted() -> bool:
        nonlocal consumed
        active_base = max(int(p.stem) for p in partition_dir.glob("*.log"))
        consumed = flatten(consume_confluent(b.bootstrap, topic))
        below = [g.key for g in consumed if g.offset < active_base]
        return active_base > 0 and len(below) == len(set(below))

    wait_until(compacted, "the cleaner to leave one record per key below the active segment")

    assert len(consumed) < len(records)
    offsets = [g.offset for g in consumed]
    assert offsets == sorted(set(offsets))
    assert offsets[-1] == len(records) - 1  # the log end never moves
    for g in consumed:  # every kept record is an acknowledged one, at its own offset
        assert acked[g.value] == (0, g.offset)
    view = {}
    for g in consumed:
        view[g.key] = g.value
    assert view == latest


def test_group_offsets_survive_compaction_of_consumer_offsets_and_a_restart(
    fresh_broker: FreshBroker, topic: str
) -> None:
    b = fresh_broker(
        {
            **CLEANER_BROKER,
            "offsets.topic.num.partitions": "1",
            "offsets.topic.segment.bytes": "2000",
            "log.cleaner.min.cleanable.ratio": "0.01",
        }
    )
    create_topic(b.bootstrap, topic, 2)
    group = f"{topic}-group"
    consumer = Consumer(
        {"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        for n in range(1, 201):  # 400 commits of 2 partitions; only the last one matters
            consumer.commit(
                offsets=[TopicPartition(topic, 0, n), TopicPartition(topic, 1, 2 * n)],
                asynchronous=False,
            )
    finally:
        consumer.close()
    offsets_dir = b.data_dir / "__consumer_offsets-0"

    def compacted() -> bool:
        sizes = sum(p.stat().st_size for p in offsets_dir.glob("*.log"))
        return len(list(offsets_dir.glob("*.log"))) > 1 and sizes < 200 * 2 * 60

    wait_until(compacted, "the cleaner to compact __consumer_offsets")
    b.restart()
    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=10)
    finally:
        consumer.close()
    assert [(tp.partition, tp.offset) for tp in committed] == [(0, 200), (1, 400)]
