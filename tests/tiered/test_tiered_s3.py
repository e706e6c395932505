"""One broker tiering to a real S3 server (SeaweedFS): segments go to the bucket; with
the store frozen (SIGSTOP) producing goes on, segments wait on the disk, and copying
resumes by itself when it thaws; with the store killed outright (kill -9, restarted on
the same data and ports) producing goes on, reads of remote data fail for the tiered
partition only and resume by themselves, and what uploads cut short left in the bucket
is deleted; every acknowledged record is read back from offset 0; deleting the topic
empties the bucket of its objects, also when the broker is killed midway."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from moldau.storage.remote.metadata_records import REMOTE_LOG_METADATA_TOPIC, deserialize
from moldau.storage.remote.segment import (
    RemoteLogMetadata,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
)
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


def stored_segments(seaweedfs: SeaweedFS, topic: str) -> dict[str, set[str]]:
    """The object names in the bucket per segment id (keys ``<base>-<segmentId>.<ext>``)."""
    out: dict[str, set[str]] = defaultdict(set)
    for key in seaweedfs.keys(f"{topic}-"):
        name = key.rsplit("/", 1)[1]
        out[name.split(".", 1)[0].split("-", 1)[1]].add(name)
    return out


def remote_log_metadata(b: ClientHelpers) -> list[RemoteLogMetadata]:
    """The events in ``__remote_log_metadata``, read with a Kafka client and decoded as
    Kafka's records."""
    return [deserialize(r.value) for r in b.consume(REMOTE_LOG_METADATA_TOPIC) if r.value]


def segment_states(b: ClientHelpers, topic: str) -> dict[str, list[RemoteLogSegmentState]]:
    """Each remote segment of ``topic`` (by segment id): its states, in order."""
    out: dict[str, list[RemoteLogSegmentState]] = defaultdict(list)
    for e in remote_log_metadata(b):
        is_segment = isinstance(e, RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate)
        if is_segment and e.segment_id.topic == topic:
            out[str(e.segment_id.id)].append(e.state)
    return out


HALF_WAY = (
    RemoteLogSegmentState.COPY_SEGMENT_STARTED,
    RemoteLogSegmentState.DELETE_SEGMENT_STARTED,
)


def remote_tier_faults(b: ClientHelpers, seaweedfs: SeaweedFS, topic: str) -> dict[str, str]:
    """What is wrong with ``topic``'s remote tier, by segment id: its states and objects
    (empty: nothing). Wrong are objects of a segment that is not COPY_SEGMENT_FINISHED
    (garbage), a segment left half-way (a copy or a deletion started, never finished) and
    a finished segment without its records in the bucket."""
    stored, states = stored_segments(seaweedfs, topic), segment_states(b, topic)
    out = {}
    for sid in stored.keys() | states.keys():
        objects, history = sorted(stored.get(sid, ())), states.get(sid, [None])
        if history[-1] is RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
            wrong = not any(o.endswith(".log") for o in objects)
        else:
            wrong = bool(objects) or history[-1] in HALF_WAY
        if wrong:
            out[sid] = f"{[s.name if s else None for s in history]} {objects}"
    return out


