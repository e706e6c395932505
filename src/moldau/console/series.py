"""Time series kept in memory for the charts: pure, driven by the sampler's clock."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable, Mapping

Key = tuple[str, ...]
Point = tuple[float, float]


class History:
    """The last `keep` points of every series; a series is keyed by a tuple such as
    ("messages", topic) or ("lag", group, topic). Safe to read while the sampler writes."""

    def __init__(self, keep: int) -> None:
        self._keep = keep
        self._series: dict[Key, deque[Point]] = {}
        self._lock = threading.Lock()

    def add(self, t: float, values: Mapping[Key, float]) -> None:
        with self._lock:
            for key, value in values.items():
                points = self._series.get(key)
                if points is None:
                    points = self._series[key] = deque(maxlen=self._keep)
                points.append((t, value))

    def select(self, *prefix: str) -> dict[str, list[Point]]:
        """The series keyed `prefix + (name,)`, by name."""
        n = len(prefix)
        with self._lock:
            return {
                key[n]: list(points)
                for key, points in self._series.items()
                if len(key) == n + 1 and key[:n] == prefix
            }

    def totals(self, *prefix: str) -> dict[str, list[Point]]:
        """The series under `prefix`, summed per next key part at each sample time
        (e.g. totals("lag") is the total lag of each group)."""
        n = len(prefix)
        sums: dict[str, dict[float, float]] = {}
        with self._lock:
            for key, points in self._series.items():
                if len(key) > n and key[:n] == prefix:
                    per_time = sums.setdefault(key[n], {})
                    for t, v in points:
                        per_time[t] = per_time.get(t, 0.0) + v
        return {name: sorted(per_time.items()) for name, per_time in sums.items()}


class Rates:
    """Per-second rates from monotonic counters (a counter that went down was reset:
    its new value counts from zero). The first observation of a key yields no rate."""

    def __init__(self) -> None:
        self._last: dict[Hashable, tuple[float, float]] = {}

    def update(self, t: float, counters: Mapping[Key, float]) -> dict[Key, float]:
        rates = {}
        for key, value in counters.items():
            previous = self._last.get(key)
            self._last[key] = (t, value)
            if previous is None or t <= previous[0]:
                continue
            t0, v0 = previous
            delta = value - v0 if value >= v0 else value
            rates[key] = delta / (t - t0)
        return rates
