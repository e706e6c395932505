"""Many partitions under a low descriptor limit (issue 14), with real clients.

The broker runs with RLIMIT_NOFILE 256 (soft and hard). The old design kept five
descriptors per partition (``.log``, two indexes and the two their mmaps duplicated) and
could hold about 45 partitions; this one holds 600 partitions in a working set of 128
cached files, serves each of them, answers a CreateTopics beyond its limit with a clean
Kafka error while it keeps serving, and comes back complete after kill -9.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from moldau.testing import BrokerProcess
from tests.integration.helpers import (
    DEADLINE_S,
    admin,
    confluent_consumer,
    confluent_producer,
    topic_partitions,
    wait_until,
)

NOFILE = 256
TOPICS = 60
PARTITIONS = 10  # per topic: 600 partitions, 5 descriptors each in the old design
OLD_DESIGN_DESCRIPTORS = 5


def descriptors(b: BrokerProcess) -> int:
    assert b.proc is not None
    return len(os.listdir(f"/proc/{b.proc.pid}/fd"))


@pytest.fixture
def broker(tmp_path: Path):
    b = BrokerProcess(tmp_path / "data", {"num.partitions": "1"}, open_files_limit=NOFILE)
    b.start()
    yield b
    b.close()


def create_topics(bootstrap: str, names: list[str], partitions: int) -> dict[str, Any]:
    """CreateTopics for ``names``; returns name -> None or the KafkaError."""
    client = admin(bootstrap)
    futures = client.create_topics(
        [NewTopic(name, partitions, 1) for name in names], operation_timeout=30
    )
    out: dict[str, Any] = {}
    for name, future in futures.items():
        try:
            future.result(timeout=60)
            out[name] = None
        except KafkaException as e:
            out[name] = e.args[0]
    return out


def produce_one_each(bootstrap: str, topics: list[str], tag: str) -> dict[tuple[str, int], bytes]:
    producer = confluent_producer(bootstrap, **{"linger.ms": 20, "acks": "all"})
    errors: list[Any] = []
    sent = {}
    for topic in topics:
        for p in range(PARTITIONS):
            value = f"{tag}:{topic}:{p}".encode()
            sent[(topic, p)] = value
            producer.produce(
                topic, value, partition=p, on_delivery=lambda e, _m: e and errors.append(e)
            )
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0
    assert errors == []
    return sent


def consume_all(bootstrap: str, topics: list[str], expected: int) -> dict[tuple[str, int], list]:
    """Every record of every partition from the beginning, with one consumer."""
    consumer = confluent_consumer(bootstrap)
    consumer.assign(
        [TopicPartition(t, p, OFFSET_BEGINNING) for t in topics for p in range(PARTITIONS)]
    )
    got: dict[tuple[str, int], list] = {}
    count = 0
    deadline = time.monotonic() + 2 * DEADLINE_S
    try:
        while count < expected and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=1.0):
                assert msg.error() is None, msg.error()
                got.setdefault((msg.topic(), msg.partition()), []).append(
                    (msg.offset(), msg.value())
                )
                count += 1
    finally:
        consumer.close()
    return got


def test_many_partitions_under_a_low_descriptor_limit(broker: BrokerProcess) -> None:
    assert TOPICS * PARTITIONS * OLD_DESIGN_DESCRIPTORS > 5 * NOFILE
    assert any("open-files limit (RLIMIT_NOFILE) is 256" in line for line in broker.output)
    topics = [f"scale-{i:03d}" for i in range(TOPICS)]
    for i in range(0, TOPICS, 10):
        assert set(create_topics(broker.bootstrap, topics[i : i + 10], PARTITIONS).values()) == {
            None
        }
    first = produce_one_each(broker.bootstrap, topics, "first")
    got = consume_all(broker.bootstrap, topics, len(first))
    assert {tp: [v for _, v in records] for tp, records in got.items()} == {
        tp: [v] for tp, v in first.items()
    }
    assert descriptors(broker) < NOFILE

    # Beyond the limit (max.broker.partitions derived, 5 per descriptor: 1,280):
    # a clean error for this topic, nothing on disk, and the broker keeps serving.
    results = create_topics(broker.bootstrap, ["too-big", "small"], 1000)
    assert results["too-big"] is not None and results["small"] is not None
    error = results["too-big"]
    assert error.name() == "POLICY_VIOLATION"
    assert "accepts at most 1280" in error.str()
    assert topic_partitions(broker.bootstrap, "too-big") is None
    assert not list(broker.data_dir.glob("too-big-*"))
    assert create_topics(broker.bootstrap, ["small"], PARTITIONS) == {"small": None}
    second = produce_one_each(broker.bootstrap, [*topics, "small"], "second")

    # kill -9 in that state, and start again under the same limit: everything is back.
    broker.kill()
    broker.start()
    wait_until(lambda: topic_partitions(broker.bootstrap, "small") == PARTITIONS, "restart")
    everything = consume_all(broker.bootstrap, [*topics, "small"], len(first) + len(second))
    for tp, value in second.items():
        expected = [first[tp], value] if tp in first else [value]
        assert [v for _, v in everything.get(tp, [])] == expected, tp
        assert [o for o, _ in everything[tp]] == list(range(len(expected)))
    assert len(everything) == len(second)
    assert descriptors(broker) < NOFILE


def watermarks(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], tuple[int, int]]:
    consumer = confluent_consumer(bootstrap)
    try:
        return {
            (t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=DEADLINE_S)
            for t in topics
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def test_restarts_open_logs_at_their_first_use(tmp_path: Path) -> None:
    """200 partitions: a clean restart registers the logs without opening them and answers
    their offsets from the checkpoints; produce and consume open them; a kill -9 after
    that recovers every acknowledged record."""
    topics = [f"lazy-{i:02d}" for i in range(20)]
    broker = BrokerProcess(tmp_path / "data", {"num.partitions": "1"})
    broker.start()

    def loaded(how: str) -> None:
        """Wait for the load (after a crash the broker listens before it replays its
        metadata, and loads the logs then): every log, the 200 and __consumer_offsets'
        once a consumer asked for its coordinator, registered to open at its first use."""
        pattern = re.compile(rf"loaded (\d+) logs .* \({how} shutdown; (\d+) open at their")
        wait_until(
            lambda: any(
                (m := pattern.search(line)) and int(m[1]) == int(m[2]) >= 200
                for line in broker.output
            ),
            f"the {how} load",
        )

    try:
        assert set(create_topics(broker.bootstrap, topics, PARTITIONS).values()) == {None}
        first = produce_one_each(broker.bootstrap, topics, "first")
        broker.stop()
        broker.start()
        loaded("clean")
        assert set(watermarks(broker.bootstrap, topics).values()) == {(0, 1)}
        second = produce_one_each(broker.bootstrap, topics, "second")
        broker.kill()
        broker.output.clear()
        broker.start()
        loaded("unclean")
        got = consume_all(broker.bootstrap, topics, 2 * len(first))
        assert {tp: [(o, v) for o, v in records] for tp, records in got.items()} == {
            tp: [(0, first[tp]), (1, second[tp])] for tp in first
        }
        assert set(watermarks(broker.bootstrap, topics).values()) == {(0, 2)}
    finally:
        broker.close()