def test_store_killed_then_restarted_loses_nothing(
    s3_broker: BrokerProcess, seaweedfs: SeaweedFS
) -> None:
    b = s3_broker
    b.create_topic("killed", 1, **{k.replace(".", "_"): v for k, v in TIERED.items()})
    b.create_topic("beside", 1)  # not tiered: reading it never needs the store
    acked = produce_batches(b, "killed", "before", 10)
    beside = [
        r.value for r in b.produce("beside", *(f"beside-{i:03d}".encode() for i in range(50)))
    ]
    wait_for(lambda: local_bases(b, "killed")[0] > 0, "segments to leave the disk")
    consumer = Consumer(
        {
            "bootstrap.servers": b.bootstrap_servers,
            "group.id": "unused",
            "enable.auto.commit": False,
        }
    )
    got: dict[str, list[bytes]] = {"killed": [], "beside": []}
    errors: list[str] = []

    def poll(until: float) -> None:
        while time.monotonic() < until:
            for m in consumer.consume(500, timeout=0.2):
                if m.error() is not None:
                    errors.append(f"{m.topic()}: {m.error()}")
                else:
                    got[m.topic()].append(m.value())

    try:
        seaweedfs.kill()
        try:
            killed_at = len(acked)
            acked += produce_batches(b, "killed", "during", 10)  # producing goes on
            consumer.assign([TopicPartition("killed", 0, 0), TopicPartition("beside", 0, 0)])
            deadline = time.monotonic() + 60
            while len(got["beside"]) < len(beside) and time.monotonic() < deadline:
                poll(time.monotonic() + 0.5)
            poll(time.monotonic() + 2)
            # the other partition is served; the tiered one gets nothing (its offset 0 is
            # in the dead store) and its errors name only it
            assert got["beside"] == beside
            assert got["killed"] == []
            assert all(e.startswith("killed") for e in errors if not e.startswith("None")), errors
            # nothing written while the store is dead has left the disk
            assert local_bases(b, "killed")[0] <= killed_at
        finally:
            seaweedfs.start()  # same data and ports
        # the same consumer goes on by itself and reads the whole partition
        deadline = time.monotonic() + 90
        while len(got["killed"]) < len(acked) and time.monotonic() < deadline:
            poll(time.monotonic() + 0.5)
        assert got["killed"] == acked
    finally:
        consumer.close()
    # copying resumes, and then local retention; what copies cut short left is deleted
    end = len(acked)
    wait_for(lambda: local_bases(b, "killed")[0] >= end - 40, "copies to resume", timeout=90)
    # (the store may still apply a write the broker gave up on: nothing of it may remain)
    try:
        wait_for(lambda: not remote_tier_faults(b, seaweedfs, "killed"), "the cleanup", 90)
    except AssertionError:
        faults = remote_tier_faults(b, seaweedfs, "killed")
        raise AssertionError(f"remote segments (states, objects) left: {faults}") from None
    stored = stored_segments(seaweedfs, "killed")
    bases = [
        md.start_offset
        for md in remote_log_metadata(b)
        if isinstance(md, RemoteLogSegmentMetadata) and str(md.segment_id.id) in stored
    ]
    assert len(bases) == len(set(bases)), f"offsets in two remote segments: {sorted(bases)}"
    assert read_confluent(b, "killed", "read_committed") == acked


def partition_delete_states(b: ClientHelpers, topic: str) -> list[str]:
    """The partition delete states recorded for ``topic`` in ``__remote_log_metadata``,
    read with a Kafka client and decoded as Kafka's records."""
    return [
        e.state.name
        for e in remote_log_metadata(b)
        if isinstance(e, RemotePartitionDeleteMetadata) and e.topic_id_partition.topic == topic
    ]


def test_topic_deletion_cut_short_by_kill_9_resumes_after_restart(
    s3_broker: BrokerProcess, seaweedfs: SeaweedFS
) -> None:
    """The store is frozen while the topic is deleted: the deletion is recorded as
    started, then the broker dies (kill -9). After the restart the broker finds the
    unfinished deletion in ``__remote_log_metadata`` and empties the bucket of it."""
    b = s3_broker
    b.create_topic("gone", 1, **{k.replace(".", "_"): v for k, v in TIERED.items()})
    produce_batches(b, "gone", "gone", 8)
    wait_for(
        lambda: sum(k.endswith(".log") for k in seaweedfs.keys("gone-")) >= 3, "copies of gone"
    )
    seaweedfs.pause()
    try:
        mark = b.lines_seen
        b.delete_topic("gone")

        def retrying() -> bool:
            b.settle_output()
            return any("deleting the remote log failed" in line for line in b.output_since(mark))

        wait_for(retrying, "the deletion to meet the frozen store")
        b.kill()
    finally:
        seaweedfs.resume()
    left = seaweedfs.keys("gone-")
    assert any(k.endswith(".log") for k in left), "the deletion was not cut short"
    b.start()
    wait_for(lambda: not seaweedfs.keys("gone-"), "the bucket to be empty of gone", timeout=90)
    assert partition_delete_states(b, "gone") == [
        "DELETE_PARTITION_MARKED",
        "DELETE_PARTITION_STARTED",
        "DELETE_PARTITION_FINISHED",
    ]
