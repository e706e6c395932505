"""CreateTopics: decided by the controller; internal topics are the broker's to create.

As Kafka: CREATE on the cluster or on each topic (else TOPIC_AUTHORIZATION_FAILED), and
the created topic's configs are shown only with DESCRIBE_CONFIGS on it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.metadata.topics import is_internal
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.create_topics_request import CreateTopicsRequest
from moldau.protocol.messages.create_topics_response import (
    CreatableTopicResult,
    CreateTopicsResponse,
)
from moldau.security.acl import AclOperation, ResourceType
from moldau.server.capacity import capacity_error, local_share

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.CREATE_TOPICS, 2, 7


async def handle(
    services: Services, ctx: RequestContext, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    topics = request.topics or []
    refused = [
        CreatableTopicResult(
            name=t.name,
            error_code=ErrorCode.INVALID_REQUEST,
            error_message=f"Creation of internal topic {t.name} is prohibited.",
        )
        for t in topics
        if is_internal(t.name or "")
    ]
    access = services.authorizer
    creatable = access.creatable(ctx, (t.name or "" for t in topics))
    default_partitions = services.config.int("num.partitions")
    default_factor = services.config.int("default.replication.factor")
    accepted = []
    for t in topics:
        if is_internal(t.name or ""):
            continue
        if t.name not in creatable:
            refused.append(
                CreatableTopicResult(
                    name=t.name,
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    error_message="Authorization failed.",
                )
            )
            continue
        partitions = len(t.assignments) or (
            default_partitions if t.num_partitions == -1 else t.num_partitions
        )
        factor = default_factor if t.replication_factor == -1 else t.replication_factor
        error = capacity_error(services, local_share(services, partitions, factor))
        if error is None:
            accepted.append(t)
        else:  # this broker could not hold it: the controller never hears of it
            refused.append(
                CreatableTopicResult(name=t.name, error_code=error.code, error_message=str(error))
            )
    request.topics = accepted
    response: CreateTopicsResponse = await services.controller.call(
        API_KEY, ctx.api_version, request
    )
    describable = access.allowed_names(
        ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, creatable, log_denied=False
    )
    for r in response.topics or []:
        if r.name not in describable:
            r.configs, r.topic_config_error_code = [], ErrorCode.TOPIC_AUTHORIZATION_FAILED
    by_name = {r.name: r for r in (response.topics or []) + refused}
    results = [by_name.get(t.name) for t in topics]
    response.topics = [r for r in results if r is not None]
    return response
