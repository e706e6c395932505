"""DescribeProducers: the active producers of partitions this broker leads, with the
offset where each one's open transaction started (what finds hanging transactions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.describe_producers_request import DescribeProducersRequest
from moldau.protocol.messages.describe_producers_response import (
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DESCRIBE_PRODUCERS, 0, 0


def describe(services: Services, topic: str, partition: int) -> PartitionResponse:
    try:
        producers = services.replica_manager.active_producers((topic, partition))
    except KafkaError as e:
        return PartitionResponse(partition_index=partition, error_code=e.code, error_message=str(e))
    return PartitionResponse(
        partition_index=partition,
        error_code=ErrorCode.NONE,
        active_producers=[
            ProducerState(
                producer_id=e.producer_id,
                producer_epoch=e.producer_epoch,
                last_sequence=e.last_seq,
                last_timestamp=e.last_timestamp,
                coordinator_epoch=e.coordinator_epoch,
                current_txn_start_offset=e.current_txn_first_offset,
            )
            for e in producers
        ],
    )


async def handle(
    services: Services, ctx: RequestContext, request: DescribeProducersRequest
) -> DescribeProducersResponse:
    readable = services.authorizer.allowed_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name or "" for t in request.topics or [])
    )
    return DescribeProducersResponse(
        topics=[
            TopicResponse(
                name=t.name,
                partitions=[
                    describe(services, t.name or "", p)
                    if t.name in readable
                    else PartitionResponse(
                        partition_index=p, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    )
                    for p in t.partition_indexes or []
                ],
            )
            for t in request.topics or []
        ]
    )
