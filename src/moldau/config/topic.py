"""Per-topic log configuration: Kafka's topic config names, broker synonyms and defaults.

``TOPIC_CONFIGS`` is the single source of truth for every topic-level config: the broker
config, CreateTopics validation and DescribeConfigs all read it, so a name, default or
synonym is defined exactly once. The configs the storage layer honours are written out
here; every other topic config Kafka defines is added from Kafka's own definitions
(``moldau.config.kafka``) with ``acted=False`` and a word on why, so it is accepted,
stored and described back, never refused as unknown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import IntEnum
from typing import Any

from moldau.config.kafka import KAFKA_TOPIC_CONFIGS, KafkaKey
from moldau.protocol.errors import InvalidConfigError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
HOUR_MS = 3_600_000
MINUTE_MS = 60_000

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("delete", "compact")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigs ``ConfigSource`` values for where a value came from."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8


@dataclass(frozen=True)
class ConfigDef:
    """One topic config: its Kafka name and type, default, broker synonyms and check.

    ``synonyms`` are broker keys in Kafka's precedence order with the factor that turns
    their unit into the topic config's unit (``log.retention.hours`` -> ms).
    """

    name: str
    field: str
    type: str  # "long" | "int" | "double" | "boolean" | "string" | "list"
    default: str
    synonyms: tuple[tuple[str, int], ...]
    doc: str
    minimum: int | float | None = None
    maximum: int | float | None = None
    choices: tuple[str, ...] = ()
    acted: bool = True  # False: accepted and described, but Moldau does not apply it
    also: tuple[str, ...] = ()  # values allowed outside [minimum, maximum] ("-1")
    item_format: str = ""  # list items must match this (with its description after "|")

    @property
    def first_synonym(self) -> str | None:
        return self.synonyms[0][0] if self.synonyms else None

    def parse(self, raw: str, source: str) -> bool | int | float | str | tuple[str, ...]:
        """Parse and validate ``raw``; ``source`` names the key in error messages."""
        text = str(raw).strip()
        if self.type == "boolean":
            if text.lower() not in ("true", "false"):
                raise InvalidConfigError(
                    f"Invalid value {raw!r} for configuration {source}: "
                    "Expected value to be either true or false"
                )
            return text.lower() == "true"
        if self.type in ("long", "int"):
            return self._parse_number(text, source)
        if self.type == "double":
            return self._parse_double(text, source)
        if self.type == "list":
            # Empty is allowed (Kafka 4 accepts an empty cleanup.policy: neither policy).
            items = tuple(item.strip() for item in text.split(",") if item.strip())
            if self.item_format:
                self._check_format(raw, items, source)
            if self.choices and any(item not in self.choices for item in items):
                raise InvalidConfigError(
                    f"Invalid value {raw!r} for configuration {source}: "
                    f"expected a comma-separated list of {', '.join(self.choices)}"
                )
            return items
        if self.choices and text not in self.choices:
            raise InvalidConfigError(
                f"Invalid value {raw!r} for configuration {source}: "
                f"String must be one of: {', '.join(self.choices)}"
            )
        return text

    def _check_format(self, raw: str, items: tuple[str, ...], source: str) -> None:
        pattern, _, what = self.item_format.partition("|")
        if items != ("*",) and not all(re.fullmatch(pattern, item) for item in items):
            raise InvalidConfigError(f"Invalid value {raw} for configuration {source}: {what}")

    def _parse_number(self, text: str, source: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise InvalidConfigError(
                f"Invalid value {text!r} for configuration {source}: "
                f"Not a number of type {self.type.upper()}"
            ) from None
        if text in self.also:
            return value
        upper = INT_MAX if self.type == "int" else LONG_MAX
        if value > upper or value < -upper - 1:
            raise InvalidConfigError(f"Invalid value {value} for configuration {source}: too large")
        if self.maximum is not None and value > self.maximum:
            raise InvalidConfigError(
                f"Invalid value {value} for configuration {source}: "
                f"Value must be no more than {self.maximum}"
            )
        if self.minimum is not None and value < self.minimum:
            raise InvalidConfigError(
                f"Invalid value {value} for configuration {source}: "
                f"Value must be at least {self.minimum}"
            )
        return value

    def _parse_double(self, text: str, source: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidConfigError(
                f"Invalid value {text!r} for configuration {source}: Not a number of type DOUBLE"
            )
        if self.minimum is not None and value < self.minimum:
            raise InvalidConfigError(
                f"Invalid value {value} for configuration {source}: "
                f"Value must be at least {self.minimum}"
            )
        if self.maximum is not None and value > self.maximum:
            raise InvalidConfigError(
                f"Invalid value {value} for configuration {source}: "
                f"Value must be no more than {self.maximum}"
            )
        return value


_THROTTLED_REPLICA = (
    r"[0-9]+:[0-9]+|Must be the literal '*' or a list of replicas in the following format: "
    "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
)

TOPIC_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        ConfigDef(
            "segment.bytes",
            "segment_bytes",
            "int",
            str(1 << 30),
            (("log.segment.bytes", 1),),
            "Segment file size; a new segment is rolled when the active one would exceed it.",
            minimum=14,
        ),
        ConfigDef(
            "segment.ms",
            "segment_ms",
            "long",
            str(7 * 24 * HOUR_MS),
            (("log.roll.ms", 1), ("log.roll.hours", HOUR_MS)),
            "Time after which a non-empty active segment is rolled, so retention can delete it.",
            minimum=1,
        ),
        ConfigDef(
            "segment.index.bytes",
            "segment_index_bytes",
            "int",
            str(10 * 1024 * 1024),
            (("log.index.size.max.bytes", 1),),
            "Preallocated size of each offset/time index; a full index rolls the segment.",
            minimum=4,
        ),
        ConfigDef(
            "index.interval.bytes",
            "index_interval_bytes",
            "int",
            "4096",
            (("log.index.interval.bytes", 1),),
            "Bytes of batches between two index entries: sparser index, longer scans.",
            minimum=0,
        ),
        ConfigDef(
            "retention.ms",
            "retention_ms",
            "long",
            str(7 * 24 * HOUR_MS),
            (
                ("log.retention.ms", 1),
                ("log.retention.minutes", MINUTE_MS),
                ("log.retention.hours", HOUR_MS),
            ),
            "Age after which whole old segments are deleted; -1 keeps them forever.",
            minimum=-1,
        ),
        ConfigDef(
            "retention.bytes",
            "retention_bytes",
            "long",
            "-1",
            (("log.retention.bytes", 1),),
            "Partition size above which whole old segments are deleted; -1 means no limit.",
        ),
        ConfigDef(
            "flush.messages",
            "flush_messages",
            "long",
            str(LONG_MAX),
            (("log.flush.interval.messages", 1),),
            "Unflushed messages that force an fsync; by default the OS decides.",
            minimum=1,
        ),
        ConfigDef(
            "flush.ms",
            "flush_ms",
            "long",
            str(LONG_MAX),
            (("log.flush.interval.ms", 1),),
            "Time after which unflushed data is fsynced; by default the OS decides.",
            minimum=0,
        ),
        ConfigDef(
            "max.message.bytes",
            "max_message_bytes",
            "int",
            "1048588",
            (("message.max.bytes", 1),),
            "Largest record batch size accepted on produce.",
            minimum=0,
        ),
        ConfigDef(
            "message.timestamp.type",
            "message_timestamp_type",
            "string",
            "CreateTime",
            (("log.message.timestamp.type", 1),),
            "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker time.",
            choices=TIMESTAMP_TYPES,
        ),
        ConfigDef(
            "cleanup.policy",
            "cleanup_policy",
            "list",
            "delete",
            (("log.cleanup.policy", 1),),
            "delete: retention removes old segments; compact: keep the last value per key.",
            choices=CLEANUP_POLICIES,
        ),
        ConfigDef(
            "file.delete.delay.ms",
            "file_delete_delay_ms",
            "long",
            "60000",
            (("log.segment.delete.delay.ms", 1),),
            "Delay before a deleted segment's files are removed, so in-flight reads finish.",
            minimum=0,
        ),
        ConfigDef(
            "min.insync.replicas",
            "min_insync_replicas",
            "int",
            "1",
            (("min.insync.replicas", 1),),
            "Replicas that must acknowledge an acks=all produce.",
            minimum=1,
        ),
        ConfigDef(
            "unclean.leader.election.enable",
            "unclean_leader_election_enable",
            "boolean",
            "false",
            (("unclean.leader.election.enable", 1),),
            "Elect a replica outside the ISR when no ISR member is alive (may lose data).",
        ),
        ConfigDef(
            "compression.type",
            "compression_type",
            "string",
            "producer",
            (("compression.type", 1),),
            "Final compression codec; producer keeps whatever the producer used.",
            choices=COMPRESSION_TYPES,
        ),
        ConfigDef(
            "compression.gzip.level",
            "compression_gzip_level",
            "int",
            "-1",
            (("compression.gzip.level", 1),),
            "gzip level when the broker recompresses to gzip (KIP-390); -1 is zlib's default.",
            minimum=1,
            maximum=9,
            also=("-1",),
        ),
        ConfigDef(
            "compression.lz4.level",
            "compression_lz4_level",
            "int",
            "9",
            (("compression.lz4.level", 1),),
            "lz4 level when the broker recompresses to lz4 (KIP-390).",
            minimum=1,
            maximum=17,
        ),
        ConfigDef(
            "compression.zstd.level",
            "compression_zstd_level",
            "int",
            "3",
            (("compression.zstd.level", 1),),
            "zstd level when the broker recompresses to zstd (KIP-390).",
            minimum=-131072,
            maximum=22,
        ),
        ConfigDef(
            "min.cleanable.dirty.ratio",
            "min_cleanable_dirty_ratio",
            "double",
            "0.5",
            (("log.cleaner.min.cleanable.ratio", 1),),
            "Dirty share of the cleanable bytes at which the log cleaner compacts a log.",
            minimum=0,
            maximum=1,
        ),
        ConfigDef(
            "delete.retention.ms",
            "delete_retention_ms",
            "long",
            str(24 * HOUR_MS),
            (("log.cleaner.delete.retention.ms", 1),),
            "How long compaction keeps tombstones, so consumers can see the deletion.",
            minimum=0,
        ),
        ConfigDef(
            "min.compaction.lag.ms",
            "min_compaction_lag_ms",
            "long",
            "0",
            (("log.cleaner.min.compaction.lag.ms", 1),),
            "Minimum age of a record before compaction may remove it.",
            minimum=0,
        ),
        ConfigDef(
            "max.compaction.lag.ms",
            "max_compaction_lag_ms",
            "long",
            str(LONG_MAX),
            (("log.cleaner.max.compaction.lag.ms", 1),),
            "Maximum age of an uncompacted record: older dirty data is cleaned regardless of "
            "the dirty ratio.",
            minimum=1,
        ),
        ConfigDef(
            "remote.storage.enable",
            "remote_storage_enable",
            "boolean",
            "false",
            (),
            "Tier this topic: copy closed segments to the remote storage manager (KIP-405).",
        ),
        ConfigDef(
            "local.retention.ms",
            "local_retention_ms",
            "long",
            "-2",
            (("log.local.retention.ms", 1),),
            "How long copied segments stay on the broker's disk; -2: as retention.ms.",
            minimum=-2,
        ),
        ConfigDef(
            "local.retention.bytes",
            "local_retention_bytes",
            "long",
            "-2",
            (("log.local.retention.bytes", 1),),
            "Local size above which copied segments leave the disk; -2: as retention.bytes.",
            minimum=-2,
        ),
        ConfigDef(
            "remote.log.copy.disable",
            "remote_log_copy_disable",
            "boolean",
            "false",
            (),
            "Stop copying to the remote tier; remote data stays readable (KIP-950).",
        ),
        ConfigDef(
            "remote.log.delete.on.disable",
            "remote_log_delete_on_disable",
            "boolean",
            "false",
            (),
            "Required to turn remote.storage.enable off: the remote data is deleted (KIP-950).",
        ),
        *(
            ConfigDef(
                f"{side}.replication.throttled.replicas",
                "",
                "list",
                "",
                (),
                f"Replicas throttled on the {side} side at {side}.replication.throttled.rate "
                "(KIP-73): partition:broker,... or * (kafka-reassign-partitions --throttle).",
                item_format=_THROTTLED_REPLICA,
            )
            for side in ("leader", "follower")
        ),
    )
}


def _not_acted_on(k: KafkaKey, why: str) -> ConfigDef:
    """A Kafka topic config Moldau accepts and describes but does not apply."""
    return ConfigDef(
        k.name,
        "",
        k.type,
        k.default or "",
        ((k.server_default_property, 1),) if k.server_default_property else (),
        why,
        minimum=k.minimum,
        maximum=k.maximum,
        choices=k.choices,
        acted=False,
        also=k.also,
    )


# Why Moldau does not act on these Kafka topic configs (shown in DescribeConfigs
# documentation and docs/configuration.md).
NOT_ACTED_ON = {
    "local.retention.bytes": "Tiered storage settings.",
    "local.retention.ms": "Tiered storage settings.",
    "remote.log.copy.disable": "Tiered storage settings.",
    "remote.log.delete.on.disable": "Tiered storage settings.",
    "remote.storage.enable": "Tiered storage settings.",
    "message.downconversion.enable": "Moldau serves record batches v2 only; it never "
    "down-converts for old fetch versions.",
    "message.format.version": "Deprecated by Kafka (ignored from 3.0 on); Moldau writes v2.",
    "message.timestamp.after.max.ms": "Produce does not check timestamps against broker time.",
    "message.timestamp.before.max.ms": "Produce does not check timestamps against broker time.",
    "message.timestamp.difference.max.ms": "Produce does not check timestamps against broker time.",
    "preallocate": "Segment files grow as written; they are not preallocated.",
    "segment.jitter.ms": "Segments roll at segment.ms exactly, without random jitter.",
}

TOPIC_CONFIGS.update(
    (k.name, _not_acted_on(k, NOT_ACTED_ON.get(k.name, "Not acted on by Moldau.")))
    for k in KAFKA_TOPIC_CONFIGS.values()
    if k.name not in TOPIC_CONFIGS
)

# Broker key -> topic key, for the broker config and DescribeConfigs synonyms.
BROKER_SYNONYMS: dict[str, str] = {
    broker_key: d.name for d in TOPIC_CONFIGS.values() for broker_key, _ in d.synonyms
}


@dataclass(frozen=True)
class ResolvedConfig:
    """A topic config's effective value and where it came from (for DescribeConfigs)."""

    name: str
    value: str
    source: ConfigSource
    broker_key: str | None = None


