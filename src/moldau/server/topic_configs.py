"""Config resources for DescribeConfigs: topic and broker configs as Kafka reports them.

Effective values come from ``moldau.config.topic`` (the single source of truth for
names, defaults and synonyms); this module only shapes them the way Kafka reports them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from moldau.config.broker import BROKER_KEYS
from moldau.config.topic import (
    BROKER_SYNONYMS,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigSource,
    resolve_configs,
)
from moldau.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsSynonym,
)
from moldau.server.dynamic_config import DYNAMIC_KEYS, DynamicBrokerConfig


class ConfigType(IntEnum):
    """Kafka's DescribeConfigs ``ConfigType`` (v3+)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


_TOPIC_TYPES = {
    "int": ConfigType.INT,
    "long": ConfigType.LONG,
    "double": ConfigType.DOUBLE,
    "boolean": ConfigType.BOOLEAN,
    "string": ConfigType.STRING,
    "list": ConfigType.LIST,
}
_BROKER_TYPES = {int: ConfigType.INT, bool: ConfigType.BOOLEAN, str: ConfigType.STRING}


@dataclass(frozen=True)
class DescribeOptions:
    """What a DescribeConfigs request asked for, beyond names and values."""

    keys: frozenset[str] | None  # None: every config
    synonyms: bool
    documentation: bool

    def wants(self, name: str) -> bool:
        return self.keys is None or name in self.keys


def _entry(
    name: str,
    value: str | None,
    source: ConfigSource,
    config_type: ConfigType,
    doc: str,
    opts: DescribeOptions,
    *,
    read_only: bool,
    synonyms: list[DescribeConfigsSynonym],
) -> DescribeConfigsResourceResult:
    return DescribeConfigsResourceResult(
        name=name,
        value=value,
        read_only=read_only,
        config_source=source,
        is_default=source == ConfigSource.DEFAULT_CONFIG,
        is_sensitive=False,
        synonyms=synonyms if opts.synonyms else [],
        config_type=config_type,
        documentation=doc if opts.documentation else None,
    )


def _static(key: str) -> ConfigSource:
    return ConfigSource.STATIC_BROKER_CONFIG


def _topic_synonyms(
    d: ConfigDef,
    overrides: Mapping[str, str],
    broker_props: Mapping[str, str],
    broker_source: Callable[[str], ConfigSource],
) -> list[DescribeConfigsSynonym]:
    """Kafka's precedence list: the topic override, each broker key that is set, then the
    default under the broker key whose unit matches the topic config's."""
    out = []
    if d.name in overrides:
        out.append(
            DescribeConfigsSynonym(d.name, overrides[d.name], ConfigSource.DYNAMIC_TOPIC_CONFIG)
        )
    out += [
        DescribeConfigsSynonym(key, broker_props[key], broker_source(key))
        for key, _factor in d.synonyms
        if key in broker_props
    ]
    default_key = d.synonyms[0][0] if d.synonyms else d.name  # a topic-only config
    out.append(DescribeConfigsSynonym(default_key, d.default, ConfigSource.DEFAULT_CONFIG))
    return out


def describe_topic(
    overrides: Mapping[str, str],
    broker_props: Mapping[str, str],
    opts: DescribeOptions,
    broker_source: Callable[[str], ConfigSource] = _static,
) -> list[DescribeConfigsResourceResult]:
    """Every topic config with its effective value; topic configs are all alterable.
    ``broker_source`` says where a broker-level value came from (static or dynamic)."""
    resolved = resolve_configs(overrides, broker_props)
    entries = []
    for d in TOPIC_CONFIGS.values():
        if not opts.wants(d.name):
            continue
        r = resolved[d.name]
        source = broker_source(r.broker_key) if r.broker_key else r.source
        entries.append(
            _entry(
                d.name,
                r.value,
                source,
                _TOPIC_TYPES[d.type],
                d.doc,
                opts,
                read_only=False,
                synonyms=_topic_synonyms(d, overrides, broker_props, broker_source),
            )
        )
    return entries


def describe_broker(
    config: DynamicBrokerConfig, opts: DescribeOptions, *, cluster_default: bool = False
) -> list[DescribeConfigsResourceResult]:
    """The broker's settings with where each value comes from; the keys Kafka treats as
    dynamic are alterable, the rest read-only. ``cluster_default`` (resource name "")
    reports only the cluster-wide dynamic defaults, as Kafka does.

    Broker-level topic defaults (``log.retention.hours`` ...) are listed too; a synonym
    that is unset reports the topic default under its first broker key, else null.
    """
    entries = []
    layers = config.layers()
    for key in BROKER_KEYS.keys() | BROKER_SYNONYMS.keys():
        if not opts.wants(key):
            continue
        if key in BROKER_KEYS:
            spec = BROKER_KEYS[key]
            default: str | None = spec.default
            config_type, doc = _BROKER_TYPES[spec.type], spec.doc
        else:
            d = TOPIC_CONFIGS[BROKER_SYNONYMS[key]]
            default = d.default if d.synonyms[0][0] == key else None
            config_type, doc = _TOPIC_TYPES[d.type], d.doc
        if cluster_default:
            source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            value = layers[1][1].get(key)
            if value is None:
                continue
            synonyms = [DescribeConfigsSynonym(key, value, source)]
        else:
            source = config.source(key)
            value = config.get(key) if source != ConfigSource.DEFAULT_CONFIG else default
            synonyms = [
                DescribeConfigsSynonym(key, layer[key], layer_source)
                for layer_source, layer in layers
                if key in layer
            ] or [DescribeConfigsSynonym(key, value, ConfigSource.DEFAULT_CONFIG)]
        entries.append(
            _entry(
                key,
                value,
                source,
                config_type,
                doc,
                opts,
                read_only=key not in DYNAMIC_KEYS,
                synonyms=synonyms,
            )
        )
    return sorted(entries, key=lambda e: e.name or "")
