"""The bytes of all requests in flight, bounded by ``queued.max.request.bytes``.

A connection reserves memory for a frame as the frame's bytes arrive and gives it back
when the request has been handled. While the pool is exhausted, connections that need
more wait (they stop reading from their sockets) and are called back, oldest first, as
memory is released. Like Kafka's non-strict ``SimpleMemoryPool``, a reservation succeeds
while anything at all is left: a single request larger than what is free still goes
through, so the pool overshoots by at most one reservation and never deadlocks on a
frame bigger than itself. Pure bookkeeping; the network layer allocates.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

Waiter = Callable[[], None]


class MemoryPool:
    def __init__(self, capacity: int | None) -> None:
        """``capacity`` None (Kafka's -1): unbounded, every reservation succeeds."""
        self.capacity = capacity
        self.used = 0
        self._waiters: deque[Waiter] = deque()

    @property
    def available(self) -> int | None:
        return None if self.capacity is None else self.capacity - self.used

    def try_reserve(self, nbytes: int) -> bool:
        if self.capacity is not None and self.used >= self.capacity:
            return False
        self.used += nbytes
        return True

    def release(self, nbytes: int) -> None:
        """Give ``nbytes`` back, then call waiters while memory is left."""
        self.used -= nbytes
        assert self.used >= 0, "released more than was reserved"
        while self._waiters and (self.capacity is None or self.used < self.capacity):
            self._waiters.popleft()()

    def wait(self, waiter: Waiter) -> None:
        """Call ``waiter`` once memory is free again (it then calls :meth:`try_reserve`)."""
        self._waiters.append(waiter)

    def cancel(self, waiter: Waiter) -> None:
        if waiter in self._waiters:
            self._waiters.remove(waiter)

    @property
    def waiting(self) -> int:
        return len(self._waiters)
