"""Broker configuration: Kafka's property names and defaults.

A properties file (``--config``) is read first, then ``-o key=value`` overrides. Broker
keys for topic-level settings (``log.segment.bytes`` ...) are defined once, in
``moldau.storage.config``; this module holds the broker-only keys.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from moldau.protocol.errors import KafkaError
from moldau.storage.config import BROKER_SYNONYMS, LogConfig


class ConfigError(ValueError):
    """A configuration value is missing or malformed; the message says which and why."""


@dataclass(frozen=True)
class BrokerKey:
    name: str
    type: type
    default: str
    doc: str


BROKER_KEYS: dict[str, BrokerKey] = {
    k.name: k
    for k in [
        BrokerKey("node.id", int, "1", "This broker's id."),
        BrokerKey("listeners", str, "PLAINTEXT://127.0.0.1:9092", "Where to listen."),
        BrokerKey("advertised.listeners", str, "", "What to tell clients (default: listeners)."),
        BrokerKey("log.dirs", str, "./moldau-data", "Comma-separated data directories."),
        BrokerKey("log.dir", str, "./moldau-data", "Data directory, if log.dirs is unset."),
        BrokerKey("num.partitions", int, "1", "Partitions of auto-created topics."),
        BrokerKey("default.replication.factor", int, "1", "Replication of auto-created topics."),
        BrokerKey("auto.create.topics.enable", bool, "true", "Create topics on first use."),
        BrokerKey("delete.topic.enable", bool, "true", "Allow DeleteTopics."),
        BrokerKey("socket.request.max.bytes", int, "104857600", "Largest request frame."),
        BrokerKey("log.retention.check.interval.ms", int, "300000", "Retention check period."),
        BrokerKey("log.flush.scheduler.interval.ms", int, "1000", "How often flush.ms is checked."),
        BrokerKey("log.flush.offset.checkpoint.interval.ms", int, "60000", "Checkpoint period."),
        BrokerKey("log.cleaner.enable", bool, "true", "Run the log cleaner (compaction)."),
        BrokerKey("log.cleaner.backoff.ms", int, "15000", "Sleep between log cleaner runs."),
        BrokerKey(
            "log.segment.open.files.max", int, "-1", "Segment files kept open (-1: derived)."
        ),
        BrokerKey("max.broker.partitions", int, "-1", "Partitions accepted (-1: derived)."),
        BrokerKey("num.recovery.threads.per.data.dir", int, "2", "Log loading threads."),
        BrokerKey("offsets.topic.num.partitions", int, "50", "Partitions of __consumer_offsets."),
        BrokerKey("offsets.topic.replication.factor", int, "1", "Replication of offsets topic."),
        BrokerKey("offsets.topic.segment.bytes", int, "104857600", "Offsets topic segment size."),
        BrokerKey("offsets.retention.minutes", int, "10080", "Offsets kept after a group empties."),
        BrokerKey("offsets.retention.check.interval.ms", int, "600000", "Offset expiry period."),
        BrokerKey("offset.metadata.max.bytes", int, "4096", "Largest commit metadata."),
        BrokerKey("group.initial.rebalance.delay.ms", int, "3000", "Wait for more joiners."),
        BrokerKey("group.min.session.timeout.ms", int, "6000", "Smallest session timeout."),
        BrokerKey("group.max.session.timeout.ms", int, "1800000", "Largest session timeout."),
        BrokerKey("group.max.size", int, "2147483647", "Members per group."),
        BrokerKey("producer.id.expiration.ms", int, "86400000", "Forget idle producers."),
        BrokerKey("cluster.id", str, "", "Cluster id (generated on first start)."),
        BrokerKey("process.roles", str, "broker,controller", "KRaft roles of this node."),
        BrokerKey("controller.quorum.voters", str, "", "KRaft voters (single node: self)."),
        BrokerKey("controller.listener.names", str, "CONTROLLER", "Controller listener names."),
        BrokerKey("inter.broker.listener.name", str, "PLAINTEXT", "Listener for brokers."),
        BrokerKey("listener.security.protocol.map", str, "", "Listener protocols."),
    ]
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


class BrokerConfig:
    """Validated broker settings; unknown keys are kept and reported, as Kafka does."""

    def __init__(self, props: dict[str, str]) -> None:
        self.props = dict(props)
        self.unknown = sorted(k for k in props if k not in BROKER_KEYS and k not in BROKER_SYNONYMS)
        for key in props:
            if key in BROKER_KEYS:
                self._typed(key)
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
        if self.int("num.partitions") < 1:
            raise ConfigError("num.partitions must be at least 1")

    @classmethod
    def load(cls, config_file: Path | None, overrides: list[str]) -> BrokerConfig:
        props = read_properties(config_file) if config_file else {}
        props.update(parse_override(o) for o in overrides)
        return cls(props)

    def get(self, key: str) -> str:
        return self.props.get(key, BROKER_KEYS[key].default)

    def _typed(self, key: str) -> int | bool | str:
        spec = BROKER_KEYS[key]
        raw = self.get(key)
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

    def int(self, key: str) -> int:
        value = self._typed(key)
        assert isinstance(value, int)
        return value

    def bool(self, key: str) -> bool:
        return bool(self._typed(key))

    @property
    def node_id(self) -> int:
        return self.int("node.id")
