"""The bytes of all requests in flight, bounded by ``queued.max.request.bytes``.

A connection reserves memory for a frame as the frame's bytes arrive and gives it back
when the request has been handled. While the pool is exhausted, connections that need
more wait (they stop reading from their sockets) and are granted memory, oldest first,
as it is released. Like Kafka's non-strict ``SimpleMemoryPool``, a reservation succeeds
while anything at all is left, so a request larger than what is free still goes through.

Frames grow step by step, so unlike Kafka's whole-request buffers they can hold memory
while waiting for more: when everything reserved belongs to waiting frames, nothing
would ever be released. Then the waiter holding the most is granted its step anyway, and
keeps being preferred until its frame is whole and handled; so the pool overshoots by at
most about one frame (``socket.request.max.bytes``), Kafka's bound for its own pool.
Pure bookkeeping; the network layer allocates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Granted = Callable[[], None]


@dataclass(slots=True)
class _Waiter:
    nbytes: int  # wanted
    held: int  # already reserved by the same frame
    granted: Granted


class MemoryPool:
    def __init__(self, capacity: int | None) -> None:
        """``capacity`` None (Kafka's -1): unbounded, every reservation succeeds."""
        self.capacity = capacity
        self.used = 0
        self._waiters: list[_Waiter] = []  # oldest first
        self._held_by_waiters = 0

    @property
    def available(self) -> int | None:
        return None if self.capacity is None else self.capacity - self.used

    def try_reserve(self, nbytes: int) -> bool:
        if self.capacity is not None and self.used >= self.capacity:
            return False
        self.used += nbytes
        return True

    def wait(self, nbytes: int, held: int, granted: Granted) -> None:
        """Reserve ``nbytes`` once possible, then call ``granted``. ``held``: what the
        waiting frame already holds (it is not released while the frame waits)."""
        self._waiters.append(_Waiter(nbytes, held, granted))
        self._held_by_waiters += held
        self._grant()

    def cancel(self, granted: Granted) -> None:
        for i, w in enumerate(self._waiters):
            if w.granted == granted:
                del self._waiters[i]
                self._held_by_waiters -= w.held
                return

    def release(self, nbytes: int) -> None:
        self.used -= nbytes
        assert self.used >= 0, "released more than was reserved"
        if self._waiters:
            self._grant()

    def _grant(self) -> None:
        while self._waiters:
            if self.capacity is None or self.used < self.capacity:
                waiter = self._waiters[0]
            elif self.used <= self._held_by_waiters:  # all memory waits on more: stuck
                waiter = max(self._waiters, key=lambda w: w.held)  # the first of the largest
            else:
                return
            self._waiters.remove(waiter)
            self._held_by_waiters -= waiter.held
            self.used += waiter.nbytes
            waiter.granted()

    @property
    def waiting(self) -> int:
        return len(self._waiters)
