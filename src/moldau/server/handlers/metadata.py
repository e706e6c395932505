"""Metadata: brokers, topics and partition leaders, with auto topic creation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.controller.controller import topic_name_error
from moldau.controller.image import TopicImage
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.metadata_request import MetadataRequest
from moldau.protocol.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

if TYPE_CHECKING:
    from moldau.server.broker import Broker
    from moldau.server.dispatch import RequestContext

API_KEY = ApiKey.METADATA
MIN_VERSION = 0
MAX_VERSION = 12


def describe_topic(topic: TopicImage) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=[
            MetadataResponsePartition(
                error_code=ErrorCode.NONE,
                partition_index=p.partition_id,
                leader_id=p.leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr),
                offline_replicas=[],
            )
            for p in sorted(topic.partitions.values(), key=lambda p: p.partition_id)
        ],
    )


async def handle(broker: Broker, ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    if all_topics:
        names = list(broker.image.topics)
    else:
        names = [t.name for t in request.topics or [] if t.name is not None]
        missing = [n for n in names if n not in broker.image.topics and not topic_name_error(n)]
        if (
            missing
            and request.allow_auto_topic_creation
            and broker.config.bool("auto.create.topics.enable")
        ):
            await broker.auto_create_topics(missing)
    image = broker.image
    topics = []
    for name in names:
        topic = image.topics.get(name)
        if topic is not None:
            topics.append(describe_topic(topic))
        else:
            code = (
                ErrorCode.INVALID_TOPIC_EXCEPTION
                if topic_name_error(name)
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            topics.append(MetadataResponseTopic(error_code=code, name=name))
    return MetadataResponse(
        brokers=[
            MetadataResponseBroker(node_id=b.broker_id, host=host, port=port, rack=b.rack)
            for b in image.brokers.values()
            for (_name, host, port) in b.endpoints[:1]
        ],
        cluster_id=image.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
    )
