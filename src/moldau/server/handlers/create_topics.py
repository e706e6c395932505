"""CreateTopics: decided by the controller; internal topics are the broker's to create."""

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
from moldau.server.capacity import capacity_error, local_share

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
    default_partitions = services.config.int("num.partitions")
    default_factor = services.config.int("default.replication.factor")
    accepted = []
    for t in topics:
        if is_internal(t.name or ""):
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
    by_name = {r.name: r for r in (response.topics or []) + refused}
    results = [by_name.get(t.name) for t in topics]
    response.topics = [r for r in results if r is not None]
    return response
