"""`remoteStorage.directRead`: a batch read of a tiered topic (the `file` remote storage
manager) whose history left the broker's disk plans one task per remote segment below the
local log start, reads those from the store (from the batch holding the first offset asked
for, found with the segment's offset index), and returns exactly the rows, in the same
order per partition, as the read through the brokers."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from moldau.spark.arrow import arrow_schema
from moldau.spark.offsets import OffsetRange
from moldau.spark.options import parse_read_options
from moldau.spark.reader import MoldauBatchReader, RemoteSegmentPartition
from moldau.spark.remote_plan import local_log_starts
from moldau.spark.remote_read import read_segment
from moldau.storage.remote.remote_log_reader import index_position
from moldau.storage.remote.segment import IndexType
from moldau.storage.remote.storage_manager import load_remote_storage_manager
from tests.integration.txn_helpers import send_txn, txn_producer
from tests.spark.clients import produce
from tests.spark.remote_tier import (
    CLASS_NAME,
    PARTITIONS,
    PER_PARTITION,
    TOPIC,
    RecordingFileStorage,
    assert_direct_read_equals_the_broker_read,
    local_start,
    options,
    per_partition,
)
from tests.tiered.test_tiered_broker import TIERED, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return {CLASS_NAME: "file", "rsm.config.dir": str(tmp_path_factory.mktemp("remote"))}


def test_direct_read_equals_the_broker_read(spark, tiered, store) -> None:
    assert_direct_read_equals_the_broker_read(spark, tiered, store)


def test_remote_segments_are_planned_below_the_local_start(tiered, store) -> None:
    opts = parse_read_options(options(tiered, store, direct=True), streaming=False)
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
    empty = {CLASS_NAME: "file", "rsm.config.dir": str(tmp_path)}
    with pytest.raises(Exception, match="no remote segment"):
        per_partition(spark, options(tiered, empty, direct=True))


def test_read_committed_reads_aborted_segments_through_a_broker(spark, tiered, store) -> None:
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
        opts = options(tiered, store, direct=True, topic=topic)
        opts["kafka.isolation.level"] = isolation
        direct = per_partition(spark, opts)
        brokers = options(tiered, store, direct=False, topic=topic)
        via_brokers = per_partition(spark, {**brokers, "kafka.isolation.level": isolation})
        assert direct == via_brokers != {}
        aborted = [v for _, _, v, _ in direct[0] if v.startswith(b"aborted")]
        assert len(aborted) == (20 if isolation == "read_uncommitted" else 0)
        assert sum(v.startswith(b"committed") for _, _, v, _ in direct[0]) == 20
    parsed = parse_read_options(options(tiered, store, True, topic), streaming=False)
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


def test_a_range_from_inside_a_segment_starts_at_its_batch(spark, tiered, store) -> None:
    """startingOffsets inside a remote segment: its task reads from the batch the segment's
    offset index gives for that offset, not from byte 0; the rows are the broker read's."""
    parsed = parse_read_options(options(tiered, store, direct=True), streaming=False)
    segment = next(
        t.segment
        for t in MoldauBatchReader(parsed).partitions()
        if isinstance(t, RemoteSegmentPartition)
        and t.range.partition == 0
        and t.segment.end_offset - t.segment.start_offset >= 30
    )
    # Its last offset: the offset index maps each indexed batch's last offset to where the
    # batch starts, so this one has an entry past byte 0 (20 records a batch).
    start = segment.end_offset
    starting = {"startingOffsets": json.dumps({TOPIC: {"0": start, "1": -2}})}
    direct = per_partition(spark, options(tiered, store, direct=True) | starting)
    assert direct == per_partition(spark, options(tiered, store, direct=False) | starting)
    assert [o for o, *_ in direct[0]] == list(range(start, PER_PARTITION))
    assert len(direct[1]) == PER_PARTITION

    manager = load_remote_storage_manager("file", {"dir": store["rsm.config.dir"]})
    index = manager.fetch_index(segment, IndexType.OFFSET)
    position = index_position(index, segment.start_offset, start)
    assert position > 0
    assert parsed.remote is not None
    recording = replace(
        parsed.remote, class_name=f"{RecordingFileStorage.__module__}:RecordingFileStorage"
    )
    RecordingFileStorage.reads.clear()
    r = OffsetRange(TOPIC, 0, start, segment.end_offset + 1)
    batches = read_segment(
        recording,
        segment,
        r,
        read_committed=False,
        schema=arrow_schema(False),
        broker_read=lambda r: iter(()),
    )
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert offsets == list(range(start, segment.end_offset + 1))
    assert RecordingFileStorage.reads[0] == (segment.start_offset, position)