def resolve_configs(
    topic_overrides: Mapping[str, str], defaults: Mapping[str, str]
) -> dict[str, ResolvedConfig]:
    """Effective string value of every topic config: topic override, else the first broker
    synonym set in ``defaults``, else Kafka's default. Values are validated."""
    unknown = sorted(set(topic_overrides) - TOPIC_CONFIGS.keys())
    if unknown:
        raise InvalidConfigError(f"Unknown topic config name: {', '.join(unknown)}")
    resolved: dict[str, ResolvedConfig] = {}
    for d in TOPIC_CONFIGS.values():
        if d.name in topic_overrides:
            raw = topic_overrides[d.name]
            d.parse(raw, d.name)
            resolved[d.name] = ResolvedConfig(
                d.name, str(raw).strip(), ConfigSource.DYNAMIC_TOPIC_CONFIG
            )
            continue
        resolved[d.name] = ResolvedConfig(d.name, d.default, ConfigSource.DEFAULT_CONFIG)
        for broker_key, factor in d.synonyms:
            if broker_key in defaults:
                value = d.parse(defaults[broker_key], broker_key)
                if factor != 1 and isinstance(value, int) and value >= 0:
                    # -1 stays "unlimited" in any unit
                    value = d.parse(str(value * factor), broker_key)
                resolved[d.name] = ResolvedConfig(
                    d.name, _to_str(value), ConfigSource.STATIC_BROKER_CONFIG, broker_key
                )
                break
    return resolved


