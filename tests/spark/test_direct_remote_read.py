"""`remoteStorage.directRead`: a batch read of a tiered topic (the `file` remote storage
manager) whose history left the broker's disk plans one task per remote segment below the
local log start, reads those from the store, and returns exactly the rows, in the same
order per partition, as the read through the brokers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.spark.arrow import arrow_schema
from moldau.spark.options import parse_read_options
from moldau.spark.reader import MoldauBatchReader, RemoteSegmentPartition
from moldau.spark.remote_plan import local_log_starts
from moldau.spark.remote_read import read_segment
from moldau.testing import broker
from moldau.testing.process import BrokerProcess
from tests.integration.txn_helpers import send_txn, txn_producer
from tests.spark.clients import produce
from tests.tiered.test_tiered_broker import TIERED, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TOPIC = "spark-direct"
PARTITIONS = (0, 1)
ROUNDS = 8
PER_PARTITION = ROUNDS * 20


@pytest.fixture(scope="module")
def remote_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("remote")


@pytest.fixture(scope="module")
def tiered(remote_dir: Path) -> Iterator[BrokerProcess]:
    """A broker with a 2-partition tiered topic whose first segments are only remote."""
    with broker(
        **{
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": "file",
            "rsm.config.dir": str(remote_dir),
            "remote.log.manager.task.interval.ms": "200",
            "log.retention.check.interval.ms": "200",
            "remote.log.metadata.topic.num.partitions": "2",
        }
    ) as b:
        b.create_topic(
            TOPIC, len(PARTITIONS), **{k.replace(".", "_"): v for k, v in TIERED.items()}
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


def options(b: BrokerProcess, remote_dir: Path, direct: bool, topic: str = TOPIC) -> dict[str, str]:
    opts = {"kafka.bootstrap.servers": b.bootstrap, "subscribe": topic}
    if direct:
        opts |= {
            "remoteStorage.directRead": "true",
            "remote.log.storage.manager.class.name": "file",
            "rsm.config.dir": str(remote_dir),
        }
    return opts


def per_partition(spark, opts: dict[str, str]) -> dict[int, list[tuple]]:
    """Rows in the order Spark returns them, split by partition (order kept)."""
    out: dict[int, list[tuple]] = {}
    for r in spark.read.format("moldau").options(**opts).load().collect():
        out.setdefault(r["partition"], []).append(
            (r["offset"], r["key"], r["value"], r["timestamp"])
        )
    return out


def test_direct_read_equals_the_broker_read(spark, tiered, remote_dir) -> None:
    via_brokers = per_partition(spark, options(tiered, remote_dir, direct=False))
    direct = per_partition(spark, options(tiered, remote_dir, direct=True))
    assert all(len(via_brokers[p]) == PER_PARTITION for p in PARTITIONS)
    assert [o for o, *_ in via_brokers[0]] == list(range(PER_PARTITION))
    assert direct == via_brokers


def test_remote_segments_are_planned_below_the_local_start(tiered, remote_dir) -> None:
    opts = parse_read_options(options(tiered, remote_dir, direct=True), streaming=False)
    planned = MoldauBatchReader(opts).partitions()
    local = local_log_starts(opts.client, [(TOPIC, p) for p in PARTITIONS])
    assert local == {(TOPIC, p): local_start(tiered, p) for p in PARTITIONS}
    for p in PARTITIONS:
        ranges = [t for t in planned if t.range.partition == p]
        remote = [t for t in ranges if isinstance(t, RemoteSegmentPartition)]
        assert len(remote) >= 2, "one task per remote segment"
        assert all(t.range.end <= local[(TOPIC, p)] for t in remote)
        bounds = [(t.range.start, t.range.end) for t in ranges]
        assert bounds[0][0] == 0 and bounds[-1][1] == PER_PARTITION
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:], strict=False))
        assert not isinstance(ranges[-1], RemoteSegmentPartition)  # the local tail


def test_remote_tasks_read_the_store(spark, tiered, tmp_path) -> None:
    """Pointed at an empty store, the direct read fails: its tasks do not go to a broker."""
    with pytest.raises(Exception, match="no remote segment"):
        per_partition(spark, options(tiered, tmp_path, direct=True))


def test_read_committed_reads_aborted_segments_through_a_broker(spark, tiered, remote_dir) -> None:
    """A remote segment with an aborted transaction: under read_committed its task reads
    from the first transactional batch on through a broker (which drops the aborted
    records), under read_uncommitted all from the store; either way the rows are those of
    the read through the brokers."""
    topic = "spark-direct-txn"
    tiered.create_topic(topic, 1, **{k.replace(".", "_"): v for k, v in TIERED.items()})
    plain = [(0, None, b"plain-%03d-" % i * 5) for i in range(20)]
    for _ in range(3):
        produce(tiered.bootstrap, topic, plain)
    producer = txn_producer(tiered.bootstrap, "spark-direct-txn")
    send_txn(producer, topic, [(0, b"aborted-%d" % i) for i in range(20)], commit=False)
    send_txn(producer, topic, [(0, b"committed-%d" % i) for i in range(20)], commit=True)
    for _ in range(4):
        produce(tiered.bootstrap, topic, plain)
    wait_for(lambda: local_start(tiered, 0, topic) > 110, "the transactions to leave the disk")
    for isolation in ("read_committed", "read_uncommitted"):
        opts = options(tiered, remote_dir, direct=True, topic=topic)
        opts["kafka.isolation.level"] = isolation
        direct = per_partition(spark, opts)
        brokers = options(tiered, remote_dir, direct=False, topic=topic)
        via_brokers = per_partition(spark, {**brokers, "kafka.isolation.level": isolation})
        assert direct == via_brokers != {}
        aborted = [v for _, _, v, _ in direct[0] if v.startswith(b"aborted")]
        assert len(aborted) == (20 if isolation == "read_uncommitted" else 0)
        assert sum(v.startswith(b"committed") for _, _, v, _ in direct[0]) == 20
    parsed = parse_read_options(options(tiered, remote_dir, True, topic), streaming=False)
    remote = [
        t for t in MoldauBatchReader(parsed).partitions() if isinstance(t, RemoteSegmentPartition)
    ]
    assert parsed.remote is not None and remote
    txn = [t for t in remote if t.range.start <= 60 < t.range.end]
    assert len(txn) == 1, "the aborted transaction starts at offset 60, in a remote segment"

    def direct_read(t: RemoteSegmentPartition, read_committed: bool) -> tuple[list, list]:
        """The values read from the store, and the ranges handed to a broker."""
        assert parsed.remote is not None
        handed: list[tuple[int, int]] = []

        def broker_read(r):  # noqa: ANN001, ANN202
            handed.append((r.start, r.end))
            return iter(())

        batches = read_segment(
            parsed.remote,
            t.segment,
            t.range,
            read_committed=read_committed,
            schema=arrow_schema(False),
            broker_read=broker_read,
        )
        return [v for b in batches for v in b.column("value").to_pylist()], handed

    values, handed = direct_read(txn[0], read_committed=True)
    assert handed == [(60, txn[0].range.end)]  # from the first transactional batch on
    assert len(values) == 60 - txn[0].range.start and not any(v.startswith(b"a") for v in values)
    values, handed = direct_read(txn[0], read_committed=False)
    assert handed == [] and sum(v.startswith(b"aborted") for v in values) == 20
