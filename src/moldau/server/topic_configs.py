"""Config resources for the admin APIs: describing topic and broker configs, and the
shared validate-then-commit flow of AlterConfigs and IncrementalAlterConfigs.

Effective values come from ``moldau.storage.config`` (the single source of truth for
names, defaults and synonyms); this module only shapes them the way Kafka reports them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Protocol, TypeVar

from moldau.controller.controller import topic_name_error
from moldau.controller.image import BROKER_RESOURCE, TOPIC_RESOURCE, TopicImage
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsSynonym,
)
from moldau.server.config import BROKER_KEYS
from moldau.storage.config import (
    BROKER_SYNONYMS,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigSource,
    resolve_configs,
)

if TYPE_CHECKING:
    from moldau.server.broker import Broker


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


def _topic_synonyms(
    d: ConfigDef, overrides: Mapping[str, str], broker_props: Mapping[str, str]
) -> list[DescribeConfigsSynonym]:
    """Kafka's precedence list: the topic override, each broker key that is set, then the
    default under the broker key whose unit matches the topic config's."""
    out = []
    if d.name in overrides:
        out.append(
            DescribeConfigsSynonym(d.name, overrides[d.name], ConfigSource.DYNAMIC_TOPIC_CONFIG)
        )
    out += [
        DescribeConfigsSynonym(key, broker_props[key], ConfigSource.STATIC_BROKER_CONFIG)
        for key, _factor in d.synonyms
        if key in broker_props
    ]
    out.append(DescribeConfigsSynonym(d.synonyms[0][0], d.default, ConfigSource.DEFAULT_CONFIG))
    return out


def describe_topic(
    overrides: Mapping[str, str], broker_props: Mapping[str, str], opts: DescribeOptions
) -> list[DescribeConfigsResourceResult]:
    """Every topic config with its effective value; topic configs are all alterable."""
    resolved = resolve_configs(overrides, broker_props)
    return [
        _entry(
            d.name,
            resolved[d.name].value,
            resolved[d.name].source,
            _TOPIC_TYPES[d.type],
            d.doc,
            opts,
            read_only=False,
            synonyms=_topic_synonyms(d, overrides, broker_props),
        )
        for d in TOPIC_CONFIGS.values()
        if opts.wants(d.name)
    ]


def describe_broker(
    props: Mapping[str, str], opts: DescribeOptions
) -> list[DescribeConfigsResourceResult]:
    """The broker's static settings, read-only: dynamic broker configs are not supported.

    Broker-level topic defaults (``log.retention.hours`` ...) are listed too; a synonym
    that is unset reports the topic default under its first broker key, else null.
    """
    entries = []
    for key in BROKER_KEYS.keys() | BROKER_SYNONYMS.keys():
        if not opts.wants(key):
            continue
        if key in BROKER_KEYS:
            spec = BROKER_KEYS[key]
            default, config_type, doc = spec.default, _BROKER_TYPES[spec.type], spec.doc
        else:
            d = TOPIC_CONFIGS[BROKER_SYNONYMS[key]]
            default = d.default if d.synonyms[0][0] == key else None
            config_type, doc = _TOPIC_TYPES[d.type], d.doc
        source = ConfigSource.STATIC_BROKER_CONFIG if key in props else ConfigSource.DEFAULT_CONFIG
        value = props.get(key, default)
        synonyms = [DescribeConfigsSynonym(key, value, source)]
        entries.append(
            _entry(key, value, source, config_type, doc, opts, read_only=True, synonyms=synonyms)
        )
    return sorted(entries, key=lambda e: e.name or "")


# -- altering ------------------------------------------------------------------------


def check_unique(names: Iterable[str | None]) -> None:
    """Kafka rejects a resource that names the same config twice."""
    dups = sorted(n or "" for n, count in Counter(names).items() if count > 1)
    if dups:
        raise KafkaError(
            f"Error due to duplicate config keys: {', '.join(dups)}", ErrorCode.INVALID_REQUEST
        )


def _resource_error(resource_type: int) -> KafkaError | None:
    if resource_type == BROKER_RESOURCE:
        return KafkaError(
            "Dynamic broker configs are not supported; set them in the broker's properties "
            "and restart it.",
            ErrorCode.INVALID_REQUEST,
        )
    if resource_type != TOPIC_RESOURCE:
        return KafkaError(f"Unsupported resource type {resource_type}.", ErrorCode.INVALID_REQUEST)
    return None


def missing_topic(name: str) -> tuple[ErrorCode, str]:
    """Why ``name`` names no topic: it is illegal, or it does not exist."""
    if (msg := topic_name_error(name)) is not None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, msg
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."


class _Resource(Protocol):
    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str | None: ...


R = TypeVar("R", bound=_Resource)
T = TypeVar("T")


async def alter_resources(
    broker: Broker,
    resources: Sequence[R],
    changes: Callable[[R, TopicImage], Mapping[str, str | None]],
    response: Callable[..., T],
    *,
    replace: bool,
    validate_only: bool,
) -> list[T]:
    """One ``response(error_code, error_message, resource_type, resource_name)`` per
    resource, in request order. ``changes`` turns a resource and its topic's current
    state into config changes (value: set, None: delete), raising KafkaError when the
    request is invalid. Kafka fails every copy of a resource named twice rather than
    guess which one wins."""
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    results = []
    for r in resources:
        if counts[(r.resource_type, r.resource_name)] > 1:
            code, message = ErrorCode.INVALID_REQUEST, "Duplicate resource in request."
        else:
            code, message = await _alter(broker, r, changes, replace, validate_only)
        results.append(
            response(
                error_code=code,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
        )
    return results


async def _alter(
    broker: Broker,
    r: R,
    changes: Callable[[R, TopicImage], Mapping[str, str | None]],
    replace: bool,
    validate_only: bool,
) -> tuple[ErrorCode, str | None]:
    """Validate one resource's changes with the controller, then commit them."""
    name = r.resource_name or ""
    if (error := _resource_error(r.resource_type)) is not None:
        return error.code, str(error)
    topic = broker.image.topics.get(name)
    if topic is None:
        return missing_topic(name)
    try:
        wanted = changes(r, topic)
    except KafkaError as e:
        return e.code, str(e)
    outcome = broker.controller.alter_topic_configs(broker.image, name, wanted, replace=replace)
    if outcome.error:
        return outcome.error, outcome.message
    if not validate_only:
        await broker.commit(outcome.records)
    return ErrorCode.NONE, None
