"""CreatePartitions: grow a topic's partition count; decided by the controller."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.create_partitions_request import CreatePartitionsRequest
from moldau.protocol.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from moldau.server.capacity import capacity_error, local_share
from moldau.server.handlers.forward import to_controller

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.CREATE_PARTITIONS, 0, 3


async def handle(
    services: Services, ctx: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    """Topics whose new partitions this broker could not hold are refused here; the rest
    go to the controller."""
    refused = []
    accepted = []
    for t in request.topics:
        topic = services.image.topics.get(t.name)
        if topic is not None and t.count > len(topic.partitions):
            factor = len(next(iter(topic.partitions.values())).replicas)
            added = local_share(services, t.count - len(topic.partitions), factor)
            error = capacity_error(services, added)
            if error is not None:
                refused.append(
                    CreatePartitionsTopicResult(
                        name=t.name, error_code=error.code, error_message=str(error)
                    )
                )
                continue
        accepted.append(t)
    request.topics = accepted
    response: CreatePartitionsResponse = await to_controller(services, ctx, request)
    response.results = [*response.results, *refused]
    return response
