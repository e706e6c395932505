"""ReadShareGroupState (KIP-932, inter-broker): a share-partition leader reads the durable
state of a share-partition from its share coordinator."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from moldau.coordinator.share_state.shard import ShareGroupOffset
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.read_share_group_state_request import (
    PartitionData,
    ReadShareGroupStateRequest,
)
from moldau.protocol.messages.read_share_group_state_response import (
    PartitionResult,
    ReadShareGroupStateResponse,
    ReadStateResult,
    StateBatch,
)
from moldau.security.acl import AclOperation

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.READ_SHARE_GROUP_STATE, 0, 0

_R = TypeVar("_R")


async def each_partition(
    topics: Iterable[Any], one: Callable[[bytes, Any], Awaitable[_R]]
) -> list[tuple[bytes, list[_R]]]:
    """``one(topic_id, partition)`` for every partition of a share-state request's topics:
    a topic's partitions concurrently, the topics in turn; the results in request order."""
    return [
        (t.topic_id, list(await asyncio.gather(*(one(t.topic_id, p) for p in t.partitions))))
        for t in topics
    ]


def share_state_error(
    services: Services, ctx: RequestContext, group_id: str, topic_id: bytes, partition: int
) -> ErrorCode:
    """The checks every share-state API makes of one share-partition, as Kafka's share
    coordinator: brokers only, a group, a partition of a topic that exists."""
    error = _request_error(services, ctx, group_id, partition)
    if error is ErrorCode.NONE and not _exists(services, topic_id, partition):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return error


def _request_error(
    services: Services, ctx: RequestContext, group_id: str, partition: int
) -> ErrorCode:
    if not services.authorizer.cluster(ctx, AclOperation.CLUSTER_ACTION):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if not group_id or partition < 0:
        return ErrorCode.INVALID_REQUEST
    return ErrorCode.NONE


def _exists(services: Services, topic_id: bytes, partition: int) -> bool:
    topic = services.image.topics_by_id.get(topic_id)
    return topic is not None and partition in services.image.topics[topic].partitions


async def read_state(
    services: Services,
    ctx: RequestContext,
    group_id: str,
    topic_id: bytes,
    partition: int,
    leader_epoch: int,
) -> tuple[ErrorCode, ShareGroupOffset]:
    """A share-partition's durable state. As Kafka 4.1's share coordinator, the state is
    looked up before the topic: state that does not exist (never initialized, or gone
    with its deleted topic) is INVALID_REQUEST, a stale leader epoch FENCED_LEADER_EPOCH,
    and only state whose topic partition is not in the metadata UNKNOWN_TOPIC_OR_PARTITION
    (no state with an error: start offset -1)."""
    error = _request_error(services, ctx, group_id, partition)
    if error:
        return error, ShareGroupOffset()
    error, state = await services.share_state.read((group_id, topic_id, partition), leader_epoch)
    if error is ErrorCode.NONE and not _exists(services, topic_id, partition):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ShareGroupOffset()
    return error, state


async def handle(
    services: Services, ctx: RequestContext, request: ReadShareGroupStateRequest
) -> ReadShareGroupStateResponse:
    group_id = request.group_id or ""

    async def one(topic_id: bytes, p: PartitionData) -> PartitionResult:
        error, state = await read_state(
            services, ctx, group_id, topic_id, p.partition, p.leader_epoch
        )
        return PartitionResult(
            p.partition,
            error,
            state_epoch=state.state_epoch,
            start_offset=state.start_offset,
            state_batches=[
                StateBatch(b.first, b.last, b.state, b.delivery_count) for b in state.batches
            ],
        )

    return ReadShareGroupStateResponse(
        results=[
            ReadStateResult(topic_id, partitions)
            for topic_id, partitions in await each_partition(request.topics or [], one)
        ]
    )
