"""Delayed operations: requests parked until something happens to a key or time runs out.

Kafka's purgatory, reduced to what asyncio needs: a parked operation is a future watched
under keys (a partition's high watermark, its log end offset, a coordinator shard...);
``notify(key)`` wakes everything watching it and the waiter re-checks its condition.
Deadlines come from the node's :class:`~moldau.clock.Scheduler`, so tests drive them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable

from moldau.clock import Scheduler
from moldau.stats.timing import parked


class Purgatory:
    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._watchers: dict[Hashable, set[asyncio.Future[bool]]] = {}

    def notify(self, key: Hashable) -> None:
        """Wake every operation watching ``key``."""
        waiters = self._watchers.pop(key, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(True)

    def watched(self) -> int:
        return sum(len(w) for w in self._watchers.values())

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
