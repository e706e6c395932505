"""Deadlines by key, earliest first: the coordinator's stand-in for Kafka's purgatories.

Re-arming or cancelling a key leaves its old heap entry behind; stale entries are
recognised (their deadline no longer matches) and dropped lazily, keeping every
operation O(log n).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class Timers(Generic[K]):
    def __init__(self) -> None:
        self._deadlines: dict[K, int] = {}
        self._heap: list[tuple[int, int, K]] = []
        self._seq = itertools.count()

    def copy(self) -> Timers[K]:
        other: Timers[K] = Timers()
        other._deadlines = dict(self._deadlines)
        other._heap = list(self._heap)
        other._seq = itertools.count(next(self._seq))
        return other

    def set(self, key: K, deadline_ms: int) -> None:
        self._deadlines[key] = deadline_ms
        heapq.heappush(self._heap, (deadline_ms, next(self._seq), key))

    def armed(self, key: K) -> bool:
        return key in self._deadlines

    def cancel(self, key: K) -> None:
        self._deadlines.pop(key, None)

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> K | None:
        """The earliest key whose deadline is <= now_ms, disarmed; None when nothing is due."""
        self._drop_stale()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        del self._deadlines[key]
        return key

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap and self._deadlines.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)
