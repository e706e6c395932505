"""CreatePartitions: grow a topic's partition count."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import KafkaError
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
        error, message = outcome.error, outcome.message
        if not error:
            try:
                if request.validate_only:
                    topic = broker.image.topics[t.name or ""]
                    broker.log_manager.check_capacity(t.count - len(topic.partitions))
                else:
                    await broker.commit(outcome.records)
            except KafkaError as e:  # storage could not hold them: nothing was committed
                error, message = e.code, str(e)
        results.append(
            CreatePartitionsTopicResult(name=t.name, error_code=error, error_message=message)
        )
    return CreatePartitionsResponse(results=results)
