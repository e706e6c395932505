"""ApiVersions: what we implement, so clients pick versions we speak; from v3 on also the
features this broker supports and the cluster's finalized levels (``metadata.version``),
which Admin.describeFeatures and ``kafka-features describe`` read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.metadata.features import ALWAYS_FINALIZED, SUPPORTED
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.api_versions_request import ApiVersionsRequest
from moldau.protocol.messages.api_versions_response import (
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from moldau.server import handlers

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.API_VERSIONS, 0, 4


async def handle(
    services: Services, ctx: RequestContext, request: ApiVersionsRequest
) -> ApiVersionsResponse:
    image = services.image
    disabled = handlers.disabled_apis(services.groups.config.rebalance_protocols)
    response = ApiVersionsResponse(error_code=0, api_keys=handlers.advertised_versions(disabled))
    response.supported_features = [
        SupportedFeatureKey(name=name, min_version=low, max_version=high)
        for name, (low, high) in SUPPORTED.items()
    ]
    # Kafka's epoch of the finalized features is the offset of the image they come from.
    response.finalized_features_epoch = image.offset if image.features else -1
    response.finalized_features = [
        FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
        for name, level in (ALWAYS_FINALIZED | dict(image.features)).items()
    ]
    return response
