"""Broker-side recompression to the topic's ``compression.type`` (Kafka's LogValidator):
batches land on disk in the topic's codec, producer ids and sequences intact, and every
record comes back through clients other than the producer's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from moldau.protocol.client import NetworkClient
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from moldau.records.batch import read_batch_header
from moldau.records.compression import Compression
from moldau.testing import BrokerProcess
from tests.integration.helpers import (
    FreshBroker,
    assert_log_matches,
    consume_kafka_python,
    consume_kcat,
    create_topic,
    make_records,
    produce_confluent,
)


def disk_batches(data_dir: Path, topic: str) -> list[tuple[int, int, int]]:
    """(codec, producer id, record count) of every batch in the topic's segment files."""
    out = []
    for log in sorted(data_dir.glob(f"{topic}-*/*.log")):
        data = log.read_bytes()
        pos = 0
        while pos < len(data):
            info = read_batch_header(data, pos)
            out.append((info.compression, info.producer_id, info.record_count))
            pos = info.end_position
    return out


@pytest.mark.parametrize(
    ("producer_codec", "topic_config", "on_disk"),
    [
        ("lz4", {"compression.type": "zstd", "compression.zstd.level": "9"}, Compression.ZSTD),
        ("snappy", {"compression.type": "uncompressed"}, Compression.NONE),
        ("none", {"compression.type": "gzip", "compression.gzip.level": "1"}, Compression.GZIP),
        ("gzip", {"compression.type": "producer"}, Compression.GZIP),
    ],
)
def test_batches_are_stored_in_the_topic_codec(
    broker: BrokerProcess,
    topic: str,
    producer_codec: str,
    topic_config: dict[str, str],
    on_disk: Compression,
) -> None:
    create_topic(broker.bootstrap, topic, 2, topic_config)
    records = make_records(400, seed=19, text=True)
    acked = produce_confluent(
        broker.bootstrap, topic, records, producer_codec, **{"enable.idempotence": True}
    )
    batches = disk_batches(broker.data_dir, topic)
    assert {codec for codec, _, _ in batches} == {on_disk}
    assert all(producer_id >= 0 for _, producer_id, _ in batches), "producer id lost"
    assert sum(count for _, _, count in batches) == len(records)
    assert_log_matches(records, consume_kafka_python(broker.bootstrap, topic), acked=acked)
    assert_log_matches(records, consume_kcat(broker.bootstrap, topic), acked=acked)


def test_broker_default_compression_type_applies_to_new_topics(
    fresh_broker: FreshBroker, topic: str
) -> None:
    b = fresh_broker({"compression.type": "zstd"})
    create_topic(b.bootstrap, topic, 1)
    records = make_records(200, seed=20, text=True)
    acked = produce_confluent(b.bootstrap, topic, records, "snappy")
    assert {codec for codec, _, _ in disk_batches(b.data_dir, topic)} == {Compression.ZSTD}
    assert_log_matches(records, consume_kcat(b.bootstrap, topic), acked=acked)


def fetch_errors(bootstrap: str, topic: str, versions: list[int]) -> list[tuple[int, bool]]:
    """(error code, records returned?) of partition 0 for a raw consumer Fetch per version."""
    host, port = bootstrap.rsplit(":", 1)
    request = FetchRequest(
        max_wait_ms=0,
        min_bytes=1,
        topics=[
            FetchTopic(
                topic=topic, partitions=[FetchPartition(partition=0, partition_max_bytes=1 << 20)]
            )
        ],
    )

    async def run() -> list[tuple[int, bool]]:
        client = NetworkClient("old-consumer", request_timeout_ms=10_000)
        try:
            out = []
            for version in versions:
                response = await client.send((host, int(port)), request, version)
                data = response.responses[0].partitions[0]
                out.append((data.error_code, bool(data.records)))
            return out
        finally:
            client.close()

    return asyncio.run(run())


def test_a_fetch_below_v10_of_a_zstd_topic_is_refused(broker: BrokerProcess, topic: str) -> None:
    """KIP-110: a consumer older than Fetch v10 cannot decode zstd; Kafka answers
    UNSUPPORTED_COMPRESSION_TYPE for a topic whose compression.type is zstd."""
    plain = f"{topic}-producer"
    create_topic(broker.bootstrap, topic, 1, {"compression.type": "zstd"})
    create_topic(broker.bootstrap, plain, 1, {"compression.type": "producer"})
    for name in (topic, plain):
        produce_confluent(broker.bootstrap, name, make_records(20, seed=21, text=True), "lz4")
    unsupported = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert fetch_errors(broker.bootstrap, topic, [4, 9, 10, 12]) == [
        (unsupported, False),
        (unsupported, False),
        (ErrorCode.NONE, True),
        (ErrorCode.NONE, True),
    ]
    assert fetch_errors(broker.bootstrap, plain, [4, 9]) == [(ErrorCode.NONE, True)] * 2


def test_big_batches_are_recompressed_off_the_event_loop(broker: BrokerProcess, topic: str) -> None:
    """Batches over RECOMPRESS_INLINE_MAX take the worker-thread path: same outcome."""
    create_topic(broker.bootstrap, topic, 1, {"compression.type": "zstd"})
    records = make_records(2000, seed=22, text=True)
    big = {"batch.num.messages": 5000, "linger.ms": 300, "batch.size": 4 << 20}
    acked = produce_confluent(broker.bootstrap, topic, records, "lz4", **big)
    batches = disk_batches(broker.data_dir, topic)
    assert {codec for codec, _, _ in batches} == {Compression.ZSTD}
    assert max(count for _, _, count in batches) >= 500, "big batches were produced"
    assert_log_matches(records, consume_kafka_python(broker.bootstrap, topic), acked=acked)
