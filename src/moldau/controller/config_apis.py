"""The controller's side of AlterConfigs and IncrementalAlterConfigs: topic configs and
dynamic broker configs (decided by :class:`TopicControl`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from moldau.config.topic import resolve_configs
from moldau.controller.configs import Changes, incremental, replacement
from moldau.controller.context import ControllerContext
from moldau.controller.quorum_controller import ControllerResult
from moldau.controller.topic_control import Outcome
from moldau.metadata.image import BROKER_RESOURCE, GROUP_RESOURCE, TOPIC_RESOURCE, MetadataImage
from moldau.metadata.records import MetadataRecord
from moldau.metadata.topics import missing_topic
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.alter_configs_request import AlterConfigsRequest
from moldau.protocol.messages.alter_configs_response import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from moldau.protocol.messages.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from moldau.protocol.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse as IncrementalAlterResourceResponse,
)
from moldau.protocol.messages.incremental_alter_configs_response import (
    IncrementalAlterConfigsResponse,
)

T = TypeVar("T")


class ConfigResource(Protocol):
    @property
    def resource_type(self) -> int: ...

    @property
    def resource_name(self) -> str | None: ...


async def alter_configs(
    controller: ControllerContext, version: int, request: AlterConfigsRequest
) -> AlterConfigsResponse:
    responses = await controller.quorum.write(
        lambda image: _alter_configs(
            controller,
            image,
            request.resources or [],
            lambda r, effective: replacement(r),
            AlterConfigsResourceResponse,
            replace=True,
            validate_only=request.validate_only,
        )
    )
    return AlterConfigsResponse(responses=responses)


async def incremental_alter_configs(
    controller: ControllerContext, version: int, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    responses = await controller.quorum.write(
        lambda image: _alter_configs(
            controller,
            image,
            request.resources or [],
            incremental,
            IncrementalAlterResourceResponse,
            replace=False,
            validate_only=request.validate_only,
        )
    )
    return IncrementalAlterConfigsResponse(responses=responses)


def _alter_configs(
    controller: ControllerContext,
    image: MetadataImage,
    resources: Sequence[ConfigResource],
    changes: Callable[[Any, Mapping[str, str]], Changes],
    response: Callable[..., T],
    *,
    replace: bool,
    validate_only: bool,
) -> ControllerResult[list[T]]:
    """One response per resource, in request order. Kafka fails every copy of a
    resource named twice rather than guess which one wins."""
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    results = []
    records: list[MetadataRecord] = []
    for r in resources:
        if counts[(r.resource_type, r.resource_name)] > 1:
            outcome = Outcome(ErrorCode.INVALID_REQUEST, "Duplicate resource in request.")
        else:
            outcome = _alter_resource(controller, image, r, changes, replace)
        if not outcome.error and not validate_only:
            records += outcome.records
        results.append(
            response(
                error_code=outcome.error,
                error_message=outcome.message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
        )
    return ControllerResult(results, records)


def _alter_resource(
    controller: ControllerContext,
    image: MetadataImage,
    r: ConfigResource,
    changes: Callable[[Any, Mapping[str, str]], Changes],
    replace: bool,
) -> Outcome:
    name = r.resource_name or ""
    decisions = controller.topics
    try:
        if r.resource_type == TOPIC_RESOURCE:
            topic = image.topics.get(name)
            if topic is None:
                return Outcome(*missing_topic(name))
            effective = {
                k: c.value
                for k, c in resolve_configs(topic.configs, decisions.broker_props).items()
                if c.value is not None
            }
            wanted = changes(r, effective)
            return decisions.alter_topic_configs(image, name, wanted, replace=replace)
        if r.resource_type == BROKER_RESOURCE:
            wanted = changes(r, image.broker_configs.get(name, {}))
            return decisions.alter_broker_configs(image, name, wanted, replace=replace)
        if r.resource_type == GROUP_RESOURCE:
            wanted = changes(r, image.group_configs.get(name, {}))
            return decisions.alter_group_configs(image, name, wanted, replace=replace)
    except KafkaError as e:
        return Outcome(e.code, str(e))
    return decisions.alter_configs_refused(r.resource_type)
