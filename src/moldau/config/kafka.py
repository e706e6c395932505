"""Apache Kafka's own config definitions, as facts: every broker and topic config Kafka
defines, with its type, default, validation and dynamic update mode.

The facts live in ``kafka_configs.json``, written by ``scripts/extract_kafka_configs.py``
from Kafka's rendered ConfigDefs; Moldau's definitions (``moldau.config.broker``,
``moldau.config.topic``) are checked against them by the tests, and every Kafka key
Moldau does not act upon is still known by name through this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

from moldau.protocol.errors import InvalidConfigError

READ_ONLY = "read-only"
PER_BROKER = "per-broker"
CLUSTER_WIDE = "cluster-wide"
_RANGES = {"short": 2**15 - 1, "int": 2**31 - 1, "long": 2**63 - 1}


@dataclass(frozen=True)
class KafkaKey:
    """One config as Kafka defines it. ``default`` None is Kafka's null."""

    name: str
    type: str  # boolean string int short long double list class password
    default: str | None
    valid_values: str
    importance: str
    update_mode: str | None = None  # brokers: read-only, per-broker, cluster-wide
    server_default_property: str | None = None  # topics: the broker key of the default
    minimum: int | float | None = None
    maximum: int | float | None = None
    also: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    non_empty: bool = False
    dynamic_only: bool = False

    @property
    def dynamic(self) -> bool:
        return self.update_mode not in (None, READ_ONLY)

    def validate(self, raw: str, source: str) -> None:
        """Kafka's type and validator checks; InvalidConfigError says what is wrong."""
        text = raw.strip()
        if self.type == "boolean":
            if text.lower() not in ("true", "false"):
                raise _invalid(raw, source, "Expected value to be either true or false")
        elif self.type in _RANGES or self.type == "double":
            self._validate_number(text, source)
        elif self.type == "list":
            items = [item.strip() for item in text.split(",") if item.strip()]
            if self.non_empty and not items:
                raise _invalid(raw, source, "Empty list")
            bad = [item for item in items if self.choices and item not in self.choices]
            if bad:
                raise _invalid(
                    raw, source, f"Invalid value {bad[0]}: must be one of {self.valid_values}"
                )
        elif self.choices and text not in self.choices:
            raise _invalid(raw, source, f"String must be one of: {', '.join(self.choices)}")
        elif self.non_empty and not text:
            raise _invalid(raw, source, "String may not be empty")

    def _validate_number(self, text: str, source: str) -> None:
        try:
            value: int | float = float(text) if self.type == "double" else int(text)
        except ValueError:
            raise _invalid(text, source, f"Not a number of type {self.type.upper()}") from None
        limit = _RANGES.get(self.type)
        if limit is not None and not -limit - 1 <= value <= limit:
            raise _invalid(text, source, f"Not a number of type {self.type.upper()}")
        if text in self.also:
            return
        if self.minimum is not None and value < self.minimum:
            raise _invalid(text, source, f"Value must be at least {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            raise _invalid(text, source, f"Value must be no more than {self.maximum}")


def _invalid(raw: str, source: str, why: str) -> InvalidConfigError:
    return InvalidConfigError(f"Invalid value {raw} for configuration {source}: {why}")


def _load() -> tuple[str, dict[str, KafkaKey], dict[str, KafkaKey]]:
    data = json.loads(resources.files(__package__).joinpath("kafka_configs.json").read_text())

    def key(row: dict[str, object]) -> KafkaKey:
        row = dict(row)
        for name in ("also", "choices"):
            row[name] = tuple(row.get(name, ()))  # type: ignore[arg-type]
        row.pop("non_null", None)
        return KafkaKey(**row)  # type: ignore[arg-type]

    broker = {r["name"]: key(r) for r in data["broker"]}
    topic = {r["name"]: key(r) for r in data["topic"]}
    return data["kafka_version"], broker, topic


KAFKA_VERSION, KAFKA_BROKER_CONFIGS, KAFKA_TOPIC_CONFIGS = _load()
