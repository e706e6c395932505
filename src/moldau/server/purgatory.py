"""Delayed operations: requests parked until something happens to a key or time runs out.

Fetch long-polls park on their partitions and are woken by appends (not by polling).
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[Hashable, set[asyncio.Future[None]]] = {}

    def notify(self, key: Hashable) -> None:
        """Wake every operation watching ``key``."""
        waiters = self._watchers.pop(key, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    async def wait(self, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """Wait until any of ``keys`` is notified (True) or the timeout passes (False)."""
        if timeout_s <= 0:
            return False
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._watchers.setdefault(key, set()).add(fut)
        try:
            await asyncio.wait_for(fut, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(fut)
                    if not watchers:
                        del self._watchers[key]
