"""A request's answer when it failed as a whole (Kafka's ``getErrorResponse``).

When a handler cannot answer (the controller it forwards to is not active, the metadata
log could not be written...), the client still gets a response of the right shape with
the error in it, never a closed connection. Responses that report errors per item
(topics, resources, partitions) carry it on every item the request named.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages import RESPONSES
from moldau.protocol.messages.alter_configs_response import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from moldau.protocol.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from moldau.protocol.messages.create_topics_response import (
    CreatableTopicResult,
    CreateTopicsResponse,
)
from moldau.protocol.messages.delete_topics_response import (
    DeletableTopicResult,
    DeleteTopicsResponse,
)
from moldau.protocol.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse as IncrementalResourceResponse,
)
from moldau.protocol.messages.incremental_alter_configs_response import (
    IncrementalAlterConfigsResponse,
)


def _create_topics(request: Any, code: ErrorCode, message: str) -> Any:
    return CreateTopicsResponse(
        topics=[
            CreatableTopicResult(name=t.name, error_code=code, error_message=message)
            for t in request.topics
        ]
    )


def _delete_topics(request: Any, code: ErrorCode, message: str) -> Any:
    names = [t.name for t in request.topics] or list(request.topic_names)
    return DeleteTopicsResponse(
        responses=[
            DeletableTopicResult(name=n, error_code=code, error_message=message) for n in names
        ]
    )


def _create_partitions(request: Any, code: ErrorCode, message: str) -> Any:
    return CreatePartitionsResponse(
        results=[
            CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message)
            for t in request.topics
        ]
    )


def _resources(response: type[Any], item: type[Any]) -> Callable[[Any, ErrorCode, str], Any]:
    def build(request: Any, code: ErrorCode, message: str) -> Any:
        return response(
            responses=[
                item(
                    error_code=code,
                    error_message=message,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
                for r in request.resources
            ]
        )

    return build


_BUILDERS: dict[int, Callable[[Any, ErrorCode, str], Any]] = {
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.ALTER_CONFIGS: _resources(AlterConfigsResponse, AlterConfigsResourceResponse),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _resources(
        IncrementalAlterConfigsResponse, IncrementalResourceResponse
    ),
}


def error_response(api_key: int, request: Any, code: ErrorCode, message: str) -> Any:
    """The response to ``request`` saying ``code``: per item where the API reports errors
    per item, else in its top-level error code."""
    build = _BUILDERS.get(api_key)
    if build is not None:
        return build(request, code, message)
    response = RESPONSES[api_key]()
    if hasattr(response, "error_code"):
        response.error_code = code
    if hasattr(response, "error_message"):
        response.error_message = message
    return response
