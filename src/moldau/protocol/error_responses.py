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
from moldau.protocol.messages.alter_client_quotas_response import (
    AlterClientQuotasResponse,
    EntityData,
    EntryData,
)
from moldau.protocol.messages.alter_configs_response import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from moldau.protocol.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from moldau.protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from moldau.protocol.messages.create_acls_response import AclCreationResult, CreateAclsResponse
from moldau.protocol.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from moldau.protocol.messages.create_topics_response import (
    CreatableTopicResult,
    CreateTopicsResponse,
)
from moldau.protocol.messages.delete_acls_response import DeleteAclsFilterResult, DeleteAclsResponse
from moldau.protocol.messages.delete_topics_response import (
    DeletableTopicResult,
    DeleteTopicsResponse,
)
from moldau.protocol.messages.describe_share_group_offsets_response import (
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
)
from moldau.protocol.messages.elect_leaders_response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from moldau.protocol.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse as IncrementalResourceResponse,
)
from moldau.protocol.messages.incremental_alter_configs_response import (
    IncrementalAlterConfigsResponse,
)
from moldau.protocol.messages.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)

Builder = Callable[[Any, ErrorCode, "str | None"], Any]


def _create_topics(request: Any, code: ErrorCode, message: str | None) -> Any:
    return CreateTopicsResponse(
        topics=[
            CreatableTopicResult(name=t.name, error_code=code, error_message=message)
            for t in request.topics
        ]
    )


def _delete_topics(request: Any, code: ErrorCode, message: str | None) -> Any:
    names = [t.name for t in request.topics] or list(request.topic_names)
    return DeleteTopicsResponse(
        responses=[
            DeletableTopicResult(name=n, error_code=code, error_message=message) for n in names
        ]
    )


def _create_partitions(request: Any, code: ErrorCode, message: str | None) -> Any:
    return CreatePartitionsResponse(
        results=[
            CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message)
            for t in request.topics
        ]
    )


def _resources(response: type[Any], item: type[Any]) -> Builder:
    def build(request: Any, code: ErrorCode, message: str | None) -> Any:
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


def _per_partition(
    response: type[Any], topic: type[Any], partition: type[Any], field: str, *, top_level: bool
) -> Builder:
    """For responses with an error per topic and partition index (and maybe overall)."""

    def build(request: Any, code: ErrorCode, message: str | None) -> Any:
        topics = [
            topic(
                name=t.name,
                partitions=[
                    partition(partition_index=p.partition_index, error_code=code)
                    for p in t.partitions or []
                ],
            )
            for t in request.topics or []
        ]
        return response(**{field: topics}, **({"error_code": code} if top_level else {}))

    return build


def _elect_leaders(request: Any, code: ErrorCode, message: str | None) -> Any:
    return ElectLeadersResponse(
        error_code=code,
        replica_election_results=[
            ReplicaElectionResult(
                topic=t.topic,
                partition_result=[
                    PartitionResult(partition_id=p, error_code=code) for p in t.partitions or []
                ],
            )
            for t in request.topic_partitions or []
        ],
    )


def _create_acls(request: Any, code: ErrorCode, message: str | None) -> Any:
    return CreateAclsResponse(
        results=[
            AclCreationResult(error_code=code, error_message=message)
            for _ in request.creations or []
        ]
    )


def _describe_share_group_offsets(request: Any, code: ErrorCode, message: str | None) -> Any:
    return DescribeShareGroupOffsetsResponse(
        groups=[
            DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, error_code=code, error_message=message
            )
            for g in request.groups or []
        ]
    )


def _delete_acls(request: Any, code: ErrorCode, message: str | None) -> Any:
    return DeleteAclsResponse(
        filter_results=[
            DeleteAclsFilterResult(error_code=code, error_message=message)
            for _ in request.filters or []
        ]
    )


def _alter_client_quotas(request: Any, code: ErrorCode, message: str | None) -> Any:
    return AlterClientQuotasResponse(
        entries=[
            EntryData(
                error_code=code,
                error_message=message,
                entity=[
                    EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                    for e in entry.entity or []
                ],
            )
            for entry in request.entries or []
        ]
    )


def _alter_scram_credentials(request: Any, code: ErrorCode, message: str | None) -> Any:
    users = dict.fromkeys(
        [d.name for d in request.deletions or []] + [u.name for u in request.upsertions or []]
    )
    return AlterUserScramCredentialsResponse(
        results=[
            AlterUserScramCredentialsResult(user=u, error_code=code, error_message=message)
            for u in users
        ]
    )


_BUILDERS: dict[int, Builder] = {
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.ALTER_CONFIGS: _resources(AlterConfigsResponse, AlterConfigsResourceResponse),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _resources(
        IncrementalAlterConfigsResponse, IncrementalResourceResponse
    ),
    ApiKey.ELECT_LEADERS: _elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _per_partition(
        AlterPartitionReassignmentsResponse,
        ReassignableTopicResponse,
        ReassignablePartitionResponse,
        "responses",
        top_level=True,
    ),
    ApiKey.OFFSET_COMMIT: _per_partition(
        OffsetCommitResponse,
        OffsetCommitResponseTopic,
        OffsetCommitResponsePartition,
        "topics",
        top_level=False,
    ),
    ApiKey.CREATE_ACLS: _create_acls,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: _describe_share_group_offsets,
    ApiKey.DELETE_ACLS: _delete_acls,
    ApiKey.ALTER_CLIENT_QUOTAS: _alter_client_quotas,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _alter_scram_credentials,
}


def error_response(api_key: int, request: Any, code: ErrorCode, message: str | None) -> Any:
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
