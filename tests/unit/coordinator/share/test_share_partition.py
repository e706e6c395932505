"""The share-partition state machine: acquisition, acknowledgement, locks, limits."""

from __future__ import annotations

from moldau.coordinator.share.partition import (
    AcknowledgeType,
    Acquired,
    RecordState,
    ShareLimits,
    SharePartition,
)
from moldau.protocol.errors import ErrorCode

ACCEPT, RELEASE, REJECT, GAP = (
    int(t)
    for t in (
        AcknowledgeType.ACCEPT,
        AcknowledgeType.RELEASE,
        AcknowledgeType.REJECT,
        AcknowledgeType.GAP,
    )
)
LIMITS = ShareLimits(record_lock_duration_ms=1_000, delivery_count_limit=3, max_record_locks=10)


def test_acquire_new_records_up_to_what_was_read_and_the_record_budget() -> None:
    sp = SharePartition(100, LIMITS)
    assert sp.acquire("a", 104, 3, now_ms=0) == [Acquired(100, 102, 1)]
    assert sp.acquire("b", 104, 10, now_ms=0) == [Acquired(103, 104, 1)]
    assert sp.acquire("c", 104, 10, now_ms=0) == []  # nothing read past 104
    assert (sp.start_offset, sp.next_offset, sp.in_flight) == (100, 105, 5)
    assert sp.fetch_offset() == 105


def test_in_flight_records_are_bounded_by_max_record_locks() -> None:
    sp = SharePartition(0, LIMITS)
    assert sp.acquire("a", 99, 100, now_ms=0) == [Acquired(0, 9, 1)]
    assert sp.acquire("b", 99, 100, now_ms=0) == []  # window full: 10 locks
    assert sp.acknowledge("a", 0, 3, [ACCEPT]) == ErrorCode.NONE
    assert sp.start_offset == 4
    assert sp.acquire("b", 99, 100, now_ms=0) == [Acquired(10, 13, 1)]
    assert sp.in_flight == 10


def test_accept_advances_the_start_offset_only_past_contiguous_finished_records() -> None:
    sp = SharePartition(0, LIMITS)
    sp.acquire("a", 4, 10, now_ms=0)
    assert sp.acknowledge("a", 2, 4, [ACCEPT]) == ErrorCode.NONE
    assert sp.start_offset == 0
    assert sp.acknowledge("a", 0, 1, [ACCEPT, REJECT]) == ErrorCode.NONE
    assert sp.start_offset == 5 and sp.runs == []
    # the same records cannot be acknowledged twice
    assert sp.acknowledge("a", 0, 0, [ACCEPT]) == ErrorCode.INVALID_RECORD_STATE


def test_only_the_holder_may_acknowledge_and_a_bad_batch_changes_nothing() -> None:
    sp = SharePartition(0, LIMITS)
    sp.acquire("a", 1, 1, now_ms=0)
    sp.acquire("b", 3, 10, now_ms=0)
    assert sp.acknowledge("b", 0, 2, [ACCEPT]) == ErrorCode.INVALID_RECORD_STATE
    assert sp.state_of(2) == (RecordState.ACQUIRED, 1)
    assert sp.acknowledge("b", 1, 2, [ACCEPT, ACCEPT, ACCEPT]) == ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("b", 1, 1, [9]) == ErrorCode.INVALID_REQUEST


def test_release_redelivers_with_a_higher_delivery_count_to_any_member() -> None:
    sp = SharePartition(0, LIMITS)
    sp.acquire("a", 5, 10, now_ms=0)
    assert sp.acknowledge("a", 0, 5, [ACCEPT, RELEASE, RELEASE, ACCEPT, ACCEPT, ACCEPT]) == 0
    assert sp.start_offset == 1 and sp.fetch_offset() == 1
    assert sp.acquire("b", 5, 10, now_ms=0) == [Acquired(1, 2, 2)]
    assert sp.acknowledge("b", 1, 2, [ACCEPT]) == ErrorCode.NONE
    assert sp.start_offset == 6


def test_expired_locks_release_records_and_the_delivery_limit_archives_them() -> None:
    sp = SharePartition(0, LIMITS)  # limit 3 deliveries
    for delivery in range(1, 4):
        assert sp.acquire("a", 0, 10, now_ms=delivery * 10_000) == [Acquired(0, 0, delivery)]
        assert sp.next_deadline_ms() == delivery * 10_000 + 1_000
        assert sp.expire_locks(delivery * 10_000 + 999) == 0
        assert sp.expire_locks(delivery * 10_000 + 1_000) == 1
    assert sp.start_offset == 1  # the poison record was archived after 3 deliveries
    assert sp.acquire("a", 0, 10, now_ms=50_000) == []


def test_a_member_leaving_releases_only_its_records() -> None:
    sp = SharePartition(0, LIMITS)
    sp.acquire("a", 1, 2, now_ms=0)
    sp.acquire("b", 3, 2, now_ms=0)
    assert sp.release_member("a") == 2
    assert sp.count(RecordState.AVAILABLE) == 2 and sp.count(RecordState.ACQUIRED) == 2
    assert sp.acquire("b", 3, 10, now_ms=0) == [Acquired(0, 1, 2)]


def test_reset_starts_over() -> None:
    sp = SharePartition(0, LIMITS)
    sp.acquire("a", 3, 10, now_ms=0)
    sp.reset(50)
    assert (sp.start_offset, sp.next_offset, sp.runs) == (50, 50, [])


def test_restore_from_durable_state_redelivers_only_what_was_not_done() -> None:
    """What a share coordinator keeps (acquired written as available) rebuilds a
    share-partition that hands out exactly the records not acknowledged or archived."""
    limits = ShareLimits(record_lock_duration_ms=1_000, delivery_count_limit=3)
    sp = SharePartition(0, limits)
    sp.acquire("a", 9, 100, 0)
    assert sp.acknowledge("a", 0, 9, [1, 1, 2, 1, 3, 1, 1, 1, 1, 1]) == ErrorCode.NONE
    sp.acquire("a", 14, 100, 0)  # 2 again and 10..14: held when the leader dies
    batches = sp.state_batches()
    restored = SharePartition.restore(sp.start_offset, batches, limits)
    assert restored.start_offset == 2
    assert restored.state_of(2) == (RecordState.AVAILABLE, 2)
    assert restored.state_of(4) == (RecordState.ARCHIVED, 1)
    assert restored.state_of(12) == (RecordState.AVAILABLE, 1)
    got = restored.acquire("b", 20, 100, 0)
    counts = {o: a.delivery_count for a in got for o in range(a.first_offset, a.last_offset + 1)}
    assert counts == {2: 3, **dict.fromkeys(range(10, 15), 2), **dict.fromkeys(range(15, 21), 1)}


def test_restore_fills_gaps_and_drops_batches_below_the_start() -> None:
    limits = ShareLimits()
    sp = SharePartition.restore(5, [(0, 6, 2, 1), (9, 9, 4, 2)], limits)
    assert sp.start_offset == 7  # 5 and 6 acknowledged
    assert sp.state_of(8) == (RecordState.AVAILABLE, 0)
    assert sp.next_offset == 10
