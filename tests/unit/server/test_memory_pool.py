"""MemoryPool: queued.max.request.bytes bookkeeping, stepped by hand."""

from __future__ import annotations

from moldau.server.memory_pool import MemoryPool


def test_reservations_succeed_while_anything_is_left_then_refuse() -> None:
    pool = MemoryPool(100)
    assert pool.try_reserve(60)
    assert pool.try_reserve(60), "non-strict: 40 left is enough to go over, as Kafka's pool"
    assert (pool.used, pool.available) == (120, -20)
    assert not pool.try_reserve(1)
    pool.release(30)
    assert pool.available == 10
    assert pool.try_reserve(500), "one request larger than the pool still goes through"


def test_waiters_are_called_oldest_first_while_memory_is_left() -> None:
    pool = MemoryPool(10)
    assert pool.try_reserve(10)
    called: list[str] = []

    def waiter(name: str, size: int):
        def call() -> None:
            called.append(name)
            assert pool.try_reserve(size)

        return call

    pool.wait(waiter("a", 4))
    pool.wait(waiter("b", 8))
    pool.wait(waiter("c", 1))
    assert pool.waiting == 3
    pool.release(5)  # a takes 4 (1 left), b takes 8 (over), c must wait for more
    assert called == ["a", "b"]
    assert pool.waiting == 1
    pool.release(8)
    assert called == ["a", "b", "c"]
    assert pool.used == 10 - 5 + 4 + 8 - 8 + 1


def test_cancelled_waiter_is_never_called() -> None:
    pool = MemoryPool(1)
    assert pool.try_reserve(1)
    called: list[int] = []

    def waiter() -> None:
        called.append(1)

    pool.wait(waiter)
    pool.cancel(waiter)
    pool.cancel(waiter)  # twice is harmless
    pool.release(1)
    assert called == [] and pool.waiting == 0


def test_unbounded_pool_never_refuses() -> None:
    pool = MemoryPool(None)
    assert pool.try_reserve(1 << 40) and pool.available is None
    pool.release(1 << 40)
    assert pool.used == 0
