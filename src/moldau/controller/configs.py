"""What AlterConfigs and IncrementalAlterConfigs ask for, as config changes.

Both APIs come down to "set these keys, delete those" per resource (a topic, a broker,
or the cluster-wide broker default named ""); the controller validates and records them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from enum import IntEnum
from typing import Any

from moldau.config.topic import TOPIC_CONFIGS
from moldau.protocol.errors import ErrorCode, KafkaError

Changes = dict[str, str | None]  # value: set, None: delete


class OpType(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def check_unique(names: Iterable[str | None]) -> None:
    """Kafka rejects a resource that names the same config twice."""
    dups = sorted(n or "" for n, count in Counter(names).items() if count > 1)
    if dups:
        raise KafkaError(
            f"Error due to duplicate config keys: {', '.join(dups)}", ErrorCode.INVALID_REQUEST
        )


def replacement(resource: Any) -> Changes:
    """Legacy AlterConfigs: the given configs replace all of the resource's overrides."""
    configs = resource.configs or []
    check_unique(c.name for c in configs)
    return {c.name or "": c.value for c in configs}


def incremental(resource: Any, effective: Mapping[str, str]) -> Changes:
    """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT. APPEND/SUBTRACT start
    from the effective value (``effective``: override, else default), so appending to a
    broker-wide ``compact`` policy keeps ``compact``."""
    configs = resource.configs or []
    check_unique(c.name for c in configs)
    return {c.name or "": _new_value(c, effective) for c in configs}


def _op(c: Any) -> OpType:
    try:
        op = OpType(c.config_operation)
    except ValueError:
        raise KafkaError(
            f"Unknown config operation {c.config_operation} for {c.name}", ErrorCode.INVALID_REQUEST
        ) from None
    if c.value is None and op != OpType.DELETE:
        raise KafkaError(f"Null value not supported for : {c.name}", ErrorCode.INVALID_REQUEST)
    return op


def _list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _new_value(c: Any, effective: Mapping[str, str]) -> str | None:
    op = _op(c)
    if op == OpType.DELETE:
        return None
    if op == OpType.SET:
        return c.value
    name = c.name or ""
    d = TOPIC_CONFIGS.get(name)
    if d is None or name not in effective:
        raise KafkaError(f"Unknown config name: {name}", ErrorCode.INVALID_CONFIG)
    if d.type != "list":
        raise KafkaError(
            f"Config value {op.name.lower()} is not allowed for config key: {name}",
            ErrorCode.INVALID_CONFIG,
        )
    old, given = _list(effective[name]), _list(c.value or "")
    new = old + given if op == OpType.APPEND else [v for v in old if v not in given]
    return ",".join(dict.fromkeys(new))


def apply_changes(current: Mapping[str, str], changes: Changes, *, replace: bool) -> dict[str, str]:
    new = {} if replace else dict(current)
    for key, value in changes.items():
        if value is None:
            new.pop(key, None)
        else:
            new[key] = value
    return new
