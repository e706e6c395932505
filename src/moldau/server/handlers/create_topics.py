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

if TYPE_CHECKING:
    from moldau.server.dispatch import RequestContext
    from moldau.server.services import Services

API_KEY = ApiKey.CREATE_TOPICS
MIN_VERSION = 2
MAX_VERSION = 7


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
    refused += [
        CreatableTopicResult(
            name=t.name,
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            error_message="Authorization failed.",
        )
        for t in topics
        if t.name not in creatable and not is_internal(t.name or "")
    ]
    request.topics = [t for t in topics if not is_internal(t.name or "") and t.name in creatable]
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
