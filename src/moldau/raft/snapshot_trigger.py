"""When a node snapshots its metadata log (Kafka's SnapshotGenerator triggers).

Two triggers, as Kafka's: ``metadata.log.max.record.bytes.between.snapshots`` of committed
records since the last snapshot, or ``metadata.log.max.snapshot.interval.ms`` passed since
the last snapshot with at least one committed record since (KIP-876; 0 turns the time
trigger off). A plain object fed the published bytes and the clock's milliseconds: the
driver asks ``due`` after each publish and arms one timer at ``deadline_ms`` so a quiet
log still gets its time-based snapshot.
"""

from __future__ import annotations


class SnapshotTrigger:
    def __init__(self, max_bytes: int, max_interval_ms: int, now_ms: int) -> None:
        self.max_bytes = max_bytes
        self.max_interval_ms = max_interval_ms
        self.bytes_since = 0
        self.last_ms = now_ms  # as Kafka: the interval counts from the start

    def published(self, log_bytes: int) -> None:
        """Committed records of ``log_bytes`` were applied."""
        self.bytes_since += log_bytes

    def reset(self, now_ms: int) -> None:
        """A snapshot was started, or loaded, covering everything applied."""
        self.bytes_since = 0
        self.last_ms = now_ms

    def deadline_ms(self) -> int | None:
        """When the time trigger fires; None while nothing new was committed or it is off."""
        if self.max_interval_ms <= 0 or self.bytes_since == 0:
            return None
        return self.last_ms + self.max_interval_ms

    def due(self, now_ms: int) -> str | None:
        """Why a snapshot is owed now ("bytes" or "time"), or None."""
        if self.bytes_since >= self.max_bytes:
            return "bytes"
        deadline = self.deadline_ms()
        return "time" if deadline is not None and now_ms >= deadline else None
