"""CreateTopics: the controller validates, the metadata log makes it so."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.controller.records import PartitionRecord
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from moldau.protocol.messages.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)
from moldau.storage.config import resolve_configs

if TYPE_CHECKING:
    from moldau.server.broker import Broker
    from moldau.server.dispatch import RequestContext

API_KEY = ApiKey.CREATE_TOPICS
MIN_VERSION = 2
MAX_VERSION = 7


async def create(broker: Broker, t: CreatableTopic, validate_only: bool) -> CreatableTopicResult:
    name = t.name or ""
    configs = {c.name or "": c.value or "" for c in t.configs or []}
    assignments = {a.partition_index: list(a.broker_ids or []) for a in t.assignments or []}
    outcome = broker.controller.create_topic(
        broker.image, name, t.num_partitions, t.replication_factor, configs, assignments
    )
    result = CreatableTopicResult(
        name=name, error_code=outcome.error, error_message=outcome.message
    )
    if outcome.error:
        return result
    try:
        if validate_only:
            new = sum(isinstance(r, PartitionRecord) for r in outcome.records)
            broker.log_manager.check_capacity(new)
        else:
            await broker.commit(outcome.records)
    except KafkaError as e:  # storage could not hold it: nothing was committed
        result.error_code, result.error_message = e.code, str(e)
        return result
    topic = broker.image.topics.get(name)
    result.num_partitions = len(topic.partitions) if topic else max(t.num_partitions, 1)
    result.replication_factor = 1
    if topic is not None:
        result.topic_id = topic.topic_id
    result.configs = [
        CreatableTopicConfigs(name=c.name, value=c.value, config_source=c.source)
        for c in resolve_configs(configs, broker.config.log_defaults).values()
    ]
    return result


async def handle(
    broker: Broker, ctx: RequestContext, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    results = []
    seen: set[str] = set()
    for t in request.topics or []:
        if t.name in seen:
            results.append(
                CreatableTopicResult(
                    name=t.name,
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message="Duplicate topic name in request.",
                )
            )
            continue
        seen.add(t.name or "")
        results.append(await create(broker, t, request.validate_only))
    return CreateTopicsResponse(topics=results)
