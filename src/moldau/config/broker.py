"""Broker configuration: Kafka's property names and defaults.

A properties file (``--config``) is read first, then ``-o key=value`` overrides. Broker
keys for topic-level settings (``log.segment.bytes`` ...) are defined once, in
``moldau.config.topic``; this module holds the broker-only keys Moldau acts upon. Every
other broker key Kafka defines (``moldau.config.kafka``) is accepted and validated with
Kafka's type and range, and listed as not acted upon (``moldau.config.catalog``).
"""

from __future__ import annotations

import builtins
import json
import re
import socket
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from moldau.config.kafka import KAFKA_BROKER_CONFIGS
from moldau.config.topic import BROKER_SYNONYMS, LogConfig, check_local_retention
from moldau.protocol.errors import KafkaError


class ConfigError(ValueError):
    """A configuration value is missing or malformed; the message says which and why."""


# Kafka's replica.selector.class for KIP-392 rack-aware fetching, the only one Moldau has.
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@dataclass(frozen=True)
class BrokerKey:
    """A broker key Moldau acts upon. ``why_default`` says why ``default`` differs from
    Kafka's (the tests hold every other default to Kafka's)."""

    name: str
    type: type
    default: str
    doc: str
    why_default: str = ""


# The catalog of broker keys Moldau acts upon is data: broker_keys.json, in three groups.
# "security" (moldau.security): listeners' protocols, TLS, SASL, authorizer, quotas; each
# ssl.*/sasl.* key may be set for one listener as listener.name.<listener>.<key>.
# "remote_log": tiered storage (KIP-405), Kafka's RemoteLogManagerConfig keys and defaults.
# "broker": the rest. queued.max.request.bytes departs from Kafka's -1 (unbounded): it
# bounds request memory to what one largest frame may take by default.
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")
"""group.consumer.migration.policy's values (Kafka's ConsumerGroupMigrationPolicy)."""
_TYPES: dict[str, type] = {"int": int, "str": str, "bool": bool}


def _load_keys() -> dict[str, list[BrokerKey]]:
    raw = json.loads(resources.files(__package__).joinpath("broker_keys.json").read_text())
    return {
        group: [BrokerKey(**{**entry, "type": _TYPES[entry["type"]]}) for entry in entries]
        for group, entries in raw.items()
    }


_KEYS = _load_keys()
SECURITY_KEYS = _KEYS["security"]
LISTENER_SCOPED = re.compile(
    r"^listener\.name\.[^.]+\.(?:[a-z0-9-]+\.sasl\.jaas\.config|(?P<key>.+))$"
)
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

# Keys under remote.log.storage.manager.impl.prefix (rsm.config.) go to the remote storage
# manager, those under remote.log.metadata.manager.impl.prefix (rlmm.config.) to the
# metadata manager.
REMOTE_STORAGE_MANAGER_PREFIX = "rsm.config."
# The in-broker schema registry's own Kafka client, as Confluent's `kafkastore.*` keys.
SCHEMA_REGISTRY_KAFKASTORE_PREFIX = "schema.registry.kafkastore."
SCHEMA_REGISTRY_KAFKASTORE_KEYS = frozenset(
    {
        "bootstrap.servers",
        "security.protocol",
        "sasl.mechanism",
        "sasl.jaas.config",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
    }
)
REMOTE_LOG_METADATA_MANAGER_PREFIX = "rlmm.config."
REMOTE_LOG_KEYS = _KEYS["remote_log"]
BROKER_KEYS: dict[str, BrokerKey] = {
    k.name: k for k in [*_KEYS["broker"], *SECURITY_KEYS, *REMOTE_LOG_KEYS]
}

_LISTENER = re.compile(
    r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d+)$"
)
_BOOLS = {"true": True, "false": False}


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int


def _known_key(key: str) -> bool:
    """A broker key, a topic default, or a security key for one listener."""
    if key in BROKER_KEYS or key in BROKER_SYNONYMS or key in KAFKA_BROKER_CONFIGS:
        return True
    if key.startswith((REMOTE_STORAGE_MANAGER_PREFIX, REMOTE_LOG_METADATA_MANAGER_PREFIX)):
        return True  # for the plugins (default prefixes; custom ones are reported unknown)
    if key.startswith(SCHEMA_REGISTRY_KAFKASTORE_PREFIX):
        return key[len(SCHEMA_REGISTRY_KAFKASTORE_PREFIX) :] in SCHEMA_REGISTRY_KAFKASTORE_KEYS
    m = LISTENER_SCOPED.match(key)
    return m is not None and (m["key"] is None or m["key"] in BROKER_KEYS)


