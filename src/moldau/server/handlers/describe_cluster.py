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

if TYPE_CHECKING:
    from moldau.server.broker import Broker
    from moldau.server.dispatch import RequestContext

API_KEY = ApiKey.DESCRIBE_CLUSTER
MIN_VERSION = 0
MAX_VERSION = 1

BROKERS_ENDPOINT = 1


async def handle(
    broker: Broker, ctx: RequestContext, request: DescribeClusterRequest
) -> DescribeClusterResponse:
    image = broker.image
    response = DescribeClusterResponse(
        endpoint_type=request.endpoint_type,
        cluster_id=image.cluster_id,
        controller_id=broker.node_id,
    )
    if request.endpoint_type != BROKERS_ENDPOINT:
        # Controllers are only reachable through a controller listener, which we lack.
        response.error_code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        response.error_message = "The request was sent to an endpoint of type BROKER."
        return response
    response.brokers = [
        DescribeClusterBroker(broker_id=b.broker_id, host=host, port=port, rack=b.rack)
        for b in image.brokers.values()
        for (_name, host, port) in b.endpoints[:1]
    ]
    return response
