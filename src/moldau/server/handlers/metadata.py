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
from moldau.server.auto_create import auto_create_topics

if TYPE_CHECKING:
    from moldau.server.dispatch import RequestContext
    from moldau.server.services import Services

API_KEY = ApiKey.METADATA
MIN_VERSION = 0
MAX_VERSION = 12


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


def brokers(image: MetadataImage) -> list[MetadataResponseBroker]:
    return [
        MetadataResponseBroker(node_id=b.broker_id, host=e.host, port=e.port, rack=b.rack)
        for b in image.brokers.values()
        if not b.fenced and (e := b.endpoint()) is not None
    ]


async def handle(
    services: Services, ctx: RequestContext, request: MetadataRequest
) -> MetadataResponse:
    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    if all_topics:
        names = list(services.image.topics)
    else:
        names = [t.name for t in request.topics or [] if t.name is not None]
        if request.allow_auto_topic_creation:
            await auto_create_topics(services, names)
    image = services.image
    topics = []
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
        brokers=brokers(image),
        cluster_id=image.cluster_id,
        controller_id=services.node_id,
        topics=topics,
    )
