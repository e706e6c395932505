"""Real Kafka clients against one real broker: every codec, every client, both directions.

Each test produces to its own topic and reads it back with assign() from the log start
(no group), then checks the whole log: every acknowledged record, same bytes and headers,
produce order per partition, nothing extra, offsets contiguous from 0.
"""

from __future__ import annotations

import dataclasses
import random
import shutil
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_END, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from moldau.protocol.errors import ErrorCode
from moldau.testing import BrokerProcess
from tests.integration.helpers import (
    CODECS,
    CONSUMERS,
    KCAT_HEADER,
    PRODUCE_VERSION,
    PRODUCERS,
    RawClient,
    Rec,
    assert_log_matches,
    batch_of,
    confluent_consumer,
    confluent_producer,
    consume_confluent,
    create_topic,
    delete_topic,
    init_producer_id,
    make_records,
    partition_results,
    produce_confluent,
    produce_request,
    topic_partitions,
    wait_until,
    watermarks,
)

CLIENTS = list(PRODUCERS)
PARTITIONS = 6
N_RECORDS = 2000

needs_kcat = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")


def records_for(client: str, n: int, seed: int) -> list[Rec]:
    """kcat takes text lines and can only stamp one fixed header on every record."""
    if client != "kcat":
        return make_records(n, seed=seed)
    return [
        dataclasses.replace(r, headers=(KCAT_HEADER,))
        for r in make_records(n, seed=seed, text=True, headers=False)
    ]


def client_param(*values: str) -> object:
    marks = [needs_kcat] if "kcat" in values else []
    return pytest.param(*values, marks=marks, id="-".join(values))


@pytest.mark.parametrize(("client", "codec"), [client_param(c, z) for c in CLIENTS for z in CODECS])
def test_roundtrip(broker: BrokerProcess, topic: str, client: str, codec: str) -> None:
    create_topic(broker.bootstrap, topic, PARTITIONS)
    records = records_for(client, N_RECORDS, seed=CLIENTS.index(client) * 10 + CODECS.index(codec))
    acked = PRODUCERS[client](broker.bootstrap, topic, records, codec)
    consumed = CONSUMERS[client](broker.bootstrap, topic)
    assert_log_matches(records, consumed, acked=acked)
    assert len(consumed) == PARTITIONS
    assert sum(1 for gots in consumed.values() if gots) > 1, "keys all hashed to one partition"


CROSS = [
    ("kafka-python", "snappy", "confluent"),  # xerial-framed snappy read by librdkafka
    ("confluent", "snappy", "kafka-python"),  # raw snappy read by the Python clients
    ("confluent", "snappy", "aiokafka"),
    ("aiokafka", "lz4", "confluent"),
    ("confluent", "lz4", "kafka-python"),
    ("kafka-python", "gzip", "aiokafka"),
    ("aiokafka", "zstd", "kafka-python"),
    ("kcat", "zstd", "kafka-python"),
    ("confluent", "gzip", "kcat"),
]


