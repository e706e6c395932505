"""Group coordinator settings, under Kafka's broker config names and defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from moldau.config.broker import BrokerConfig


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

    @classmethod
    def from_config(cls, config: BrokerConfig) -> GroupConfig:
        return cls(
            group_min_session_timeout_ms=config.int("group.min.session.timeout.ms"),
            group_max_session_timeout_ms=config.int("group.max.session.timeout.ms"),
            group_initial_rebalance_delay_ms=config.int("group.initial.rebalance.delay.ms"),
            offsets_retention_minutes=config.int("offsets.retention.minutes"),
            offsets_retention_check_interval_ms=config.int("offsets.retention.check.interval.ms"),
            offset_metadata_max_bytes=config.int("offset.metadata.max.bytes"),
            offsets_commit_timeout_ms=config.int("offsets.commit.timeout.ms"),
        )

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
