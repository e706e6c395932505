"""DescribeTopicPartitions (KIP-966): topics' partitions with leader, replicas, ISR and
offline replicas, paged by a cursor (what Kafka 3.7+ admin clients use to describe
topics). Topics are answered in name order; a page holds at most
``response_partition_limit`` partitions and says where the next one starts.

As Kafka: DESCRIBE on each topic; a topic asked for by name without it answers
TOPIC_AUTHORIZATION_FAILED (whether it exists or not), and a listing of all topics leaves
it out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.metadata.image import MetadataImage, TopicImage
from moldau.metadata.topics import topic_name_error
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.describe_topic_partitions_request import (
    DescribeTopicPartitionsRequest,
)
from moldau.protocol.messages.describe_topic_partitions_response import (
    Cursor,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0
DEFAULT_LIMIT = 2000  # Kafka's max.request.partition.size.limit


def _partitions(
    topic: TopicImage, image: MetadataImage, first: int, limit: int
) -> list[DescribeTopicPartitionsResponsePartition]:
    live = {b.broker_id for b in image.brokers.values() if not b.fenced}
    return [
        DescribeTopicPartitionsResponsePartition(
            error_code=ErrorCode.NONE if p.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=p.partition_id,
            leader_id=p.leader,
            leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas),
            isr_nodes=list(p.isr),
            # Kafka sends empty lists, never null: the Java admin streams over them.
            eligible_leader_replicas=[],
            last_known_elr=[],
            offline_replicas=[r for r in p.replicas if r not in live],
        )
        for p in sorted(topic.partitions.values(), key=lambda p: p.partition_id)
        if p.partition_id >= first
    ][:limit]


async def handle(
    services: Services, ctx: RequestContext, request: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    image = services.image
    access = services.authorizer
    asked = {t.name for t in request.topics or []}
    names = sorted(asked or image.topics)
    describable = access.allowed_names(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names, log_denied=bool(asked)
    )
    if not asked:
        names = [n for n in names if n in describable]
    cursor = request.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    budget = request.response_partition_limit or DEFAULT_LIMIT
    topics = []
    next_cursor = None
    for name in names:
        topic = image.topics.get(name)
        if name not in describable:
            topics.append(
                DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name
                )
            )
            continue
        if topic is None:
            code = (
                ErrorCode.INVALID_TOPIC_EXCEPTION
                if topic_name_error(name)
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            topics.append(DescribeTopicPartitionsResponseTopic(error_code=code, name=name))
            continue
        if budget <= 0:
            next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        partitions = _partitions(topic, image, first, budget)
        budget -= len(partitions)
        topics.append(
            DescribeTopicPartitionsResponseTopic(
                name=name,
                topic_id=topic.topic_id,
                is_internal=topic.is_internal,
                partitions=partitions,
                topic_authorized_operations=access.operations(ctx, ResourceType.TOPIC, name),
            )
        )
        shown = first + len(partitions)
        if shown < len(topic.partitions) and budget <= 0:
            next_cursor = Cursor(topic_name=name, partition_index=shown)
            break
    return DescribeTopicPartitionsResponse(topics=topics, next_cursor=next_cursor)
