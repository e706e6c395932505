"""Metadata: brokers, topics and partition leaders, with auto topic creation.

As Kafka, topics the principal may not DESCRIBE are left out of an all-topics answer
and answered TOPIC_AUTHORIZATION_FAILED when asked for by name or id (without telling
whether they exist), and a missing topic is auto-created only with CREATE on the cluster
or the topic."""

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
from moldau.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.auto_create import auto_create_topics

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.METADATA, 0, 12
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
    access = services.authorizer
    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    ids = [] if all_topics else _requested_ids(ctx.api_version, request)
    names = [t.name for t in request.topics or [] if t.name is not None]
    topics: list[MetadataResponseTopic] = []
    if not all_topics and not ids:
        names, topics = await _named(services, ctx, names, request.allow_auto_topic_creation)
    image = services.image
    if all_topics:
        names = [
            n
            for n in image.topics
            if access.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, n, log_denied=False)
        ]
    elif ids:
        # As Kafka: ids win over names; an unknown id answers UNKNOWN_TOPIC_ID and no name.
        known = [image.topics_by_id[i] for i in ids if i in image.topics_by_id]
        describable = access.allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, known)
        names = [n for n in known if n in describable]
        # Topic ids are not secret: an id the principal may not describe gets its error.
        topics += [
            MetadataResponseTopic(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                name=None,
                topic_id=image.topics[n].topic_id,
            )
            for n in known
            if n not in describable
        ]
        topics += [
            MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=i)
            for i in ids
            if i not in image.topics_by_id
        ]
    for name in names:
        topic = image.topics.get(name)
        if topic is not None:
            described = describe_topic(topic, image)
            if request.include_topic_authorized_operations and ctx.api_version >= 8:
                described.topic_authorized_operations = access.operations(
                    ctx, ResourceType.TOPIC, name
                )
            topics.append(described)
        else:
            code = (
                ErrorCode.INVALID_TOPIC_EXCEPTION
                if topic_name_error(name)
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            topics.append(MetadataResponseTopic(error_code=code, name=name))
    response = MetadataResponse(
        brokers=brokers(image, ctx.listener),
        cluster_id=image.cluster_id,
        controller_id=services.node_id,
        topics=topics,
    )
    if request.include_cluster_authorized_operations and 8 <= ctx.api_version <= 10:
        response.cluster_authorized_operations = (
            access.operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
            if access.cluster(ctx, AclOperation.DESCRIBE)
            else 0
        )
    return response


async def _named(
    services: Services, ctx: RequestContext, names: list[str], allow_auto_creation: bool
) -> tuple[list[str], list[MetadataResponseTopic]]:
    """The requested names the principal may DESCRIBE and, if they are to be auto-created,
    CREATE (creating those); the others answer TOPIC_AUTHORIZATION_FAILED."""
    access = services.authorizer
    allowed = access.allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    if allow_auto_creation and services.config.bool("auto.create.topics.enable"):
        missing = {n for n in allowed if n not in services.image.topics}
        allowed -= missing - access.creatable(ctx, missing)
        await auto_create_topics(services, allowed)
    refused = [
        MetadataResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=n)
        for n in dict.fromkeys(names)
        if n not in allowed
    ]
    return [n for n in names if n in allowed], refused
