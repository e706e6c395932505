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
import heapq
import itertools
import logging
from collections.abc import Callable, Hashable, Iterable

from moldau.clock import Scheduler, TimerHandle
from moldau.stats.timing import parked

log = logging.getLogger(__name__)


class _Watch:
    """One :meth:`Purgatory.watch` operation: its keys, its check, whether it is over."""

    __slots__ = ("keys", "check", "done")

    def __init__(self, keys: list[Hashable], check: Callable[[bool], bool]) -> None:
        self.keys = keys
        self.check = check
        self.done = False


class Purgatory:
    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._watchers: dict[Hashable, set[asyncio.Future[bool] | _Watch]] = {}
        # Watch deadlines share one timer, armed for the earliest (a timer per acks=all
        # produce and per parked follower fetch cost as much as the rest of the watch).
        # Finished watches leave their entry behind until it is popped or the heap is
        # rebuilt without them (when they are most of it).
        self._deadlines: list[tuple[int, int, _Watch]] = []
        self._seq = itertools.count()
        self._live = 0  # unfinished watches in _deadlines
        self._timer: TimerHandle | None = None
        self._timer_at = 0

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
        if len(self._deadlines) > 64 and self._live < len(self._deadlines) // 4:
            self._deadlines = [d for d in self._deadlines if not d[2].done]
            heapq.heapify(self._deadlines)
        heapq.heappush(self._deadlines, (deadline_ms, next(self._seq), op))
        self._live += 1
        if self._timer is None or deadline_ms < self._timer_at:
            self._arm(deadline_ms)

    def _arm(self, deadline_ms: int) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline_ms
        self._timer = self.scheduler.call_at(deadline_ms, self._expire)

    def _expire(self) -> None:
        """Check every watch whose deadline has passed one last time; re-arm."""
        self._timer = None
        now = self.scheduler.clock.now_ms()
        while self._deadlines and (self._deadlines[0][0] <= now or self._deadlines[0][2].done):
            _, _, op = heapq.heappop(self._deadlines)
            if not op.done:
                try:
                    op.check(True)
                except Exception:  # one failed check must not keep the others waiting
                    log.exception("purgatory: an expired operation's check failed")
                self._finish(op)
        if self._deadlines and (self._timer is None or self._deadlines[0][0] < self._timer_at):
            self._arm(self._deadlines[0][0])

    def _finish(self, op: _Watch) -> None:
        if op.done:
            return
        op.done = True
        self._live -= 1
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
