"""Delayed operations: requests parked until something happens to a key or time runs out.

Kafka's purgatory, reduced to what asyncio needs. A parked operation is watched under keys
(a partition's high watermark, its log end offset, a coordinator shard...); ``notify(key)``
wakes everything watching it. Two forms: :meth:`Purgatory.wait`, a future a task awaits
and then re-checks its condition, and :meth:`Purgatory.watch`, a check run right inside
``notify`` (Kafka's ``tryComplete``), for operations on the hot path that need no task of
their own: an acks=all produce completes in the same call that moves the high watermark.
Deadlines come from the node's :class:`~moldau.clock.Scheduler`, so tests drive them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable

from moldau.clock import Scheduler, TimerHandle
from moldau.stats.timing import parked


class _Watch:
    """One :meth:`Purgatory.watch` operation: its keys, its check, its deadline timer."""

    __slots__ = ("keys", "check", "timer", "done")

    def __init__(self, keys: list[Hashable], check: Callable[[bool], bool]) -> None:
        self.keys = keys
        self.check = check
        self.timer: TimerHandle | None = None
        self.done = False


class Purgatory:
    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._watchers: dict[Hashable, set[asyncio.Future[bool] | _Watch]] = {}

    def notify(self, key: Hashable) -> None:
        """Wake every operation watching ``key``; watches whose check is not yet
        satisfied stay watching it."""
        waiters = self._watchers.pop(key, None)
        if not waiters:
            return
        for waiter in waiters:
            if isinstance(waiter, _Watch):
                if waiter.done:
                    continue
                if waiter.check(False):
                    self._finish(waiter)
                else:
                    self._watchers.setdefault(key, set()).add(waiter)
            elif not waiter.done():
                waiter.set_result(True)

    def watched(self) -> int:
        return sum(len(w) for w in self._watchers.values())

    def watch(
        self, keys: Iterable[Hashable], deadline_ms: int, check: Callable[[bool], bool]
    ) -> None:
        """Run ``check(False)`` at each notify of one of ``keys`` until it returns True;
        if none did by ``deadline_ms``, ``check(True)`` once (it must then finish). The
        caller has checked once already: a watch only waits for what comes next."""
        if deadline_ms <= self.scheduler.clock.now_ms():
            check(True)
            return
        op = _Watch(list(keys), check)
        for key in op.keys:
            self._watchers.setdefault(key, set()).add(op)

        def expire() -> None:
            if not op.done:
                check(True)
                self._finish(op)

        op.timer = self.scheduler.call_at(deadline_ms, expire)

    def _finish(self, op: _Watch) -> None:
        op.done = True
        if op.timer is not None:
            op.timer.cancel()
        for key in op.keys:
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.discard(op)
                if not watchers:
                    del self._watchers[key]

    async def wait(self, keys: Iterable[Hashable], deadline_ms: int) -> bool:
        """Wait until any of ``keys`` is notified (True) or the deadline passes (False)."""
        if deadline_ms <= self.scheduler.clock.now_ms():
            return False
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._watchers.setdefault(key, set()).add(fut)

        def expire() -> None:
            if not fut.done():
                fut.set_result(False)

        timer = self.scheduler.call_at(deadline_ms, expire)
        try:
            return await parked(fut)  # the request's remote time
        finally:
            timer.cancel()
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(fut)
                    if not watchers:
                        del self._watchers[key]