def parse_listeners(value: str, key: str) -> list[Listener]:
    out = []
    for item in filter(None, (v.strip() for v in value.split(","))):
        m = _LISTENER.match(item)
        if not m or int(m["port"]) > 65535:
            raise ConfigError(f"{key}: '{item}' is not of the form NAME://HOST:PORT")
        out.append(Listener(m["name"], m["host"].strip("[]"), int(m["port"])))
    if not out:
        raise ConfigError(f"{key}: at least one listener is required")
    return out


def parse_ip_overrides(value: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count,...``, host names resolved to the
    address connections come from (as Kafka does, once at start)."""
    out: dict[str, int] = {}
    for item in filter(None, (v.strip() for v in value.split(","))):
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError(f"max.connections.per.ip.overrides: '{item}' is not host:count")
        try:
            address = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0]
        except (OSError, UnicodeError) as e:
            raise ConfigError(
                f"max.connections.per.ip.overrides: cannot resolve '{host}': {e}"
            ) from None
        out[str(address)] = int(count)
    return out


def read_properties(path: Path) -> dict[str, str]:
    """Java properties, the subset Kafka configs use: ``key=value``, ``key: value``, comments."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from e
    props: dict[str, str] = {}
    for lineno, raw in enumerate(text.replace("\\\n", "").splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if not m:
            raise ConfigError(f"{path}:{lineno}: expected key=value, got '{line}'")
        props[m[1]] = m[2].strip()
    return props


def parse_override(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override '{item}' is not of the form key=value")
    return key.strip(), value.strip()


def _registry_listener(value: str) -> str | None:
    """The one http(s)://HOST:PORT the registry serves (Confluent's `listeners` key takes
    a list)."""
    urls = [u.strip() for u in value.split(",") if u.strip()]
    if not urls:
        return None
    if len(urls) > 1:
        raise ConfigError(f"schema.registry.listeners: one listener, not {len(urls)}")
    if not re.fullmatch(r"https?://(\[[^\]]*\]|[^:/]+):\d{1,5}/?", urls[0]) or not (
        0 <= int(urls[0].rstrip("/").rsplit(":", 1)[1]) <= 65535
    ):
        raise ConfigError(f"schema.registry.listeners: {urls[0]!r} is not http(s)://HOST:PORT")
    return urls[0].rstrip("/")


def parse_value(key: str, raw: str) -> int | bool | str:
    """A broker key's value in its type; ConfigError says why it is not one."""
    spec = BROKER_KEYS[key]
    if spec.type is int:
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"{key}: '{raw}' is not an integer") from None
    if spec.type is bool:
        if raw.lower() not in _BOOLS:
            raise ConfigError(f"{key}: '{raw}' is not true or false")
        return _BOOLS[raw.lower()]
    return raw


class BrokerConfig:
    """Validated broker settings; unknown keys are kept and reported, as Kafka does."""

    def __init__(self, props: dict[str, str]) -> None:
        self.props = dict(props)
        self.unknown = sorted(k for k in props if not _known_key(k))
        for key, raw in props.items():
            if key in BROKER_KEYS:
                self._typed(key)
            elif key in KAFKA_BROKER_CONFIGS and key not in BROKER_SYNONYMS:
                try:
                    KAFKA_BROKER_CONFIGS[key].validate(raw, key)
                except KafkaError as e:
                    raise ConfigError(str(e)) from None
        self.listeners = parse_listeners(self.get("listeners"), "listeners")
        adv = self.props.get("advertised.listeners", "")
        self.advertised = parse_listeners(adv, "advertised.listeners") if adv else None
        dirs = (
            self.props.get("log.dirs")
            or self.props.get("log.dir")
            or BROKER_KEYS["log.dirs"].default
        )
        self.log_dirs = [Path(d.strip()) for d in dirs.split(",") if d.strip()]
        self.log_defaults = {k: v for k, v in props.items() if k in BROKER_SYNONYMS}
        try:
            self.default_log_config = LogConfig.from_props({}, self.log_defaults)
        except KafkaError as e:
            raise ConfigError(str(e)) from e
        if self.bool("remote.log.storage.system.enable"):
            try:
                check_local_retention(self.default_log_config)
            except KafkaError as e:
                raise ConfigError(str(e)) from e
        if self.int("num.partitions") < 1:
            raise ConfigError("num.partitions must be at least 1")
        self._check_socket_server()
        self._check_group_keys()
        self.ip_connection_overrides = parse_ip_overrides(
            self.get("max.connections.per.ip.overrides")
        )
        authorizer = self.get("authorizer.class.name").strip()
        if authorizer not in ("", STANDARD_AUTHORIZER):
            raise ConfigError(
                f"authorizer.class.name: {authorizer} is not available; Moldau has "
                f"{STANDARD_AUTHORIZER} (ACLs in the metadata log)"
            )
        if self.int("max.connections.per.ip") == 0 and not self.ip_connection_overrides:
            raise ConfigError(
                "max.connections.per.ip can be set to zero only if "
                "max.connections.per.ip.overrides is set"
            )

        self.schema_registry_listener = _registry_listener(self.get("schema.registry.listeners"))
        method = self.get("schema.registry.authentication.method").strip().upper()
        if method not in ("NONE", "BASIC"):
            raise ConfigError(
                f"schema.registry.authentication.method must be NONE or BASIC, not {method!r}"
            )

    def _check_group_keys(self) -> None:
        policy = self.get("group.consumer.migration.policy").strip().lower()
        if policy not in MIGRATION_POLICIES:
            raise ConfigError(
                f"group.consumer.migration.policy must be one of {', '.join(MIGRATION_POLICIES)}"
                f", not {policy!r}"
            )

    def _check_socket_server(self) -> None:
        """Kafka's checks of its socket server keys."""
        if self.int("socket.request.max.bytes") < 1:
            raise ConfigError("socket.request.max.bytes must be at least 1")
        queued = self.int("queued.max.request.bytes")
        if 0 < queued < self.int("socket.request.max.bytes"):
            raise ConfigError(
                "queued.max.request.bytes must be larger or equal to socket.request.max.bytes"
            )
        if self.get("replica.selector.class") not in ("", RACK_AWARE_SELECTOR):
            raise ConfigError(f"replica.selector.class must be empty or {RACK_AWARE_SELECTOR}")
        for key in ("max.connections", "max.connections.per.ip", "max.connection.creation.rate"):
            if self.int(key) < 0:
                raise ConfigError(f"{key} must be at least 0")

    @classmethod
    def load(cls, config_file: Path | None, overrides: list[str]) -> BrokerConfig:
        props = read_properties(config_file) if config_file else {}
        props.update(parse_override(o) for o in overrides)
        return cls(props)

    def get(self, key: str) -> str:
        return self.props.get(key, BROKER_KEYS[key].default)

    def _typed(self, key: str) -> int | bool | str:
        return parse_value(key, self.get(key))

    def int(self, key: str) -> int:
        value = self._typed(key)
        assert isinstance(value, int)
        return value

    def bool(self, key: str) -> bool:
        return bool(self._typed(key))

    def internal_topic_replication(self, factor: builtins.int) -> builtins.int:
        """Replication of an internal topic configured with ``factor``: Kafka's factor in a
        cluster, where Kafka caps nothing (creation waits for enough brokers); 1 on a node
        that is its own quorum (no ``controller.quorum.voters``), which no other broker can
        ever join, so a node started without a config file works out of the box."""
        if self.get("controller.quorum.voters"):
            return factor
        return min(factor, 1)

    def remote_storage_manager_configs(self) -> dict[str, str]:
        """The keys under remote.log.storage.manager.impl.prefix, without it."""
        return _strip_prefix(self.props, self.get("remote.log.storage.manager.impl.prefix"))

    def remote_log_metadata_int(self, key: str) -> builtins.int:
        """A remote.log.metadata.* key; Kafka reads it under the metadata manager's prefix
        (rlmm.config.<key>), which wins here too."""
        prefixed = self.get("remote.log.metadata.manager.impl.prefix") + key
        if prefixed not in self.props:
            return self.int(key)
        value = parse_value(key, self.props[prefixed])
        assert isinstance(value, int)
        return value

    @property
    def node_id(self) -> builtins.int:
        return self.int("node.id")


def _strip_prefix(props: dict[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix) :]: v for k, v in props.items() if prefix and k.startswith(prefix)}
