"""Per-group configs (Kafka 4's GroupConfig): set with IncrementalAlterConfigs on a GROUP
resource (type 32), stored as ConfigRecords in the metadata log, read back with
DescribeConfigs. A group without an override uses the broker's ``group.*`` default.

Bounds are the broker's min/max keys, as Kafka's: a share group's
``share.record.lock.duration.ms`` stays within ``group.share.min.record.lock.duration.ms``
and ``group.share.max.record.lock.duration.ms`` (Kafka's defaults 15000 and 60000 when the
broker sets neither).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from moldau.protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    broker_key: str  # the broker default it overrides (its synonym in DescribeConfigs)
    default: str
    doc: str
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()

    @property
    def is_int(self) -> bool:
        return not self.choices

    def bound_keys(self) -> tuple[str, str]:
        """The broker keys bounding this config: group.share.min.X / group.share.max.X."""
        prefix = "group.share." if self.broker_key.startswith("group.share.") else "group.consumer."
        rest = self.broker_key[len(prefix) :]
        return prefix + "min." + rest, prefix + "max." + rest

    def validate(self, value: str, broker_props: Mapping[str, str] | None = None) -> None:
        if self.choices:
            if value not in self.choices:
                raise KafkaError(
                    f"Invalid value {value} for configuration {self.name}: "
                    f"String must be one of: {', '.join(self.choices)}",
                    ErrorCode.INVALID_CONFIG,
                )
            return
        try:
            number = int(value)
        except ValueError:
            raise KafkaError(
                f"Invalid value {value} for configuration {self.name}: Not a number of type INT",
                ErrorCode.INVALID_CONFIG,
            ) from None
        low, high = self.minimum, self.maximum
        if broker_props and self.broker_key:
            min_key, max_key = self.bound_keys()
            low = int(broker_props[min_key]) if min_key in broker_props else low
            high = int(broker_props[max_key]) if max_key in broker_props else high
        if (low is not None and number < low) or (high is not None and number > high):
            raise KafkaError(
                f"Invalid value {value} for configuration {self.name}: Value must be in "
                f"[{low}, {high}]",
                ErrorCode.INVALID_CONFIG,
            )


GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    d.name: d
    for d in [
        GroupConfigDef(
            "consumer.session.timeout.ms",
            "group.consumer.session.timeout.ms",
            "45000",
            "Session timeout of a consumer group's members (KIP-848).",
            45000,
            60000,
        ),
        GroupConfigDef(
            "consumer.heartbeat.interval.ms",
            "group.consumer.heartbeat.interval.ms",
            "5000",
            "Heartbeat interval of a consumer group's members (KIP-848).",
            5000,
            15000,
        ),
        GroupConfigDef(
            "share.session.timeout.ms",
            "group.share.session.timeout.ms",
            "45000",
            "Session timeout of a share group's members.",
            45000,
            60000,
        ),
        GroupConfigDef(
            "share.heartbeat.interval.ms",
            "group.share.heartbeat.interval.ms",
            "5000",
            "Heartbeat interval of a share group's members.",
            5000,
            15000,
        ),
        GroupConfigDef(
            "share.record.lock.duration.ms",
            "group.share.record.lock.duration.ms",
            "30000",
            "How long a share consumer holds an acquired record before it is redelivered.",
            15000,
            60000,
        ),
        GroupConfigDef(
            "share.auto.offset.reset",
            "",
            "latest",
            "Where a share group starts on a partition it has no state for.",
            choices=("latest", "earliest"),
        ),
        GroupConfigDef(
            "share.isolation.level",
            "",
            "read_uncommitted",
            "Whether share consumers see records of open and aborted transactions.",
            choices=("read_uncommitted", "read_committed"),
        ),
    ]
}


def validate_group_configs(
    configs: Mapping[str, str], broker_props: Mapping[str, str] | None = None
) -> None:
    """Raise INVALID_CONFIG for an unknown group config or a value out of the bounds
    (``broker_props``: the broker's min/max keys, else Kafka's defaults)."""
    for name, value in configs.items():
        spec = GROUP_CONFIGS.get(name)
        if spec is None:
            raise KafkaError(f"Unknown group config name: {name}", ErrorCode.INVALID_CONFIG)
        spec.validate(value, broker_props)
    session, interval = (
        int(_effective(name, configs, broker_props or {}))
        for name in ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms")
    )
    if session <= interval:
        # As Kafka: a member must be able to heartbeat at least once per session.
        raise KafkaError(
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms",
            ErrorCode.INVALID_CONFIG,
        )


def _effective(name: str, configs: Mapping[str, str], broker_props: Mapping[str, str]) -> str:
    """The group's value, else the broker's default for it, else Kafka's."""
    spec = GROUP_CONFIGS[name]
    return configs.get(name) or broker_props.get(spec.broker_key) or spec.default
