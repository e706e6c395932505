"""IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on single topic configs."""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from moldau.protocol.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)
from moldau.server.topic_configs import alter_resources, check_unique
from moldau.storage.config import TOPIC_CONFIGS, ResolvedConfig, resolve_configs

if TYPE_CHECKING:
    from moldau.controller.image import TopicImage
    from moldau.server.broker import Broker
    from moldau.server.dispatch import RequestContext

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
MIN_VERSION = 0
MAX_VERSION = 1


class OpType(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def _op(c: AlterableConfig) -> OpType:
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


def _new_value(c: AlterableConfig, current: Mapping[str, ResolvedConfig]) -> str | None:
    """APPEND/SUBTRACT start from the effective value (override, else broker default),
    so appending to a broker-wide ``compact`` policy keeps ``compact``."""
    op = _op(c)
    if op == OpType.DELETE:
        return None
    if op == OpType.SET:
        return c.value
    name = c.name or ""
    d = TOPIC_CONFIGS.get(name)
    if d is None:
        raise KafkaError(f"Unknown topic config name: {name}", ErrorCode.INVALID_CONFIG)
    if d.type != "list":
        raise KafkaError(
            f"Config value {op.name.lower()} is not allowed for config key: {name}",
            ErrorCode.INVALID_CONFIG,
        )
    old, given = _list(current[name].value), _list(c.value or "")
    new = old + given if op == OpType.APPEND else [v for v in old if v not in given]
    return ",".join(dict.fromkeys(new))


def operations(
    r: AlterConfigsResource, topic: TopicImage, broker_props: Mapping[str, str]
) -> dict[str, str | None]:
    configs = r.configs or []
    check_unique(c.name for c in configs)
    current = resolve_configs(topic.configs, broker_props)
    return {c.name or "": _new_value(c, current) for c in configs}


async def handle(
    broker: Broker, ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    responses = await alter_resources(
        broker,
        request.resources or [],
        lambda r, topic: operations(r, topic, broker.config.log_defaults),
        AlterConfigsResourceResponse,
        replace=False,
        validate_only=request.validate_only,
    )
    return IncrementalAlterConfigsResponse(responses=responses)
