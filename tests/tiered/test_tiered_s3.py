"""One broker tiering to a real S3 server (SeaweedFS): segments go to the bucket; with
the store frozen (SIGSTOP) producing goes on, segments wait on the disk, and copying
resumes by itself when it thaws; every acknowledged record is read back from offset 0;
deleting the topic empties the bucket of its objects."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from moldau.testing import broker
from moldau.testing.clients import ClientHelpers
from moldau.testing.process import BrokerProcess
from moldau.testing.seaweedfs import SeaweedFS
from tests.tiered.test_tiered_broker import TIERED, local_bases, read_confluent, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def s3_broker(seaweedfs: SeaweedFS) -> Iterator[BrokerProcess]:
    with broker(
        **{
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": "s3",
            **seaweedfs.rsm_configs("rsm.config."),
            "rsm.config.storage.s3.api.call.attempt.timeout": "1000",
            "rsm.config.storage.s3.api.call.timeout": "2000",
            "remote.log.manager.task.interval.ms": "200",
            "remote.log.manager.task.retry.backoff.max.ms": "2000",
            "log.retention.check.interval.ms": "200",
            "remote.log.metadata.topic.num.partitions": "3",
        }
    ) as b:
        yield b


def produce_batches(b: ClientHelpers, topic: str, tag: str, batches: int) -> list[bytes]:
    acked = []
    for n in range(batches):  # one produce request each: several segments
        values = (f"{tag}-{n:03d}-{i:02d}-".encode() * 8 for i in range(20))
        acked += [r.value for r in b.produce(topic, *values)]
    return acked


def test_store_frozen_then_thawed_loses_nothing(
    s3_broker: BrokerProcess, seaweedfs: SeaweedFS
) -> None:
    b = s3_broker
    b.create_topic("frozen", 1, **{k.replace(".", "_"): v for k, v in TIERED.items()})
    acked = produce_batches(b, "frozen", "before", 10)
    wait_for(lambda: any(k.endswith(".log") for k in seaweedfs.keys("frozen-")), "first copies")
    seaweedfs.pause()
    try:
        started = time.monotonic()
        frozen_from = len(acked)  # the first offset written while the store is frozen
        acked += produce_batches(b, "frozen", "during", 10)  # producing goes on
        assert time.monotonic() - started < 30
        time.sleep(3)  # copies fail meanwhile; the segments stay on the disk
        # Copies finished before the freeze may still leave the disk; nothing written
        # during it can have been copied, so none of it may be gone.
        assert local_bases(b, "frozen")[0] <= frozen_from
        assert len(local_bases(b, "frozen")) >= 10
    finally:
        seaweedfs.resume()
    # copying resumes by itself; then local retention removes the copied segments
    end = len(acked)
    wait_for(lambda: local_bases(b, "frozen")[0] >= end - 40, "copies to resume", timeout=90)
    assert read_confluent(b, "frozen", "read_committed") == acked
    b.delete_topic("frozen")
    wait_for(lambda: not seaweedfs.keys("frozen-"), "the bucket to be empty of the topic")
