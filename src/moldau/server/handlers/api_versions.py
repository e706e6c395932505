"""ApiVersions: what we implement, so clients pick versions we speak."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.api_versions_request import ApiVersionsRequest
from moldau.protocol.messages.api_versions_response import ApiVersionsResponse
from moldau.server import handlers

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY = ApiKey.API_VERSIONS
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(
    services: Services, ctx: RequestContext, request: ApiVersionsRequest
) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=0, api_keys=handlers.advertised_versions())
