"""Dynamic broker configs: broker settings changed at run time through the admin APIs.

As Kafka's DynamicBrokerConfig, a value comes from (highest first) this broker's dynamic
config, the cluster-wide dynamic default (resource name ""), the properties file, the
default. Every key Kafka treats as dynamic can be altered, with Kafka's rules (per-broker
keys only for one broker, TLS stores only per listener); they are ConfigRecords in the
metadata log and described back with their source. The broker-level topic defaults
(``log.retention.ms``, ``log.segment.bytes`` ...) and the log cleaner's settings are
applied without a restart (``APPLIED_AT_RUN_TIME``); changed topic defaults reach every
log at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from moldau.config.broker import (
    BROKER_KEYS,
    LISTENER_SCOPED,
    BrokerConfig,
    ConfigError,
    parse_value,
)
from moldau.config.catalog import BROKER_CATALOG, PER_BROKER_KEYS
from moldau.config.topic import BROKER_SYNONYMS, TOPIC_CONFIGS, ConfigSource
from moldau.metadata.image import MetadataImage
from moldau.metadata.publisher import LocalChanges
from moldau.protocol.errors import KafkaError

CLUSTER_DEFAULT = ""

# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only with a listener prefix.
_LISTENER_ONLY = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.certificates",
    }
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
        entry = BROKER_CATALOG.get(key)
        return entry.default if entry is not None else None

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
    def check(key: str, value: str | None, per_broker: bool) -> str | None:
        """Why ``key`` cannot be set to ``value`` dynamically for one broker
        (``per_broker``) or the cluster default (None: it can), in Kafka's words. A key
        Kafka does not define is accepted and stored, as Kafka's broker passes it on to
        plugins (``DynamicBrokerConfig.validateConfigs`` refuses only known static keys)."""
        listener = LISTENER_SCOPED.match(key)
        base = listener["key"] if listener and listener["key"] else key
        entry = BROKER_CATALOG.get(base)
        if entry is not None and not entry.dynamic:
            return f"Cannot update these configs dynamically: Set({key})"
        if not listener and key in _LISTENER_ONLY:
            return (
                "These security configs can be dynamically updated only per-listener "
                f"using the listener prefix: Set({key})"
            )
        if value is not None and entry is not None:
            try:
                _validate(base, value, key)
            except (KafkaError, ConfigError) as e:
                return str(e)
        if not per_broker and (listener or base in PER_BROKER_KEYS):
            return (
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: Set({key})"
            )
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


def _validate(key: str, value: str, source: str) -> None:
    if key in BROKER_SYNONYMS:
        TOPIC_CONFIGS[BROKER_SYNONYMS[key]].parse(value, source)
    elif key in BROKER_KEYS:
        parse_value(key, value)
    elif (kafka := BROKER_CATALOG[key].kafka) is not None:
        kafka.validate(value, source)
