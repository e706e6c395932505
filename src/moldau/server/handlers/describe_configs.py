"""DescribeConfigs: effective topic configs with their source, and the static broker configs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.controller.image import BROKER_RESOURCE, TOPIC_RESOURCE
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from moldau.protocol.messages.describe_configs_response import (
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from moldau.server.topic_configs import (
    DescribeOptions,
    describe_broker,
    describe_topic,
    missing_topic,
)

if TYPE_CHECKING:
    from moldau.server.broker import Broker
    from moldau.server.dispatch import RequestContext

API_KEY = ApiKey.DESCRIBE_CONFIGS
MIN_VERSION = 1
MAX_VERSION = 4


def describe(
    broker: Broker, r: DescribeConfigsResource, opts: DescribeOptions
) -> DescribeConfigsResult:
    name = r.resource_name or ""
    result = DescribeConfigsResult(
        error_code=ErrorCode.NONE,
        error_message=None,
        resource_type=r.resource_type,
        resource_name=name,
    )
    if r.resource_type == TOPIC_RESOURCE:
        topic = broker.image.topics.get(name)
        if topic is not None:
            result.configs = describe_topic(topic.configs, broker.config.log_defaults, opts)
        else:
            result.error_code, result.error_message = missing_topic(name)
    elif r.resource_type == BROKER_RESOURCE:
        # An empty name asks for the dynamic cluster-wide defaults, of which we have none.
        if name == str(broker.node_id):
            result.configs = describe_broker(broker.config.props, opts)
        elif name:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = (
                f"Unexpected broker id, expected {broker.node_id} or empty string, "
                f"but received {name}"
            )
    else:
        result.error_code = ErrorCode.INVALID_REQUEST
        result.error_message = f"Unsupported resource type {r.resource_type}."
    return result


async def handle(
    broker: Broker, ctx: RequestContext, request: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    results = []
    for r in request.resources or []:
        opts = DescribeOptions(
            keys=None if r.configuration_keys is None else frozenset(r.configuration_keys),
            synonyms=request.include_synonyms,
            documentation=request.include_documentation,
        )
        results.append(describe(broker, r, opts))
    return DescribeConfigsResponse(results=results)
