"""Helpers of the direct read's tests (`remoteStorage.directRead`): a broker tiering a
2-partition topic to a remote store given by its broker settings, and reads through the
data source with or without the direct path."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

from moldau.storage.remote.file_storage import FileRemoteStorageManager
from moldau.storage.remote.segment import RemoteLogSegmentMetadata
from moldau.testing import broker
from moldau.testing.process import BrokerProcess
from tests.spark.clients import produce
from tests.tiered.test_tiered_broker import TIERED, wait_for

CLASS_NAME = "remote.log.storage.manager.class.name"
TOPIC = "spark-direct"
PARTITIONS = (0, 1)
ROUNDS = 8
PER_PARTITION = ROUNDS * 20


@contextmanager
def tiered_broker(store: dict[str, str]) -> Iterator[BrokerProcess]:
    """A broker tiering to `store` (the class name and `rsm.config.*` settings) with a
    2-partition tiered topic whose first segments are only remote."""
    with broker(
        **{
            "remote.log.storage.system.enable": "true",
            **store,
            "remote.log.manager.task.interval.ms": "200",
            "log.retention.check.interval.ms": "200",
            "remote.log.metadata.topic.num.partitions": "2",
        }
    ) as b:
        # An offset index entry per batch: a read from inside a segment can start there.
        configs = {**TIERED, "index.interval.bytes": "1"}
        b.create_topic(
            TOPIC, len(PARTITIONS), **{k.replace(".", "_"): v for k, v in configs.items()}
        )
        for n in range(ROUNDS):  # several requests: several segments per partition
            rows = [(i % 2, b"k%d" % i, b"direct-%d-%03d-" % (n, i) * 5) for i in range(40)]
            produce(b.bootstrap, TOPIC, rows)
        wait_for(
            lambda: all(local_start(b, p) > 40 for p in PARTITIONS),
            "history to leave the disk",
        )
        yield b


def local_start(b: BrokerProcess, partition: int, topic: str = TOPIC) -> int:
    """Base offset of the first segment on the broker's disk."""
    directory = next(b.data_dir.rglob(f"{topic}-{partition}"))
    return min(int(p.name.split(".")[0]) for p in directory.glob("*.log"))


def options(
    b: BrokerProcess, store: dict[str, str], direct: bool, topic: str = TOPIC
) -> dict[str, str]:
    opts = {"kafka.bootstrap.servers": b.bootstrap, "subscribe": topic}
    if direct:
        opts |= {"remoteStorage.directRead": "true", **store}
    return opts


def per_partition(spark, opts: dict[str, str]) -> dict[int, list[tuple]]:  # noqa: ANN001
    """Rows in the order Spark returns them, split by partition (order kept)."""
    out: dict[int, list[tuple]] = {}
    for r in spark.read.format("moldau").options(**opts).load().collect():
        out.setdefault(r["partition"], []).append(
            (r["offset"], r["key"], r["value"], r["timestamp"])
        )
    return out


def assert_direct_read_equals_the_broker_read(
    spark,  # noqa: ANN001
    b: BrokerProcess,
    store: dict[str, str],
) -> None:
    via_brokers = per_partition(spark, options(b, store, direct=False))
    direct = per_partition(spark, options(b, store, direct=True))
    assert all(len(via_brokers[p]) == PER_PARTITION for p in PARTITIONS)
    assert [o for o, *_ in via_brokers[0]] == list(range(PER_PARTITION))
    assert direct == via_brokers


class RecordingFileStorage(FileRemoteStorageManager):
    """The `file` manager noting where each read of a segment's `.log` starts, as
    (segment start offset, byte position), in the process it runs in."""

    reads: ClassVar[list[tuple[int, int]]] = []

    def fetch_log_segment(
        self,
        metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None = None,
    ) -> bytes:
        self.reads.append((metadata.start_offset, start_position))
        return super().fetch_log_segment(metadata, start_position, end_position)
