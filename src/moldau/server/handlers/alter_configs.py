"""AlterConfigs (legacy): the given configs replace all of a topic's overrides."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.alter_configs_request import AlterConfigsRequest, AlterConfigsResource
from moldau.protocol.messages.alter_configs_response import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from moldau.server.topic_configs import alter_resources, check_unique

if TYPE_CHECKING:
    from moldau.controller.image import TopicImage
    from moldau.server.broker import Broker
    from moldau.server.dispatch import RequestContext

API_KEY = ApiKey.ALTER_CONFIGS
MIN_VERSION = 0
MAX_VERSION = 2


def replacement(r: AlterConfigsResource, _topic: TopicImage) -> dict[str, str | None]:
    configs = r.configs or []
    check_unique(c.name for c in configs)
    return {c.name or "": c.value for c in configs}


async def handle(
    broker: Broker, ctx: RequestContext, request: AlterConfigsRequest
) -> AlterConfigsResponse:
    responses = await alter_resources(
        broker,
        request.resources or [],
        replacement,
        AlterConfigsResourceResponse,
        replace=True,
        validate_only=request.validate_only,
    )
    return AlterConfigsResponse(responses=responses)
