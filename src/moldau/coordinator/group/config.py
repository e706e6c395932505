"""Group coordinator settings, under Kafka's broker config names and defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GroupConfig:
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4_096
    # How long a group write (offset commit, join, sync ...) waits for the replicas to
    # acknowledge it before the request fails (COORDINATOR_NOT_AVAILABLE, as in Kafka).
    offsets_commit_timeout_ms: int = 5_000

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
