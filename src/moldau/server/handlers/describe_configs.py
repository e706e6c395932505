"""DescribeConfigs: effective topic and broker configs with their sources."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.metadata.image import BROKER_RESOURCE, GROUP_RESOURCE, TOPIC_RESOURCE
from moldau.metadata.topics import missing_topic
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
from moldau.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.topic_configs import (
    DescribeOptions,
    describe_broker,
    describe_group,
    describe_topic,
)

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DESCRIBE_CONFIGS, 1, 4


# Config resource type -> what DescribeConfigs of it needs (Kafka's ConfigHelper).
_AUTHORIZATION = {
    TOPIC_RESOURCE: (ResourceType.TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    BROKER_RESOURCE: (ResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    GROUP_RESOURCE: (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),
}


def describe(
    services: Services, ctx: RequestContext, r: DescribeConfigsResource, opts: DescribeOptions
) -> DescribeConfigsResult:
    name = r.resource_name or ""
    result = DescribeConfigsResult(
        error_code=ErrorCode.NONE,
        error_message=None,
        resource_type=r.resource_type,
        resource_name=name,
    )
    if r.resource_type in _AUTHORIZATION:
        resource, error = _AUTHORIZATION[r.resource_type]
        target = CLUSTER_NAME if resource == ResourceType.CLUSTER else name
        if not services.authorizer.allowed(ctx, AclOperation.DESCRIBE_CONFIGS, resource, target):
            result.error_code = error
            return result
    dynamic = services.dynamic_config
    if r.resource_type == TOPIC_RESOURCE:
        topic = services.image.topics.get(name)
        if topic is not None:
            result.configs = describe_topic(
                topic.configs, dynamic.log_defaults, opts, dynamic.source
            )
        else:
            result.error_code, result.error_message = missing_topic(name)
    elif r.resource_type == BROKER_RESOURCE:
        if name == str(services.node_id):
            result.configs = describe_broker(dynamic, opts)
        elif not name:
            result.configs = describe_broker(dynamic, opts, cluster_default=True)
        else:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = (
                f"Unexpected broker id, expected {services.node_id} or empty string, "
                f"but received {name}"
            )
    elif r.resource_type == GROUP_RESOURCE:
        overrides = services.image.group_configs.get(name, {})
        result.configs = describe_group(overrides, services.config.props, opts)
    else:
        result.error_code = ErrorCode.INVALID_REQUEST
        result.error_message = f"Unsupported resource type {r.resource_type}."
    return result


async def handle(
    services: Services, ctx: RequestContext, request: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    results = []
    for r in request.resources or []:
        opts = DescribeOptions(
            keys=None if r.configuration_keys is None else frozenset(r.configuration_keys),
            synonyms=request.include_synonyms,
            documentation=request.include_documentation,
        )
        results.append(describe(services, ctx, r, opts))
    return DescribeConfigsResponse(results=results)
