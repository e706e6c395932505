"""Group coordinator settings, under Kafka's broker config names and defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .assignors import assignor_names

if TYPE_CHECKING:
    from moldau.config.broker import BrokerConfig


@dataclass(frozen=True)
class GroupConfig:
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2_147_483_647
    """group.max.size: members of a classic group (JoinGroup beyond it: GROUP_MAX_SIZE_REACHED);
    a consumer group becomes classic only within it (Kafka's downgrade)."""
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4_096
    # How long a group write (offset commit, join, sync ...) waits for the replicas to
    # acknowledge it before the request fails (COORDINATOR_NOT_AVAILABLE, as in Kafka).
    offsets_commit_timeout_ms: int = 5_000
    # KIP-848 consumer groups (group.protocol=consumer).
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_max_size: int = 2_147_483_647
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    """Server-side assignor names; the first is the default."""
    rebalance_protocols: frozenset[str] = frozenset({"classic", "consumer", "share"})
    consumer_migration_policy: str = "bidirectional"
    """group.consumer.migration.policy: disabled, upgrade, downgrade or bidirectional."""

    @classmethod
    def from_config(cls, config: BrokerConfig) -> GroupConfig:
        return cls(
            group_min_session_timeout_ms=config.int("group.min.session.timeout.ms"),
            group_max_session_timeout_ms=config.int("group.max.session.timeout.ms"),
            group_initial_rebalance_delay_ms=config.int("group.initial.rebalance.delay.ms"),
            group_max_size=config.int("group.max.size"),
            offsets_retention_minutes=config.int("offsets.retention.minutes"),
            offsets_retention_check_interval_ms=config.int("offsets.retention.check.interval.ms"),
            offset_metadata_max_bytes=config.int("offset.metadata.max.bytes"),
            offsets_commit_timeout_ms=config.int("offsets.commit.timeout.ms"),
            consumer_session_timeout_ms=config.int("group.consumer.session.timeout.ms"),
            consumer_heartbeat_interval_ms=config.int("group.consumer.heartbeat.interval.ms"),
            consumer_max_size=config.int("group.consumer.max.size"),
            consumer_assignors=tuple(
                assignor_names(config.get("group.consumer.assignors").split(","))
            ),
            consumer_migration_policy=config.get("group.consumer.migration.policy").lower(),
            rebalance_protocols=frozenset(
                p.strip().lower()
                for p in config.get("group.coordinator.rebalance.protocols").split(",")
            ),
        )

    @property
    def upgrade_enabled(self) -> bool:
        """A non-empty classic group may become a consumer group online."""
        return self.consumer_migration_policy in ("upgrade", "bidirectional")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
