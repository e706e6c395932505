"""The copy and expiry decisions of a leader, stepped with a manual clock (no IO)."""

from __future__ import annotations

import uuid

import pytest

from moldau.clock import ManualClock
from moldau.storage.remote.copy_scheduler import (
    CopyScheduler,
    LocalSegment,
    copy_lag,
    highest_remote_offset,
    in_lineage,
    remote_segments_to_delete,
)
from moldau.storage.remote.segment import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)

TP = TopicIdPartition(uuid.uuid4(), "t", 0)
# four closed segments of 10 records and the active one at 40
SEGMENTS = [LocalSegment(base, 100, 1000 + base) for base in (0, 10, 20, 30)] + [
    LocalSegment(40, 5)
]


def scheduler(clock: ManualClock, copied: int = -1) -> CopyScheduler:
    return CopyScheduler(
        copied, clock.now_ms(), interval_ms=30_000, backoff_ms=500, backoff_max_ms=4_000
    )


def remote(start: int, end: int, epochs: dict[int, int], *, size: int = 100, ts: int = 0):
    return RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate(TP),
        start,
        end,
        ts,
        1,
        0,
        size,
        epochs,
        RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
    )


def test_closed_segments_below_the_lso_are_copied_in_order_once() -> None:
    clock = ManualClock(0)
    s = scheduler(clock)
    copied = []
    while (c := s.next_copy(clock.now_ms(), SEGMENTS, 35, 0)) is not None:
        assert s.next_copy(clock.now_ms(), SEGMENTS, 35, 0) is None  # one at a time
        copied.append((c.base_offset, c.end_offset))
        s.copied(c)
    # the segment at 30 ends at 39, above the LSO 35: it waits
    assert copied == [(0, 9), (10, 19), (20, 29)]
    assert s.copied_offset == 29
    assert copy_lag(SEGMENTS, s.copied_offset, 40) == (100, 1)
    # nothing to do: the next look is a task interval later, even if the LSO moved
    assert s.next_copy(clock.now_ms(), SEGMENTS, 40, 0) is None
    clock.advance(30_000)
    c = s.next_copy(clock.now_ms(), SEGMENTS, 40, 0)
    assert c is not None and (c.base_offset, c.end_offset) == (30, 39)
    s.copied(c)
    clock.advance(30_000)
    assert s.next_copy(clock.now_ms(), SEGMENTS, 45, 0) is None  # the active one never
    assert copy_lag(SEGMENTS, s.copied_offset, 45) == (0, 0)


def test_a_failed_copy_is_retried_with_a_growing_backoff() -> None:
    clock = ManualClock(0)
    s = scheduler(clock)
    c = s.next_copy(clock.now_ms(), SEGMENTS, 40, 0)
    waits = []
    for _ in range(5):
        assert c is not None and c.base_offset == 0  # the same segment again
        s.failed(c, clock.now_ms())
        failed_at = clock.now_ms()
        while (c := s.next_copy(clock.now_ms(), SEGMENTS, 40, 0)) is None:
            clock.advance(100)
        waits.append(clock.now_ms() - failed_at)
    assert waits == [500, 1000, 2000, 4000, 4000]  # doubling, capped at the max
    s.copied(c)
    assert s.failures == 0 and s.copied_offset == 9
    c = s.next_copy(clock.now_ms(), SEGMENTS, 40, 0)  # the next one at once
    assert c is not None and c.base_offset == 10


def test_a_new_leader_continues_from_the_remote_metadata() -> None:
    # old leader (epoch 3) copied up to 19; this replica's lineage agrees
    highest = {3: 19}
    assert highest_remote_offset([(1, 0), (3, 5)], 45, highest.get) == 19
    clock = ManualClock(0)
    s = scheduler(clock, copied=19)
    c = s.next_copy(clock.now_ms(), SEGMENTS, 40, 0)
    assert c is not None and c.base_offset == 20
    # nothing copied in any epoch of the lineage: from the start
    assert highest_remote_offset([(1, 0), (3, 5)], 45, {}.get) == -1
    # a deposed leader copied epoch 2 past where this lineage left epoch 2 (at 12)
    assert highest_remote_offset([(2, 0), (4, 12)], 45, {2: 29}.get) == 11
    # local retention already removed the copied history: start at the local log start
    s = scheduler(clock, copied=-1)
    c = s.next_copy(clock.now_ms(), SEGMENTS, 40, 20)
    assert c is not None and c.base_offset == 20


