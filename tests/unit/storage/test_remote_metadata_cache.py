"""RemoteLogMetadataCache: Kafka's segment and partition-delete state transitions, reads
along the leader-epoch lineage, and later copies replacing earlier ones."""

from __future__ import annotations

import uuid

from moldau.storage.remote.metadata_cache import RemoteLogMetadataCache
from moldau.storage.remote.segment import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)

TP = TopicIdPartition(uuid.uuid4(), "orders", 0)
S = RemoteLogSegmentState
P = RemotePartitionDeleteState


def started(start: int, end: int, epochs: dict[int, int], size: int = 100):
    sid = RemoteLogSegmentId.generate(TP)
    return RemoteLogSegmentMetadata(sid, start, end, 0, 1, 0, size, epochs)


def update(md: RemoteLogSegmentMetadata, state: RemoteLogSegmentState):
    return RemoteLogSegmentMetadataUpdate(md.segment_id, 1, state, 2)


def copied(cache: RemoteLogMetadataCache, start: int, end: int, epochs: dict[int, int], size=100):
    md = started(start, end, epochs, size)
    assert cache.apply(md)
    assert cache.apply(update(md, S.COPY_SEGMENT_FINISHED))
    return md


def ids(segments):
    return [md.segment_id for md in segments]


def test_a_segment_through_its_states():
    cache = RemoteLogMetadataCache()
    md = started(0, 99, {0: 0}, size=4096)
    assert cache.apply(md)
    # Copying: known (for cleanup) but not readable.
    assert cache.segment_for(0, 10) is None
    assert ids(cache.all_segments()) == [md.segment_id] and cache.segments() == []
    assert ids(cache.list_segments(0)) == [md.segment_id]
    assert cache.log_start_offset() is None and cache.highest_offset_for_epoch(0) is None
    assert cache.apply(update(md, S.COPY_SEGMENT_FINISHED))
    found = cache.segment_for(0, 99)
    assert found is not None and found.state is S.COPY_SEGMENT_FINISHED and found.broker_id == 2
    assert cache.segment_for(0, 100) is None
    assert cache.log_start_offset() == 0 and cache.size_bytes() == 4096
    assert cache.highest_offset_for_epoch(0) == 99
    assert cache.apply(update(md, S.DELETE_SEGMENT_STARTED))
    assert cache.segment_for(0, 10) is None and cache.segments() == []
    assert ids(cache.all_segments()) == [md.segment_id]  # still to delete
    assert cache.apply(update(md, S.DELETE_SEGMENT_FINISHED))
    assert cache.all_segments() == [] and cache.list_segments(0) == []


def test_invalid_transitions_are_refused_and_change_nothing():
    cache = RemoteLogMetadataCache()
    md = started(0, 99, {0: 0})
    finished_first = RemoteLogSegmentMetadata(
        md.segment_id, 0, 99, 0, 1, 0, 100, {0: 0}, S.COPY_SEGMENT_FINISHED
    )
    assert cache.check(finished_first) is not None
    assert not cache.apply(finished_first)  # a new segment must start copying
    assert not cache.apply(update(md, S.COPY_SEGMENT_FINISHED))  # unknown segment
    assert cache.all_segments() == []
    assert cache.apply(md)
    assert not cache.apply(update(md, S.DELETE_SEGMENT_FINISHED))  # skips DELETE_STARTED
    assert not cache.apply(update(md, S.COPY_SEGMENT_STARTED))  # updates never restart
    assert cache.apply(md)  # the same event again (a retry, a replay): valid
    assert cache.apply(update(md, S.COPY_SEGMENT_FINISHED))
    assert cache.apply(update(md, S.COPY_SEGMENT_FINISHED))  # self transition: valid
    assert not cache.apply(md)  # FINISHED cannot go back to STARTED
    assert [m.state for m in cache.all_segments()] == [S.COPY_SEGMENT_FINISHED]
    assert cache.apply(update(md, S.DELETE_SEGMENT_STARTED))
    assert not cache.apply(update(md, S.COPY_SEGMENT_FINISHED))  # no way back
    assert cache.segment_for(0, 0) is None


