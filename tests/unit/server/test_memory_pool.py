"""MemoryPool: queued.max.request.bytes bookkeeping, stepped by hand."""

from __future__ import annotations

from collections.abc import Callable

from moldau.server.memory_pool import MemoryPool


def recorder(log: list[str], name: str) -> Callable[[], None]:
    def granted() -> None:
        log.append(name)

    return granted


def test_reservations_succeed_while_anything_is_left_then_refuse() -> None:
    pool = MemoryPool(100)
    assert pool.try_reserve(60)
    assert pool.try_reserve(60), "non-strict: 40 left is enough to go over, as Kafka's pool"
    assert (pool.used, pool.available) == (120, -20)
    assert not pool.try_reserve(1)
    pool.release(30)
    assert pool.available == 10
    assert pool.try_reserve(500), "one request larger than the pool still goes through"


def test_waiters_are_granted_oldest_first_as_memory_returns() -> None:
    pool = MemoryPool(10)
    assert pool.try_reserve(10)  # held by a request being handled: it will come back
    granted: list[str] = []
    pool.wait(4, 0, recorder(granted, "a"))
    pool.wait(8, 0, recorder(granted, "b"))
    pool.wait(1, 0, recorder(granted, "c"))
    assert granted == [] and pool.waiting == 3
    pool.release(5)  # a gets 4 (1 left), b gets 8 (over), c must wait for more
    assert granted == ["a", "b"] and pool.used == 17
    pool.release(8)
    assert granted == ["a", "b", "c"] and pool.used == 10


def test_cancelled_waiter_is_never_granted() -> None:
    pool = MemoryPool(1)
    assert pool.try_reserve(1)
    granted: list[str] = []
    waiter = recorder(granted, "a")
    pool.wait(1, 0, waiter)
    pool.cancel(waiter)
    pool.cancel(waiter)  # twice is harmless
    pool.release(1)
    assert granted == [] and pool.waiting == 0 and pool.used == 0


def test_frames_that_only_wait_on_each_other_are_not_left_stuck() -> None:
    """All reserved memory belongs to frames waiting for more: nothing would ever be
    released, so the largest holder is granted its step over the limit, and keeps being
    preferred, so only one frame at a time runs over."""
    pool = MemoryPool(100)
    granted: list[str] = []
    assert pool.try_reserve(40) and pool.try_reserve(60)  # frames a (40) and b (60)
    pool.wait(40, 40, recorder(granted, "a"))
    assert granted == [], "b still reads: it may finish and release"
    pool.wait(60, 60, recorder(granted, "b"))
    assert granted == ["b"] and pool.used == 160, "stuck: b holds the most"
    pool.wait(120, 120, recorder(granted, "b again"))
    assert granted == ["b", "b again"] and pool.used == 280
    pool.release(240)  # b's frame was handled
    assert granted == ["b", "b again", "a"] and pool.used == 80


def test_unbounded_pool_never_refuses() -> None:
    pool = MemoryPool(None)
    assert pool.try_reserve(1 << 40) and pool.available is None
    pool.release(1 << 40)
    assert pool.used == 0
