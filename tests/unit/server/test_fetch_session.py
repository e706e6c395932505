"""Fetch sessions (KIP-227): full then incremental fetches, epochs, forgetting, eviction."""

from __future__ import annotations

import random

from moldau.protocol.errors import ErrorCode
from moldau.replication.replica_manager import FetchRequestPartition, FetchResult
from moldau.server.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, FetchSessionCache


def part(p: int, offset: int = 0) -> FetchRequestPartition:
    return FetchRequestPartition("t", p, offset, 1 << 20)


def result(hw: int) -> FetchResult:
    return FetchResult(high_watermark=hw, last_stable_offset=hw, log_start_offset=0)


def answered(context, results) -> list[int]:
    return [p.partition for p, _ in context.select(results)]


def test_full_then_incremental() -> None:
    cache = FetchSessionCache(10, random.Random(1))
    first = cache.new_context(0, INITIAL_EPOCH, [part(0), part(1), part(2)], [])
    assert first.session_id != 0
    assert answered(first, [result(5), result(5), result(5)]) == [0, 1, 2]
    # Nothing changed: an incremental fetch reads all three, answers none.
    again = cache.new_context(first.session_id, 1, [], [])
    assert [p.partition for p in again.partitions] == [0, 1, 2]
    assert answered(again, [result(5), result(5), result(5)]) == []
    # Partition 1's HW moved: only it is answered, and it moves to the end.
    third = cache.new_context(first.session_id, 2, [], [])
    assert answered(third, [result(5), result(6), result(5)]) == [1]
    fourth = cache.new_context(first.session_id, 3, [part(0, 5)], [("t", 2)])
    assert [(p.partition, p.fetch_offset) for p in fourth.partitions] == [(0, 5), (1, 0)]


def test_epoch_and_id_errors_and_closing() -> None:
    cache = FetchSessionCache(10)
    first = cache.new_context(0, INITIAL_EPOCH, [part(0)], [])
    stale = cache.new_context(first.session_id, 5, [], [])
    assert stale.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    unknown = cache.new_context(first.session_id + 1, 1, [], [])
    assert unknown.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    closed = cache.new_context(first.session_id, FINAL_EPOCH, [part(0)], [])
    assert closed.session_id == 0 and len(cache) == 0
    sessionless = cache.new_context(0, FINAL_EPOCH, [part(0)], [])
    assert sessionless.session_id == 0 and answered(sessionless, [result(1)]) == [0]


def test_least_recently_used_session_is_evicted() -> None:
    cache = FetchSessionCache(2)
    a = cache.new_context(0, INITIAL_EPOCH, [part(0)], [])
    b = cache.new_context(0, INITIAL_EPOCH, [part(0)], [])
    cache.new_context(a.session_id, 1, [], [])  # a is used again, b is now the oldest
    cache.new_context(0, INITIAL_EPOCH, [part(0)], [])
    assert cache.new_context(b.session_id, 1, [], []).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert cache.new_context(a.session_id, 2, [], []).error == ErrorCode.NONE
    assert FetchSessionCache(0).new_context(0, INITIAL_EPOCH, [part(0)], []).session_id == 0