@pytest.mark.parametrize(
    ("producer", "codec", "consumer"), [client_param(*cross) for cross in CROSS]
)
def test_cross_client(
    broker: BrokerProcess, topic: str, producer: str, codec: str, consumer: str
) -> None:
    create_topic(broker.bootstrap, topic, PARTITIONS)
    if "kcat" in (producer, consumer):
        # kcat reads and prints text: text records, and kcat's header when it produces.
        records = make_records(500, seed=7, text=True, headers=producer != "kcat")
        if producer == "kcat":
            records = [dataclasses.replace(r, headers=(KCAT_HEADER,)) for r in records]
    else:
        records = make_records(N_RECORDS // 2, seed=7)
    acked = PRODUCERS[producer](broker.bootstrap, topic, records, codec)
    consumed = CONSUMERS[consumer](broker.bootstrap, topic)
    assert_log_matches(records, consumed, acked=acked)


def test_records_larger_than_the_fetch_limits(broker: BrokerProcess, topic: str) -> None:
    """KIP-74: a batch bigger than max.partition.fetch.bytes (1 MiB by default in every
    client) is still returned whole, so consumers make progress."""
    create_topic(broker.bootstrap, topic, 1, {"max.message.bytes": str(8 << 20)})
    rnd = random.Random(9)
    records = [
        Rec(b"big-%d" % i, b"v%07d-" % i + rnd.randbytes(size), partition=0)
        for i, size in enumerate([3 << 20, 10, 1 << 20, 2 << 20])
    ]
    acked = produce_confluent(broker.bootstrap, topic, records, **{"message.max.bytes": 8 << 20})
    for consumer in ("confluent", "kafka-python", "aiokafka"):
        assert_log_matches(records, CONSUMERS[consumer](broker.bootstrap, topic), acked=acked)


def test_seek_into_the_middle_of_batches(broker: BrokerProcess, topic: str) -> None:
    """A fetch from any offset (inside a compressed batch, at a batch or segment boundary)
    starts the consumer exactly there."""
    create_topic(broker.bootstrap, topic, 1, {"segment.bytes": "60000"})
    records = [dataclasses.replace(r, partition=0) for r in make_records(1500, seed=16)]
    acked = produce_confluent(broker.bootstrap, topic, records, "lz4")
    by_offset = {offset: value for value, (_, offset) in acked.items()}
    segment_bases = sorted(
        int(p.stem) for p in (broker.data_dir / f"{topic}-0").iterdir() if p.suffix == ".log"
    )
    assert len(segment_bases) > 2, "expected several segments"
    targets = sorted(
        {0, 1, 249, 250, 251, 777, 1498, 1499, *segment_bases, *(b - 1 for b in segment_bases[1:])}
    )
    # A re-assign waits for the fetch parked at the log end: keep that wait short.
    consumer = confluent_consumer(broker.bootstrap, **{"fetch.wait.max.ms": 10})
    try:
        for offset in targets:
            consumer.assign([TopicPartition(topic, 0, offset)])
            (msg,) = consumer.consume(1, timeout=10)
            assert (msg.error(), msg.offset(), msg.value()) == (None, offset, by_offset[offset])
    finally:
        consumer.close()
    kp = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        tp = KpTopicPartition(topic, 0)
        kp.assign([tp])
        for offset in targets:
            kp.seek(tp, offset)
            msgs = []
            deadline = time.monotonic() + 10
            while not msgs and time.monotonic() < deadline:
                msgs = kp.poll(timeout_ms=500, max_records=1).get(tp, [])
            assert [(m.offset, m.value) for m in msgs] == [(offset, by_offset[offset])]
    finally:
        kp.close()


# --- ListOffsets -----------------------------------------------------------------------------


def test_offsets_for_times(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 1)
    t0 = 1_700_000_000_000
    n = 30
    records = [
        dataclasses.replace(r, timestamp=t0 + 1000 * i, partition=0)
        for i, r in enumerate(make_records(n, seed=3))
    ]
    # Three produce calls, so the lookups cross batch (and index entry) boundaries.
    acked = {}
    for part in (records[:10], records[10:20], records[20:]):
        acked.update(produce_confluent(broker.bootstrap, topic, part))
    consumed = consume_confluent(broker.bootstrap, topic)
    assert_log_matches(records, consumed, acked=acked, check_timestamps=True)
    assert watermarks(broker.bootstrap, topic) == {0: (0, n)}

    # query timestamp -> first offset whose timestamp is >= it (-1: none)
    queries = {t0 - 5000: 0, t0: 0, t0 + 1: 1, t0 + 999: 1, t0 + 1000: 1, t0 + 14_500: 15}
    queries |= {t0 + 1000 * (n - 1): n - 1, t0 + 1000 * (n - 1) + 1: -1, t0 + 10**9: -1}

    consumer = confluent_consumer(broker.bootstrap)
    try:
        answers = {}
        for ts in queries:
            (tp,) = consumer.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)
            assert tp.error is None, tp.error
            answers[ts] = tp.offset
        assert answers == {ts: (OFFSET_END if o == -1 else o) for ts, o in queries.items()}
    finally:
        consumer.close()

    kp = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        tp = KpTopicPartition(topic, 0)
        for ts, want in queries.items():
            got = kp.offsets_for_times({tp: ts})[tp]
            if want == -1:
                assert got is None, (ts, got)
            else:
                assert (got.offset, got.timestamp) == (want, t0 + 1000 * want), ts
        assert kp.beginning_offsets([tp]) == {tp: 0}
        assert kp.end_offsets([tp]) == {tp: n}
    finally:
        kp.close()


# --- idempotence -----------------------------------------------------------------------------


