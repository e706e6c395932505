"""Kafka's sampled rate, shared by the client quotas (moldau.security.quotas) and the
replication quotas (moldau.replication.quota): ``samples`` windows of ``window_ms``, the
rate being their total over the elapsed window, at least ``samples - 1`` windows long
(so a first burst is measured against the whole window, as Kafka's Rate does)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Rate:
    """Kafka's SampledStat + Rate: ``samples`` windows of ``window_ms``, oldest reused."""

    samples: int = 11
    window_ms: int = 1000
    _starts: list[int] = field(default_factory=list)
    _values: list[float] = field(default_factory=list)
    _current: int = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self._starts:
            self._starts.append(now_ms)
            self._values.append(0.0)
        elif now_ms >= self._starts[self._current] + self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._starts):
                self._starts.append(now_ms)
                self._values.append(0.0)
            else:
                self._starts[self._current], self._values[self._current] = now_ms, 0.0
        self._values[self._current] += value

    def unrecord(self, value: float) -> None:
        if self._values:
            self._values[self._current] -= value

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for i, start in enumerate(self._starts):
            if now_ms - start >= expire:
                self._starts[i], self._values[i] = now_ms, 0.0

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        elapsed = now_ms - min(self._starts, default=now_ms)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def per_second(self, now_ms: int) -> float:
        window = self.window_size_ms(now_ms)
        return sum(self._values) * 1000 / window