def test_total_retention_removes_the_oldest_remote_segments() -> None:
    segments = [remote(i * 10, i * 10 + 9, {1: 0}, ts=1000 * i) for i in range(4)]
    epochs = [(1, 0)]

    def doomed(**kw):
        args = dict(
            now_ms=10_000,
            log_start_offset=0,
            retention_ms=-1,
            retention_bytes=-1,
            local_only_bytes=50,
            epochs=epochs,
        )
        args.update(kw)
        return [s.start_offset for s in remote_segments_to_delete(segments, **args)]

    assert doomed() == []
    assert doomed(retention_ms=8_500) == [0, 10]  # max timestamps 0 and 1000 < 1500
    assert doomed(retention_bytes=250) == [0, 10]  # 450 bytes in both tiers: 200 over
    assert doomed(retention_bytes=260) == [0]
    assert doomed(log_start_offset=25) == [0, 10]  # DeleteRecords up to 25
    assert doomed(log_start_offset=9) == []


def test_segments_outside_the_lineage_are_recognised() -> None:
    epochs = [(1, 0), (3, 15)]
    assert in_lineage(remote(0, 9, {1: 0}), epochs)
    assert in_lineage(remote(10, 19, {1: 10, 3: 15}), epochs)
    # copied by a leader of epoch 2 whose records were truncated away here
    assert not in_lineage(remote(10, 19, {1: 10, 2: 15}), epochs)
    # epoch 3 started at 17 on that leader, at 15 in this lineage
    assert not in_lineage(remote(10, 19, {1: 10, 3: 17}), epochs)
    # older epochs than the cache holds (log start moved past them)
    assert in_lineage(remote(0, 9, {0: 0}), [(1, 20)])
    segments = [remote(0, 9, {1: 0}), remote(10, 19, {2: 10}), remote(20, 29, {3: 20})]
    kept = remote_segments_to_delete(
        segments,
        now_ms=0,
        log_start_offset=0,
        retention_ms=-1,
        retention_bytes=-1,
        local_only_bytes=0,
        epochs=[(1, 0), (3, 10)],
    )
    assert kept == []  # the first one is in the lineage: the prefix stops there
    kept = remote_segments_to_delete(
        segments[1:],
        now_ms=0,
        log_start_offset=0,
        retention_ms=-1,
        retention_bytes=-1,
        local_only_bytes=0,
        epochs=[(1, 0), (3, 10)],
    )
    assert [s.start_offset for s in kept] == [10]  # epoch 2 is not in this lineage


def test_several_copies_in_flight_finish_in_offset_order() -> None:
    clock = ManualClock(0)
    s = CopyScheduler(
        -1, 0, interval_ms=30_000, backoff_ms=500, backoff_max_ms=4_000, max_in_flight=3
    )
    started = []
    while (c := s.next_copy(clock.now_ms(), SEGMENTS, 40, 0)) is not None:
        started.append(c)
    assert [c.base_offset for c in started] == [0, 10, 20]  # bounded, in order
    with pytest.raises(ValueError):
        s.copied(started[1])  # the remote tier grows as a prefix: the first finishes first
    s.copied(started[0])
    assert s.copied_offset == 9
    c = s.next_copy(clock.now_ms(), SEGMENTS, 40, 0)  # room for one more
    assert c is not None and c.base_offset == 30
    # the copy at 10 fails: those after it are abandoned, then it is tried again
    s.failed(started[1], clock.now_ms())
    assert not s.holds(started[2]) and not s.holds(c) and s.in_flight == []
    assert s.next_copy(clock.now_ms(), SEGMENTS, 40, 0) is None  # backing off
    clock.advance(500)
    again = s.next_copy(clock.now_ms(), SEGMENTS, 40, 0)
    assert again is not None and again.base_offset == 10 and s.copied_offset == 9
