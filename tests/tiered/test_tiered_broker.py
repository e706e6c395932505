"""One broker with tiered storage on the ``file`` remote storage manager: segments leave
the disk once copied, every acknowledged record is read back from offset 0 by
confluent-kafka and kafka-python (read_committed too), across kill -9, and deleting the
topic empties the remote store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from moldau.testing import broker
from moldau.testing.clients import ClientHelpers
from moldau.testing.process import BrokerProcess
from tests.integration.txn_helpers import send_txn, txn_producer

DEADLINE_S = 60.0
TOPIC = "tiered"
TIERED = {
    "remote.storage.enable": "true",
    "segment.bytes": "4000",
    "local.retention.bytes": "1",
    "retention.ms": "-1",
    "file.delete.delay.ms": "0",
}


def file_tier_configs(remote_dir: Path, metadata_partitions: int) -> dict[str, str]:
    """Tiered storage in the local directory ``remote_dir`` (the ``file`` remote storage
    manager), the remote log manager's tasks and retention checks every 200 ms."""
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": "file",
        "rsm.config.dir": str(remote_dir),
        "remote.log.manager.task.interval.ms": "200",
        "log.retention.check.interval.ms": "200",
        "remote.log.metadata.topic.num.partitions": str(metadata_partitions),
    }


@pytest.fixture(scope="module")
def remote_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("remote")


@pytest.fixture(scope="module")
def tiered_broker(remote_dir: Path) -> Iterator[BrokerProcess]:
    with broker(**file_tier_configs(remote_dir, 3)) as b:
        yield b


def local_bases(b: BrokerProcess, topic: str) -> list[int]:
    """Base offsets of the segments on the broker's disk."""
    directory = next(b.data_dir.rglob(f"{topic}-0"))
    return sorted(int(p.name.split(".")[0]) for p in directory.glob("*.log"))


def wait_for(condition, what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def read_confluent(b: ClientHelpers, topic: str, isolation: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": b.bootstrap_servers,
            "group.id": "unused",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + DEADLINE_S
        while True:
            assert time.monotonic() < deadline, f"confluent-kafka read {len(values)}"
            msgs = consumer.consume(1000, timeout=0.5)
            if any(m.error() and m.error().code() == KafkaError._PARTITION_EOF for m in msgs):
                values += [m.value() for m in msgs if m.error() is None]
                return values
            for m in msgs:
                assert m.error() is None, str(m.error())
                values.append(m.value())
    finally:
        consumer.close()


def read_kafka_python(b: ClientHelpers, topic: str, isolation: str) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=b.bootstrap_servers, isolation_level=isolation, enable_auto_commit=False
    )
    values: list[bytes] = []
    try:
        tp = KpTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        end = consumer.end_offsets([tp])[tp]
        deadline = time.monotonic() + DEADLINE_S
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"kafka-python read {len(values)}"
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
    finally:
        consumer.close()
    return values


def test_every_record_comes_back_from_the_remote_tier(
    tiered_broker: BrokerProcess, remote_dir: Path
) -> None:
    b = tiered_broker
    b.create_topic(TOPIC, 1, **{k.replace(".", "_"): v for k, v in TIERED.items()})
    acked = [
        r.value for r in b.produce(TOPIC, *(f"plain-{i:05d}-".encode() * 8 for i in range(300)))
    ]
    producer = txn_producer(b.bootstrap, "tiered-txn")
    send_txn(producer, TOPIC, [(0, f"aborted-{i}".encode()) for i in range(20)], commit=False)
    committed = [f"committed-{i}".encode() for i in range(20)]
    send_txn(producer, TOPIC, [(0, v) for v in committed], commit=True)
    more = [r.value for r in b.produce(TOPIC, *(f"tail-{i:05d}-".encode() * 8 for i in range(200)))]
    expected = acked + committed + more
    # copied, then gone from the disk: the first local segment is far from offset 0
    wait_for(lambda: local_bases(b, TOPIC)[0] > 300, "segments to leave the disk")
    assert any(p.suffix == ".log" for p in remote_dir.rglob("*"))
    for isolation in ("read_committed", "read_uncommitted"):
        for read in (read_confluent, read_kafka_python):
            values = read(b, TOPIC, isolation)
            if isolation == "read_committed":
                assert values == expected, (read.__name__, len(values), len(expected))
            else:
                assert [v for v in values if not v.startswith(b"aborted-")] == expected
                assert sum(v.startswith(b"aborted-") for v in values) == 20
    # the CLI shows both tiers (ListOffsets -2, -4, -5); copies may still go on meanwhile
    before = local_bases(b, TOPIC)[0]
    described = subprocess.run(
        [sys.executable, "-m", "moldau", "topics", "describe", TOPIC, "--json"],
        capture_output=True,
        env={**os.environ, "MOLDAU_BOOTSTRAP": b.bootstrap},
        timeout=120,
        check=True,
    )
    (partition,) = json.loads(described.stdout)[0]["partitions"]
    local_start = partition["local_log_start_offset"]
    assert partition["log_start_offset"] == 0
    assert before <= local_start <= local_bases(b, TOPIC)[0]
    assert partition["highest_offset_in_remote_storage"] >= local_start - 1
    assert partition["log_end_offset"] == len(expected) + 20 + 2  # the aborted, 2 markers
    assert partition["local_size_bytes"] > 0
    # the remote size is that of the first `remote_segments` segments in the store (copies
    # finish in offset order; one may be under way)
    objects = sorted(remote_dir.glob(f"{TOPIC}-*/0/*.log"))
    assert 0 < partition["remote_segments"] <= len(objects)
    copied = objects[: partition["remote_segments"]]
    assert partition["remote_size_bytes"] == sum(p.stat().st_size for p in copied)
    table = subprocess.run(
        [sys.executable, "-m", "moldau", "topics", "describe", TOPIC],
        capture_output=True,
        text=True,
        env={**os.environ, "MOLDAU_BOOTSTRAP": b.bootstrap, "COLUMNS": "200"},
        timeout=120,
        check=True,
    )
    assert (
        "REMOTE-SIZE" in table.stdout
        and f"0-{partition['highest_offset_in_remote_storage']}" in table.stdout
    )
    # kill -9: the remote tier and the metadata survive, nothing is lost
    b.kill()
    b.start()
    assert read_confluent(b, TOPIC, "read_committed") == expected
    assert read_kafka_python(b, TOPIC, "read_committed") == expected


def test_deleting_the_topic_empties_the_remote_store(
    tiered_broker: BrokerProcess, remote_dir: Path
) -> None:
    b = tiered_broker
    b.create_topic("doomed", 1, **{k.replace(".", "_"): v for k, v in TIERED.items()})
    for batch in range(10):  # several produce requests: several batches, several segments
        b.produce("doomed", *(f"doomed-{batch}-{i:03d}-".encode() * 8 for i in range(20)))
    wait_for(lambda: any(remote_dir.glob("doomed-*/0/*.log")), "segments of doomed copied")
    b.delete_topic("doomed")
    wait_for(
        lambda: not [p for p in remote_dir.glob("doomed-*/**/*") if p.is_file()],
        "the remote store to be empty of the deleted topic",
    )
