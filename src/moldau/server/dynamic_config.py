"""Dynamic broker configs: broker settings changed at run time through the admin APIs.

As Kafka's DynamicBrokerConfig, a value comes from (highest first) this broker's dynamic
config, the cluster-wide dynamic default (resource name ""), the properties file, the
default. Only the keys Kafka treats as dynamic can be altered: the broker-level topic
defaults (``log.retention.ms``, ``log.segment.bytes``, ``message.max.bytes`` ...) and the
log cleaner's settings. They are ConfigRecords in the metadata log, so every broker
applies them without a restart; changed topic defaults reach every log at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from moldau.config.broker import BROKER_KEYS, BrokerConfig, ConfigError, parse_value
from moldau.config.topic import BROKER_SYNONYMS, TOPIC_CONFIGS, ConfigSource
from moldau.metadata.image import MetadataImage
from moldau.metadata.publisher import LocalChanges
from moldau.protocol.errors import KafkaError

CLUSTER_DEFAULT = ""

# Kafka's DynamicBrokerConfig.ReconfigurableConfigs that Moldau has: the log defaults
# (DynamicLogConfig) and the log cleaner's (LogCleaner.ReconfigurableConfigs).
DYNAMIC_KEYS = frozenset(BROKER_SYNONYMS) | frozenset(
    {"log.cleaner.threads", "log.cleaner.backoff.ms"}
)


class DynamicBrokerConfig:
    def __init__(self, config: BrokerConfig) -> None:
        self.static = config
        self.node = str(config.node_id)
        self._cluster: Mapping[str, str] = MappingProxyType({})
        self._broker: Mapping[str, str] = MappingProxyType({})
        self.log_defaults: Mapping[str, str] = MappingProxyType(dict(config.log_defaults))
        self._listeners: list[Callable[[], None]] = []

    def on_log_defaults_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    # -- values --------------------------------------------------------------------
    def get(self, key: str) -> str | None:
        for layer in (self._broker, self._cluster, self.static.props):
            if key in layer:
                return layer[key]
        if key in BROKER_KEYS:
            return BROKER_KEYS[key].default
        return None

    def source(self, key: str) -> ConfigSource:
        if key in self._broker:
            return ConfigSource.DYNAMIC_BROKER_CONFIG
        if key in self._cluster:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if key in self.static.props:
            return ConfigSource.STATIC_BROKER_CONFIG
        return ConfigSource.DEFAULT_CONFIG

    def layers(self) -> list[tuple[ConfigSource, Mapping[str, str]]]:
        """Where values come from, highest precedence first (DescribeConfigs synonyms)."""
        return [
            (ConfigSource.DYNAMIC_BROKER_CONFIG, self._broker),
            (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, self._cluster),
            (ConfigSource.STATIC_BROKER_CONFIG, self.static.props),
        ]

    # -- validation (the controller's) -------------------------------------------------
    @staticmethod
    def check(key: str, value: str | None) -> str | None:
        """Why ``key`` cannot be set to ``value`` dynamically (None: it can)."""
        if key not in BROKER_KEYS and key not in BROKER_SYNONYMS:
            return f"Unknown broker config: {key}"
        if key not in DYNAMIC_KEYS:
            return f"Cannot update these configs dynamically: {key}"
        if value is None:
            return None
        try:
            if key in BROKER_SYNONYMS:
                TOPIC_CONFIGS[BROKER_SYNONYMS[key]].parse(value, key)
            else:
                parse_value(key, value)
        except (KafkaError, ConfigError) as e:
            return f"Invalid value {value} for configuration {key}: {e}"
        return None

    # -- applying --------------------------------------------------------------------
    def on_metadata_update(
        self, old: MetadataImage, new: MetadataImage, changes: LocalChanges
    ) -> None:
        if old.broker_configs is new.broker_configs:
            return
        self._cluster = new.broker_configs.get(CLUSTER_DEFAULT, MappingProxyType({}))
        self._broker = new.broker_configs.get(self.node, MappingProxyType({}))
        defaults = {
            key: value
            for key in BROKER_SYNONYMS
            if (value := self.get(key)) is not None and key in self._effective_keys()
        }
        if defaults != dict(self.log_defaults):
            self.log_defaults = MappingProxyType(defaults)
            for listener in self._listeners:
                listener()

    def _effective_keys(self) -> set[str]:
        return set(self._broker) | set(self._cluster) | set(self.static.props)
