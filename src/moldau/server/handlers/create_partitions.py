"""CreatePartitions: grow a topic's partition count."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.create_partitions_request import CreatePartitionsRequest
from moldau.protocol.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)

if TYPE_CHECKING:
    from moldau.server.broker import Broker
    from moldau.server.dispatch import RequestContext

API_KEY = ApiKey.CREATE_PARTITIONS
MIN_VERSION = 0
MAX_VERSION = 3


async def handle(
    broker: Broker, ctx: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    results = []
    for t in request.topics or []:
        outcome = broker.controller.create_partitions(broker.image, t.name or "", t.count)
        if not outcome.error and not request.validate_only:
            await broker.commit(outcome.records)
        results.append(
            CreatePartitionsTopicResult(
                name=t.name, error_code=outcome.error, error_message=outcome.message
            )
        )
    return CreatePartitionsResponse(results=results)
