"""The ``moldau`` data source reading tiered partitions whose history is only in the
remote tier (a SeaweedFS bucket): a batch read goes through the brokers' remote reads and
returns every produced record, in order per partition."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from moldau.testing import broker
from moldau.testing.process import BrokerProcess
from moldau.testing.seaweedfs import SeaweedFS
from tests.spark.clients import produce
from tests.tiered.test_tiered_broker import TIERED, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TOPIC = "spark-tiered"


@pytest.fixture(scope="module")
def tiered_broker(seaweedfs: SeaweedFS) -> Iterator[BrokerProcess]:  # noqa: F811
    with broker(
        **{
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": "s3",
            **seaweedfs.rsm_configs("rsm.config."),
            "rsm.config.key.prefix": "spark/",
            "remote.log.manager.task.interval.ms": "200",
            "log.retention.check.interval.ms": "200",
            "remote.log.metadata.topic.num.partitions": "1",
        }
    ) as b:
        yield b


def first_local_offset(b: BrokerProcess, partition: int) -> int:
    directory = next(b.data_dir.rglob(f"{TOPIC}-{partition}"))
    return min(int(p.name.split(".")[0]) for p in directory.glob("*.log"))


def test_batch_read_of_tiered_partitions_returns_every_record(spark, tiered_broker) -> None:
    b = tiered_broker
    b.create_topic(TOPIC, 2, **{k.replace(".", "_"): v for k, v in TIERED.items()})
    produced = []
    for n in range(8):  # several requests: several segments per partition
        rows = [(i % 2, b"k%d" % i, b"tiered-%d-%03d-" % (n, i) * 6) for i in range(40)]
        produced += produce(b.bootstrap, TOPIC, rows)
    wait_for(
        lambda: all(first_local_offset(b, p) > 40 for p in (0, 1)), "history to leave the disk"
    )
    df = (
        spark.read.format("moldau")
        .option("kafka.bootstrap.servers", b.bootstrap)
        .option("subscribe", TOPIC)
        .load()
    )
    got = [(r["partition"], r["offset"], r["key"], r["value"]) for r in df.collect()]
    got.sort(key=lambda r: (r[0], r[1]))
    want = sorted((r.partition, r.offset, r.key, r.value) for r in produced)
    assert got == want