def test_replayed_idempotent_batch_is_written_once(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 1)
    records = make_records(7, seed=11)
    first, second = records[:3], records[3:5]
    with RawClient(broker.bootstrap) as raw:
        pid, epoch = init_producer_id(raw)

        def send(recs: list[Rec], sequence: int) -> tuple[int, int]:
            batch = batch_of(
                recs,
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=sequence,
            )
            result = partition_results(
                raw.request(produce_request(topic, {0: batch}), PRODUCE_VERSION)
            )[0]
            return result.error_code, result.base_offset

        assert send(first, 0) == (0, 0)
        assert send(first, 0) == (0, 0), "a replayed batch must be acked at its first offset"
        assert send(second, 3) == (0, 3)
        assert send(second, 3) == (0, 3)
        error, _ = send(records[5:], 9)  # sequence gap: 5 expected
        assert error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert send(records[5:], 5) == (0, 5), "the gap must not poison the sequence"
    consumed = consume_confluent(broker.bootstrap, topic)
    assert_log_matches(records, consumed)


def test_idempotent_producer_exactly_once(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, PARTITIONS)
    records = make_records(N_RECORDS, seed=12)
    acked = produce_confluent(
        broker.bootstrap,
        topic,
        records,
        "lz4",
        **{"enable.idempotence": True, "max.in.flight.requests.per.connection": 5},
    )
    assert_log_matches(records, consume_confluent(broker.bootstrap, topic), acked=acked)


# --- topics ----------------------------------------------------------------------------------


def partition_dirs(data_dir: Path, topic: str) -> list[Path]:
    return [p for p in data_dir.iterdir() if p.name.startswith(f"{topic}-")]


def test_delete_and_recreate_topic(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 3, {"file.delete.delay.ms": "0"})
    records = make_records(300, seed=13)
    produce_confluent(broker.bootstrap, topic, records)
    assert sorted(p.name for p in partition_dirs(broker.data_dir, topic)) == [
        f"{topic}-{p}" for p in range(3)
    ]

    delete_topic(broker.bootstrap, topic)
    wait_until(lambda: topic_partitions(broker.bootstrap, topic) is None, "topic to go")
    wait_until(lambda: not partition_dirs(broker.data_dir, topic), "partition dirs to go")

    create_topic(broker.bootstrap, topic, 2)
    assert watermarks(broker.bootstrap, topic) == {0: (0, 0), 1: (0, 0)}
    again = make_records(100, seed=14)
    acked = produce_confluent(broker.bootstrap, topic, again)
    assert_log_matches(again, consume_confluent(broker.bootstrap, topic), acked=acked)


def test_auto_topic_creation(broker: BrokerProcess, topic: str) -> None:
    assert topic_partitions(broker.bootstrap, topic) is None
    records = make_records(200, seed=15)
    acked = produce_confluent(broker.bootstrap, topic, records)
    assert topic_partitions(broker.bootstrap, topic) == 3  # the fixture's num.partitions
    assert_log_matches(records, consume_confluent(broker.bootstrap, topic), acked=acked)


# --- long poll -------------------------------------------------------------------------------


def test_fetch_long_poll_wakes_on_produce(broker: BrokerProcess, topic: str) -> None:
    """A fetch parked for up to fetch.wait.max.ms is answered when a record arrives.

    The consume() call is shorter than the fetch wait: a broker that held the fetch for its
    whole max wait would make the record miss that call.
    """
    create_topic(broker.bootstrap, topic, 1)
    consumer = confluent_consumer(broker.bootstrap, **{"fetch.wait.max.ms": 30000})
    producer = confluent_producer(broker.bootstrap, **{"linger.ms": 0})
    events: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        assert consumer.consume(10, timeout=1.0) == []  # connected, fetch now parked

        def produce_later() -> None:
            time.sleep(0.2)
            producer.produce(topic, key=b"k", value=b"wake-up", partition=0)
            producer.flush(10)
            events.append("produced")

        thread = threading.Thread(target=produce_later)
        events.append("consume started")
        thread.start()
        messages = consumer.consume(1, timeout=15.0)
        events.append(f"consume returned {len(messages)}")
        thread.join()
        assert [(m.error(), m.value(), m.offset()) for m in messages] == [(None, b"wake-up", 0)]
        assert events[0] == "consume started"
        assert "produced" in events
    finally:
        consumer.close()
