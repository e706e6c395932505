"""Metadata: brokers, topics and partition leaders, with auto topic creation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.metadata.image import MetadataImage, TopicImage
from moldau.metadata.topics import topic_name_error
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.metadata_request import MetadataRequest
from moldau.protocol.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from moldau.protocol.primitives import ZERO_UUID
from moldau.server.auto_create import auto_create_topics

if TYPE_CHECKING:
    from moldau.server.dispatch import RequestContext
    from moldau.server.services import Services

API_KEY = ApiKey.METADATA
MIN_VERSION = 0
MAX_VERSION = 12
TOPIC_IDS_VERSION = 12  # topics may be asked for by id (Java's Admin.describeTopics(ids))


def describe_topic(topic: TopicImage, image: MetadataImage) -> MetadataResponseTopic:
    """Leader, replicas and ISR of every partition; replicas on brokers that are gone
    or fenced are offline (Kafka lists them so clients know the partition is degraded)."""
    live = {b.broker_id for b in image.brokers.values() if not b.fenced}
    return MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=[
            MetadataResponsePartition(
                error_code=ErrorCode.NONE if p.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=p.partition_id,
                leader_id=p.leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr),
                offline_replicas=[r for r in p.replicas if r not in live],
            )
            for p in sorted(topic.partitions.values(), key=lambda p: p.partition_id)
        ],
    )


def brokers(image: MetadataImage, listener: str) -> list[MetadataResponseBroker]:
    """Live brokers' endpoints on the listener the request came in on (as Kafka)."""
    return [
        MetadataResponseBroker(node_id=b.broker_id, host=e.host, port=e.port, rack=b.rack)
        for b in image.brokers.values()
        if not b.fenced and (e := b.endpoint(listener)) is not None
    ]


def _requested_ids(version: int, request: MetadataRequest) -> list[bytes]:
    if version < TOPIC_IDS_VERSION:
        return []
    return list(dict.fromkeys(t.topic_id for t in request.topics or [] if t.topic_id != ZERO_UUID))


async def handle(
    services: Services, ctx: RequestContext, request: MetadataRequest
) -> MetadataResponse:
    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    ids = [] if all_topics else _requested_ids(ctx.api_version, request)
    names = [t.name for t in request.topics or [] if t.name is not None]
    if not all_topics and not ids and request.allow_auto_topic_creation:
        await auto_create_topics(services, names)
    image = services.image
    topics = []
    if all_topics:
        names = list(image.topics)
    elif ids:
        # As Kafka: ids win over names; an unknown id answers UNKNOWN_TOPIC_ID and no name.
        names = [image.topics_by_id[i] for i in ids if i in image.topics_by_id]
        topics += [
            MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=i)
            for i in ids
            if i not in image.topics_by_id
        ]
    for name in names:
        topic = image.topics.get(name)
        if topic is not None:
            topics.append(describe_topic(topic, image))
        else:
            code = (
                ErrorCode.INVALID_TOPIC_EXCEPTION
                if topic_name_error(name)
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            topics.append(MetadataResponseTopic(error_code=code, name=name))
    return MetadataResponse(
        brokers=brokers(image, ctx.listener),
        cluster_id=image.cluster_id,
        controller_id=services.node_id,
        topics=topics,
    )
