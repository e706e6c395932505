"""Config resources for DescribeConfigs: topic and broker configs as Kafka reports them.

Effective values come from ``moldau.config.topic`` (the single source of truth for
names, defaults and synonyms); this module only shapes them the way Kafka reports them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import IntEnum

from moldau.config.broker import LISTENER_SCOPED
from moldau.config.catalog import BROKER_CATALOG, BrokerEntry
from moldau.config.group import GROUP_CONFIGS
from moldau.config.kafka import PER_BROKER
from moldau.config.topic import (
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigSource,
    resolve_configs,
)
from moldau.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsSynonym,
)
from moldau.server.dynamic_config import DynamicBrokerConfig


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


_KAFKA_TYPES = {t.name.lower(): t for t in ConfigType}


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
    out.append(
        DescribeConfigsSynonym(d.first_synonym or d.name, d.default, ConfigSource.DEFAULT_CONFIG)
    )
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
                _KAFKA_TYPES[d.type],
                d.doc if d.acted else f"Not acted on by Moldau: {d.doc}",
                opts,
                read_only=False,
                synonyms=_topic_synonyms(d, overrides, broker_props, broker_source),
            )
        )
    return entries


def _dynamic_entry(key: str) -> BrokerEntry:
    """A dynamic key outside the catalog: one listener's (its base key's type and meaning,
    per broker) or a custom key kept for plugins, as Kafka keeps it."""
    match = LISTENER_SCOPED.match(key)
    base = BROKER_CATALOG.get(match["key"] or "") if match else None
    if base is None:
        doc = "Listener setting." if match else "Custom config, not defined by Kafka."
        return BrokerEntry(key, "string", None, PER_BROKER, False, doc, None)
    return replace(base, name=key, default=None, update_mode=PER_BROKER)


def describe_broker(
    config: DynamicBrokerConfig, opts: DescribeOptions, *, cluster_default: bool = False
) -> list[DescribeConfigsResourceResult]:
    """Every broker config Kafka defines (and Moldau's own), with where each value comes
    from; Kafka's dynamic keys are alterable, the rest read-only. ``cluster_default``
    (resource name "") reports only the cluster-wide dynamic defaults, as Kafka does.
    Keys Moldau does not act on say so in their documentation; passwords are sensitive
    and their values are not returned, as Kafka does.

    Broker-level topic defaults (``log.retention.hours`` ...) are listed too; a synonym
    that is unset reports the topic default under its first broker key, else null.
    """
    entries = []
    layers = config.layers()
    # Listener-scoped (listener.name.<l>.ssl.keystore.location ...) and custom keys set dynamically.
    scoped = sorted({k for _, layer in layers[:2] for k in layer} - BROKER_CATALOG.keys())
    for key, entry in [*BROKER_CATALOG.items(), *((k, _dynamic_entry(k)) for k in scoped)]:
        if not opts.wants(key):
            continue
        if cluster_default:
            source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            value = layers[1][1].get(key)
            if value is None:
                continue
            synonyms = [DescribeConfigsSynonym(key, value, source)]
        else:
            source = config.source(key)
            value = config.get(key) if source != ConfigSource.DEFAULT_CONFIG else entry.default
            synonyms = [
                DescribeConfigsSynonym(key, layer[key], layer_source)
                for layer_source, layer in layers
                if key in layer
            ] or [DescribeConfigsSynonym(key, value, ConfigSource.DEFAULT_CONFIG)]
        sensitive = entry.type == "password"
        if sensitive:
            value = None
            synonyms = [DescribeConfigsSynonym(s.name, None, s.source) for s in synonyms]
        doc = entry.doc if entry.acted else f"Not acted on by Moldau: {entry.doc}"
        result = _entry(
            key,
            value,
            source,
            _KAFKA_TYPES[entry.type],
            doc,
            opts,
            read_only=not entry.dynamic,
            synonyms=synonyms,
        )
        result.is_sensitive = sensitive
        entries.append(result)
    return entries


def describe_group(
    overrides: Mapping[str, str], broker_props: Mapping[str, str], opts: DescribeOptions
) -> list[DescribeConfigsResourceResult]:
    """A group's configs: its overrides, else the broker's ``group.*`` default."""
    out = []
    for name, spec in GROUP_CONFIGS.items():
        if not opts.wants(name):
            continue
        broker_value = broker_props.get(spec.broker_key) if spec.broker_key else None
        synonyms = []
        if broker_value is not None:
            synonyms.append(
                DescribeConfigsSynonym(
                    spec.broker_key, broker_value, ConfigSource.STATIC_BROKER_CONFIG
                )
            )
        if name in overrides:
            value, source = overrides[name], ConfigSource.GROUP_CONFIG
            synonyms.insert(0, DescribeConfigsSynonym(name, value, source))
        elif broker_value is not None:
            value, source = broker_value, ConfigSource.STATIC_BROKER_CONFIG
        else:
            value, source = spec.default, ConfigSource.DEFAULT_CONFIG
        config_type = ConfigType.INT if spec.is_int else ConfigType.STRING
        out.append(
            _entry(
                name, value, source, config_type, spec.doc, opts, read_only=False, synonyms=synonyms
            )
        )
    return out
