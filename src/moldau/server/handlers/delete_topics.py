"""DeleteTopics: by name (and by topic id from v6)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.delete_topics_request import DeleteTopicsRequest
from moldau.protocol.messages.delete_topics_response import (
    DeletableTopicResult,
    DeleteTopicsResponse,
)
from moldau.protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from moldau.server.broker import Broker
    from moldau.server.dispatch import RequestContext

API_KEY = ApiKey.DELETE_TOPICS
MIN_VERSION = 1
MAX_VERSION = 6


async def delete(broker: Broker, name: str | None, topic_id: bytes) -> DeletableTopicResult:
    if name is None:
        name = broker.image.topics_by_id.get(topic_id)
        if name is None:
            return DeletableTopicResult(
                name=None, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_ID
            )
    topic = broker.image.topics.get(name)
    if not broker.config.bool("delete.topic.enable"):
        return DeletableTopicResult(name=name, error_code=ErrorCode.TOPIC_DELETION_DISABLED)
    if topic is not None and topic.is_internal:
        return DeletableTopicResult(
            name=name,
            error_code=ErrorCode.INVALID_TOPIC_EXCEPTION,
            error_message="Internal topics cannot be deleted.",
        )
    outcome = broker.controller.delete_topic(broker.image, name)
    if not outcome.error:
        await broker.commit(outcome.records)
    return DeletableTopicResult(
        name=name,
        topic_id=topic.topic_id if topic else ZERO_UUID,
        error_code=outcome.error,
        error_message=outcome.message,
    )


async def handle(
    broker: Broker, ctx: RequestContext, request: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    if ctx.api_version >= 6:
        targets = [(t.name, t.topic_id) for t in request.topics or []]
    else:
        targets = [(n, ZERO_UUID) for n in request.topic_names or []]
    return DeleteTopicsResponse(responses=[await delete(broker, n, i) for n, i in targets])
