"""DescribeCluster: the cluster id, the controller and the registered brokers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.describe_cluster_request import DescribeClusterRequest
from moldau.protocol.messages.describe_cluster_response import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)
from moldau.security.acl import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DESCRIBE_CLUSTER, 0, 2

BROKERS_ENDPOINT = 1


async def handle(
    services: Services, ctx: RequestContext, request: DescribeClusterRequest
) -> DescribeClusterResponse:
    image = services.image
    response = DescribeClusterResponse(
        endpoint_type=request.endpoint_type,
        cluster_id=image.cluster_id,
        controller_id=services.node_id,
    )
    if request.endpoint_type != BROKERS_ENDPOINT:
        # Controllers are only reachable through a controller listener, which we lack.
        response.error_code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        response.error_message = "The request was sent to an endpoint of type BROKER."
        return response
    if request.include_cluster_authorized_operations:
        access = services.authorizer
        response.cluster_authorized_operations = (
            access.operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
            if access.cluster(ctx, AclOperation.DESCRIBE)
            else 0
        )
    response.brokers = [
        DescribeClusterBroker(
            broker_id=b.broker_id, host=e.host, port=e.port, rack=b.rack, is_fenced=b.fenced
        )
        for b in image.brokers.values()
        if (request.include_fenced_brokers or not b.fenced)
        and (e := b.endpoint(ctx.listener)) is not None
    ]
    return response
