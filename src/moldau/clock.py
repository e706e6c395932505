"""Time and timers for a node: one clock and one scheduler that every component shares.

Everything that waits (group and transaction deadlines, retention, flushes, fetch and
produce waits, Raft timeouts) takes its time from a :class:`Clock` and its timers from a
:class:`Scheduler`, so tests can swap in :class:`ManualClock`/:class:`ManualScheduler`
and drive time step by step instead of sleeping. Times are wall-clock milliseconds, as
Kafka's ``Time.milliseconds()``: they are persisted (commit timestamps, expiry).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

log = logging.getLogger(__name__)


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def time(self) -> float:
        """Seconds since the epoch (what ``time.time`` returns)."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def time(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, now_ms: int = 0) -> None:
        self._now = now_ms

    def now_ms(self) -> int:
        return self._now

    def time(self) -> float:
        return self._now / 1000

    def advance(self, ms: int) -> None:
        self._now += ms


class TimerHandle(Protocol):
    def cancel(self) -> object: ...


class Scheduler(Protocol):
    clock: Clock

    def call_at(self, deadline_ms: int, fn: Callable[[], object]) -> TimerHandle:
        """Run ``fn`` once the clock reaches ``deadline_ms``."""
        ...

    def every(
        self, interval_ms: int, fn: Callable[[], object], *, in_thread: bool = False
    ) -> TimerHandle:
        """Run ``fn`` every ``interval_ms``; ``in_thread`` runs it off the event loop (fsync,
        cleaning). Exceptions are logged, never stop the schedule."""
        ...


class AsyncioScheduler:
    """The scheduler of a running node: timers on the asyncio event loop."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self._tasks: set[asyncio.Task[None]] = set()

    def call_at(self, deadline_ms: int, fn: Callable[[], object]) -> TimerHandle:
        delay = max(0.0, (deadline_ms - self.clock.now_ms()) / 1000)
        return asyncio.get_running_loop().call_later(delay, _guarded(fn))

    def every(
        self, interval_ms: int, fn: Callable[[], object], *, in_thread: bool = False
    ) -> TimerHandle:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                try:
                    if in_thread:
                        await asyncio.to_thread(fn)
                    else:
                        result = fn()
                        if isinstance(result, Awaitable):
                            await result
                except Exception:
                    log.exception("periodic task %s failed", getattr(fn, "__name__", fn))

        task = asyncio.get_running_loop().create_task(loop())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()


def _guarded(fn: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        try:
            fn()
        except Exception:
            log.exception("timer %s failed", getattr(fn, "__name__", fn))

    return run


class _ManualTimer:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualScheduler:
    """Timers fired by :meth:`advance`, in deadline order, for step-by-step tests."""

    def __init__(self, clock: ManualClock | None = None) -> None:
        self.clock: ManualClock = clock or ManualClock()
        self._heap: list[tuple[int, int, _ManualTimer, Callable[[], object]]] = []
        self._seq = itertools.count()

    def call_at(self, deadline_ms: int, fn: Callable[[], object]) -> TimerHandle:
        timer = _ManualTimer()
        heapq.heappush(self._heap, (deadline_ms, next(self._seq), timer, fn))
        return timer

    def every(
        self, interval_ms: int, fn: Callable[[], object], *, in_thread: bool = False
    ) -> TimerHandle:
        timer = _ManualTimer()

        def again() -> None:
            if not timer.cancelled:
                fn()
                heapq.heappush(
                    self._heap,
                    (self.clock.now_ms() + interval_ms, next(self._seq), timer, again),
                )

        heapq.heappush(
            self._heap, (self.clock.now_ms() + interval_ms, next(self._seq), timer, again)
        )
        return timer

    def advance(self, ms: int) -> None:
        """Move the clock forward, firing every timer that falls due on the way."""
        target = self.clock.now_ms() + ms
        while self._heap and self._heap[0][0] <= target:
            deadline, _, timer, fn = heapq.heappop(self._heap)
            self.clock.advance(max(0, deadline - self.clock.now_ms()))
            if not timer.cancelled:
                fn()
        self.clock.advance(target - self.clock.now_ms())