def _to_str(value: bool | int | float | str | tuple[str, ...]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return ",".join(value) if isinstance(value, tuple) else str(value)


@dataclass(frozen=True)
class LogConfig:
    """The effective, typed config of one partition's log (Kafka defaults)."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * HOUR_MS
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * HOUR_MS
    retention_bytes: int = -1
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    cleanup_policy: tuple[str, ...] = ("delete",)
    file_delete_delay_ms: int = 60_000
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    min_cleanable_dirty_ratio: float = 0.5
    delete_retention_ms: int = 24 * HOUR_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False

    @classmethod
    def from_props(
        cls, topic_overrides: Mapping[str, str], defaults: Mapping[str, str] | None = None
    ) -> LogConfig:
        """Build from topic-level overrides (topic keys) over broker props (broker keys).

        Raises InvalidConfigError naming the offending key for unknown topic keys, bad
        types and out-of-range values.
        """
        resolved = resolve_configs(topic_overrides, defaults or {})
        values: dict[str, Any] = {
            d.field: d.parse(resolved[d.name].value, d.name)
            for d in TOPIC_CONFIGS.values()
            if d.field
        }
        return cls(**values)

    def to_props(self) -> dict[str, str]:
        """Topic-key string form, e.g. for DescribeConfigs or persisting overrides."""
        by_field = {d.field: d.name for d in TOPIC_CONFIGS.values() if d.field}
        return {by_field[f.name]: _to_str(getattr(self, f.name)) for f in fields(self)}

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def compression_level(self) -> int | None:
        """KIP-390 level of the topic's ``compression.type`` (None: the codec has none)."""
        return {
            "gzip": self.compression_gzip_level,
            "lz4": self.compression_lz4_level,
            "zstd": self.compression_zstd_level,
        }.get(self.compression_type)

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def local_log_retention_ms(self) -> int:
        """Kafka's localRetentionMs(): local.retention.ms, or retention.ms for -2."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def local_log_retention_bytes(self) -> int:
        """Kafka's localRetentionBytes(): local.retention.bytes, or retention.bytes for -2."""
        if self.local_retention_bytes == -2:
            return self.retention_bytes
        return self.local_retention_bytes


def validate_remote_storage(
    config: LogConfig, *, system_enabled: bool, was_enabled: bool = False
) -> None:
    """Kafka's checks of a topic's tiered storage settings (LogConfig.validate), raising
    InvalidConfigError: remote storage needs remote.log.storage.system.enable, excludes
    compaction, keeps local retention within total retention, and is turned off only with
    remote.log.delete.on.disable."""
    if not config.remote_storage_enable:
        if was_enabled and not config.remote_log_delete_on_disable:
            raise InvalidConfigError(
                "It is invalid to disable remote storage without deleting remote data. If you "
                "want to keep the remote data and turn to read only, please set "
                "`remote.storage.enable=true,remote.log.copy.disable=true`. If you want to "
                "disable remote storage and delete all remote data, please set "
                "`remote.storage.enable=false,remote.log.delete.on.disable=true`."
            )
        return
    if not system_enabled:
        raise InvalidConfigError(
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage."
        )
    if config.compact_enabled:
        raise InvalidConfigError("Remote log storage is unsupported for the compacted topics")
    check_local_retention(config)
    if config.remote_log_copy_disable:
        for local_key, local, total_key, total in (
            (
                "local.retention.bytes",
                config.local_retention_bytes,
                "retention.bytes",
                config.retention_bytes,
            ),
            ("local.retention.ms", config.local_retention_ms, "retention.ms", config.retention_ms),
        ):
            if local != -2 and local != total:
                raise InvalidConfigError(
                    f"When `remote.log.copy.disable` is set to true, the `{local_key}` and "
                    f"`{total_key}` must be set to the identical value because there will be "
                    "no more logs copied to the remote storage."
                )


def check_local_retention(config: LogConfig) -> None:
    """Local retention within total retention (Kafka checks it for tiered topics and, with
    remote.log.storage.system.enable, for the broker defaults)."""
    for local_key, local, total_key, total, unlimited in (
        (
            "local.retention.bytes",
            config.local_retention_bytes,
            "retention.bytes",
            config.retention_bytes,
            config.retention_bytes <= -1,
        ),
        (
            "local.retention.ms",
            config.local_retention_ms,
            "retention.ms",
            config.retention_ms,
            config.retention_ms == -1,
        ),
    ):
        if unlimited or local == -2:
            continue
        if local == -1:
            raise InvalidConfigError(
                f"Invalid value -1 for configuration {local_key}: Value must not be -1 as "
                f"{total_key} value is set as {total}."
            )
        if local > total:
            raise InvalidConfigError(
                f"Invalid value {local} for configuration {local_key}: Value must not be more "
                f"than {total_key} property value: {total}"
            )
