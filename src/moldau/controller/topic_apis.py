"""The controller's side of CreateTopics, DeleteTopics and CreatePartitions (decided by
:class:`TopicControl`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from moldau.config.topic import resolve_configs
from moldau.controller.context import ControllerContext
from moldau.controller.quorum_controller import ControllerResult
from moldau.controller.topic_control import Outcome
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import MetadataRecord
from moldau.metadata.topics import is_internal, topic_name_error
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.create_partitions_request import CreatePartitionsRequest
from moldau.protocol.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from moldau.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from moldau.protocol.messages.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)
from moldau.protocol.messages.delete_topics_request import DeleteTopicsRequest
from moldau.protocol.messages.delete_topics_response import (
    DeletableTopicResult,
    DeleteTopicsResponse,
)
from moldau.protocol.primitives import ZERO_UUID


async def create_topics(
    controller: ControllerContext, version: int, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    return await controller.quorum.write(lambda image: _create_topics(controller, image, request))


def _create_topics(
    controller: ControllerContext, image: MetadataImage, request: CreateTopicsRequest
) -> ControllerResult[CreateTopicsResponse]:
    results = []
    records: list[MetadataRecord] = []
    counts = Counter(t.name for t in request.topics or [])
    for t in request.topics or []:
        if counts[t.name] > 1:
            results.append(
                CreatableTopicResult(
                    name=t.name,
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message="Duplicate topic name in request.",
                )
            )
            continue
        result, created = _create_topic(controller, image, t)
        results.append(result)
        if not request.validate_only:
            records += created
    return ControllerResult(CreateTopicsResponse(topics=results), records)


def _create_topic(
    controller: ControllerContext, image: MetadataImage, t: CreatableTopic
) -> tuple[CreatableTopicResult, list[MetadataRecord]]:
    name = t.name or ""
    configs = {c.name or "": c.value or "" for c in t.configs or []}
    assignments = {a.partition_index: list(a.broker_ids or []) for a in t.assignments or []}
    outcome = controller.topics.create_topic(
        image, name, t.num_partitions, t.replication_factor, configs, assignments
    )
    result = CreatableTopicResult(
        name=name, error_code=outcome.error, error_message=outcome.message
    )
    if outcome.error:
        return result, []
    created = image.apply(outcome.records).topics[name]
    result.num_partitions = len(created.partitions)
    result.replication_factor = len(next(iter(created.partitions.values())).replicas)
    result.topic_id = created.topic_id
    result.configs = [
        CreatableTopicConfigs(name=c.name, value=c.value, config_source=c.source)
        for c in resolve_configs(configs, controller.topics.broker_props).values()
    ]
    return result, outcome.records


async def delete_topics(
    controller: ControllerContext, version: int, request: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    if version >= 6:
        targets = [(t.name, t.topic_id) for t in request.topics or []]
    else:
        targets = [(n, ZERO_UUID) for n in request.topic_names or []]
    return await controller.quorum.write(lambda image: _delete_topics(controller, image, targets))


def _delete_topics(
    controller: ControllerContext, image: MetadataImage, targets: Sequence[tuple[str | None, bytes]]
) -> ControllerResult[DeleteTopicsResponse]:
    results = []
    records: list[MetadataRecord] = []
    for name, topic_id in targets:
        result, removed = _delete_topic(controller, image, name, topic_id)
        results.append(result)
        records += removed
    return ControllerResult(DeleteTopicsResponse(responses=results), records)


def _delete_topic(
    controller: ControllerContext, image: MetadataImage, name: str | None, topic_id: bytes
) -> tuple[DeletableTopicResult, list[MetadataRecord]]:
    if name is None:
        name = image.topics_by_id.get(topic_id)
        if name is None:
            return DeletableTopicResult(
                name=None, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_ID
            ), []
    topic = image.topics.get(name)
    if not controller.delete_topic_enable:
        return DeletableTopicResult(name=name, error_code=ErrorCode.TOPIC_DELETION_DISABLED), []
    if is_internal(name) or topic_name_error(name):
        return DeletableTopicResult(
            name=name,
            error_code=ErrorCode.INVALID_TOPIC_EXCEPTION,
            error_message="Internal topics cannot be deleted."
            if is_internal(name)
            else topic_name_error(name),
        ), []
    outcome = controller.topics.delete_topic(image, name)
    return DeletableTopicResult(
        name=name,
        topic_id=topic.topic_id if topic else ZERO_UUID,
        error_code=outcome.error,
        error_message=outcome.message,
    ), outcome.records


async def create_partitions(
    controller: ControllerContext, version: int, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    return await controller.quorum.write(
        lambda image: _create_partitions(controller, image, request)
    )


def _create_partitions(
    controller: ControllerContext, image: MetadataImage, request: CreatePartitionsRequest
) -> ControllerResult[CreatePartitionsResponse]:
    results = []
    records: list[MetadataRecord] = []
    counts = Counter(t.name for t in request.topics or [])
    for t in request.topics or []:
        name = t.name or ""
        if counts[t.name] > 1:
            outcome = Outcome(ErrorCode.INVALID_REQUEST, "Duplicate topic name in request.")
        elif is_internal(name):
            outcome = Outcome(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Cannot increase the number of partitions of internal topic {name}.",
            )
        else:
            outcome = controller.topics.create_partitions(image, name, t.count)
        if not outcome.error and not request.validate_only:
            records += outcome.records
        results.append(
            CreatePartitionsTopicResult(
                name=t.name, error_code=outcome.error, error_message=outcome.message
            )
        )
    return ControllerResult(CreatePartitionsResponse(results=results), records)