def test_reads_follow_the_leader_epoch_lineage():
    cache = RemoteLogMetadataCache()
    a = copied(cache, 0, 99, {0: 0})
    b = copied(cache, 100, 249, {0: 100, 1: 150})
    c = copied(cache, 250, 299, {2: 250})
    assert ids([cache.segment_for(0, 0), cache.segment_for(0, 99)]) == [a.segment_id] * 2
    assert ids([cache.segment_for(0, 120)]) == [b.segment_id]
    assert cache.segment_for(0, 160) is None  # epoch 0 ends at 149 in b
    assert cache.segment_for(1, 120) is None  # 120 was written in epoch 0
    assert ids([cache.segment_for(1, 200)]) == [b.segment_id]
    assert ids([cache.segment_for(2, 299)]) == [c.segment_id]
    assert cache.segment_for(2, 300) is None and cache.segment_for(3, 260) is None
    assert [cache.highest_offset_for_epoch(e) for e in (0, 1, 2, 5)] == [149, 249, 299, None]
    assert ids(cache.list_segments(0)) == [a.segment_id, b.segment_id]
    assert ids(cache.segments()) == [a.segment_id, b.segment_id, c.segment_id]
    assert cache.log_start_offset() == 0 and cache.size_bytes() == 300


def test_a_later_copy_of_the_same_offsets_replaces_the_earlier():
    """Kafka's cases: a new leader copies again what a lagging old leader had copied."""
    cache = RemoteLogMetadataCache()
    s0 = copied(cache, 0, 100, {0: 0})
    s1 = copied(cache, 0, 200, {0: 0, 1: 150})  # a superset of s0
    assert ids([cache.segment_for(0, 50)]) == [s1.segment_id]
    assert ids(cache.segments()) == [s1.segment_id]  # the chain reads use
    assert set(ids(cache.all_segments())) == {s0.segment_id, s1.segment_id}  # s0 to expire
    assert set(ids(cache.list_segments(0))) == {s0.segment_id, s1.segment_id}
    assert cache.size_bytes() == 100

    overlap = RemoteLogMetadataCache()
    copied(overlap, 10, 90, {0: 10})
    t1 = copied(overlap, 5, 100, {0: 5})
    t2 = copied(overlap, 101, 200, {0: 101})
    assert ids([overlap.segment_for(0, 95)]) == [t1.segment_id]
    assert ids([overlap.segment_for(0, 10)]) == [t1.segment_id]
    assert ids([overlap.segment_for(0, 150)]) == [t2.segment_id]
    assert overlap.log_start_offset() == 5


def test_deleting_the_first_segment_moves_the_remote_log_start():
    cache = RemoteLogMetadataCache()
    a = copied(cache, 0, 99, {0: 0})
    copied(cache, 100, 199, {0: 100})
    assert cache.apply(update(a, S.DELETE_SEGMENT_STARTED))
    assert cache.log_start_offset() == 100 and cache.segment_for(0, 50) is None
    assert cache.highest_offset_for_epoch(0) == 199


def test_partition_delete_states():
    cache = RemoteLogMetadataCache()
    copied(cache, 0, 99, {0: 0})

    def event(state):
        return RemotePartitionDeleteMetadata(TP, state, 0, 3000)

    assert not cache.apply(event(P.DELETE_PARTITION_STARTED))  # must be marked first
    assert cache.apply(event(P.DELETE_PARTITION_MARKED))
    assert not cache.apply(event(P.DELETE_PARTITION_FINISHED))  # skips STARTED
    assert cache.apply(event(P.DELETE_PARTITION_STARTED))
    assert cache.segments() != []  # segments go while the partition is being deleted
    assert cache.apply(event(P.DELETE_PARTITION_FINISHED))
    assert cache.partition_delete is not None
    assert cache.partition_delete.state is P.DELETE_PARTITION_FINISHED
    assert cache.all_segments() == [] and cache.log_start_offset() is None
