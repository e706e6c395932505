"""TopicBasedRemoteLogMetadataManager with its IO injected: an in-memory stand-in for the
``__remote_log_metadata`` partitions (what the broker glue provides for real), fed back
record by record as the broker's reader does."""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from moldau.storage.remote.metadata_manager import (
    RemoteLogMetadataNotReadyError,
    TopicBasedRemoteLogMetadataManager,
)
from moldau.storage.remote.metadata_records import serialize
from moldau.storage.remote.segment import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from moldau.storage.remote.storage_manager import RemoteResourceNotFoundError, RemoteStorageError

S = RemoteLogSegmentState
PARTITIONS = 4


class MetadataTopic:
    """The metadata partitions' records; ``feed`` hands what the manager has not read yet
    to it, as the broker's reader does, and says when it caught up."""

    def __init__(self, follow: bool = True) -> None:
        self.records: dict[int, list[bytes | None]] = {p: [] for p in range(PARTITIONS)}
        self.follow = follow  # feed right after each publish
        self.manager = TopicBasedRemoteLogMetadataManager(
            self.publish, PARTITIONS, consume_wait_ms=200
        )

    async def publish(self, partition: int, value: bytes) -> int:
        self.records[partition].append(value)
        if self.follow:
            asyncio.get_running_loop().call_soon(self.feed)
        return len(self.records[partition]) - 1

    def feed(self) -> None:
        m = self.manager
        for p in m.needed_metadata_partitions():
            records = self.records[p]
            for offset in range(m.position(p), len(records)):
                m.on_record(p, offset, records[offset])
            m.on_caught_up(p, len(records))


def tp_on(partition: int, n: int = 0) -> TopicIdPartition:
    """The n-th user partition (of fresh topics) whose events go to ``partition``."""
    found = 0
    while True:
        tp = TopicIdPartition(uuid.uuid4(), "orders", 0)
        if TopicBasedRemoteLogMetadataManager(None, PARTITIONS).metadata_partition(tp) == partition:  # type: ignore[arg-type]
            if found == n:
                return tp
            found += 1


def run(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """The test, run in an event loop of its own (fixtures still reach it)."""

    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return wrapper


def segment(tp: TopicIdPartition, start: int = 0, end: int = 99) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate(tp), start, end, 0, 1, 0, 1000, {0: start}
    )


def finished(md: RemoteLogSegmentMetadata) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(md.segment_id, 5, S.COPY_SEGMENT_FINISHED, 1)


@run
async def test_reads_wait_for_the_partition_to_load_then_see_every_event():
    topic = MetadataTopic()
    tp = tp_on(1)
    earlier = segment(tp)
    # Events another broker wrote before this one hosted the partition.
    topic.records[1] += [serialize(earlier), serialize(finished(earlier))]
    m = topic.manager
    m.on_partition_assigned(tp)
    assert m.needed_metadata_partitions() == {1} and m.position(1) == 0
    with pytest.raises(RemoteLogMetadataNotReadyError):
        m.cache(tp)
    with pytest.raises(RemoteResourceNotFoundError):
        m.cache(tp_on(2))
    topic.feed()
    assert m.is_ready(tp) and m.cache(tp).segment_for(0, 50) is not None
    later = segment(tp, 100, 199)
    await m.add_remote_log_segment_metadata(later)  # returns once read back
    assert [s.segment_id for s in m.cache(tp).all_segments()] == [
        earlier.segment_id,
        later.segment_id,
    ]
    await m.update_remote_log_segment_metadata(finished(later))
    assert m.cache(tp).log_start_offset() == 0 and m.cache(tp).size_bytes() == 2000
    # The reads the RemoteLogManager makes, by partition.
    assert [s.end_offset for s in m.segments(tp)] == [99, 199]
    assert m.all_segments(tp) == m.segments(tp)
    assert m.highest_offset_for_epoch(tp, 0) == 199


@run
async def test_an_event_the_cache_would_drop_is_refused_before_it_is_written():
    topic = MetadataTopic()
    tp = tp_on(0)
    topic.manager.on_partition_assigned(tp)
    topic.feed()
    md = segment(tp)
    with pytest.raises(ValueError, match="no remote segment"):
        await topic.manager.update_remote_log_segment_metadata(finished(md))
    await topic.manager.add_remote_log_segment_metadata(md)
    await topic.manager.update_remote_log_segment_metadata(finished(md))
    with pytest.raises(ValueError, match="cannot become"):
        await topic.manager.add_remote_log_segment_metadata(md)
    assert len(topic.records[0]) == 2


@run
async def test_a_second_partition_on_the_same_metadata_partition_rereads_it(caplog):
    topic = MetadataTopic()
    m = topic.manager
    first, second = tp_on(3, 0), tp_on(3, 1)
    m.on_partition_assigned(first)
    topic.feed()
    md = segment(first)
    await m.add_remote_log_segment_metadata(md)
    await m.update_remote_log_segment_metadata(finished(md))
    other = segment(second)
    # Written by another broker while this one did not host `second`: read, not kept.
    topic.records[3] += [serialize(other), serialize(finished(other))]
    topic.feed()
    with caplog.at_level(logging.ERROR):
        m.on_partition_assigned(second)
        assert m.position(3) == 0 and not m.is_ready(second)
        topic.feed()
    assert m.cache(second).segment_for(0, 0) is not None
    # `first` was not fed its events again (a replayed COPY_SEGMENT_STARTED would be
    # dropped as an invalid transition, with an error).
    assert "dropping" not in caplog.text
    assert [s.state for s in m.cache(first).all_segments()] == [S.COPY_SEGMENT_FINISHED]


@run
async def test_undecodable_records_are_skipped(caplog):
    topic = MetadataTopic()
    tp = tp_on(2)
    md = segment(tp)
    topic.records[2] += [b"\x01\x7f\x00", None, serialize(md)]
    topic.manager.on_partition_assigned(tp)
    with caplog.at_level(logging.WARNING):
        topic.feed()
    assert "offset 0" in caplog.text
    assert [s.segment_id for s in topic.manager.cache(tp).all_segments()] == [md.segment_id]


@run
async def test_a_write_not_read_back_in_time_fails_retriably():
    topic = MetadataTopic(follow=False)  # the reader is stuck
    tp = tp_on(1)
    topic.manager.on_partition_assigned(tp)
    with pytest.raises(RemoteStorageError, match="not read back"):
        await topic.manager.add_remote_log_segment_metadata(segment(tp))


@run
async def test_unassigning_fails_the_writes_waiting_and_forgets_the_cache():
    topic = MetadataTopic(follow=False)
    tp = tp_on(1)
    m = topic.manager
    m.on_partition_assigned(tp)
    write = asyncio.create_task(m.add_remote_log_segment_metadata(segment(tp)))
    await asyncio.sleep(0)
    m.on_partition_unassigned(tp)
    with pytest.raises(RemoteStorageError, match="stopped reading"):
        await write
    assert m.needed_metadata_partitions() == set()
    with pytest.raises(RemoteResourceNotFoundError):
        m.cache(tp)


@run
async def test_a_partition_delete_for_a_partition_not_hosted_here_does_not_wait():
    topic = MetadataTopic(follow=False)
    tp = tp_on(0)
    marked = RemotePartitionDeleteMetadata(
        tp, RemotePartitionDeleteState.DELETE_PARTITION_MARKED, 0, 3000
    )
    await topic.manager.put_remote_partition_delete_metadata(marked)
    assert topic.records[0] == [serialize(marked)]
