"""Authorization of the admin requests brokers forward to the controller.

What Kafka's ControllerApis checks before deciding, done by the forwarding broker (it
has the same ACLs in its image): the parts of a request the principal may not touch are
taken out and answered with the authorization error, the rest is forwarded, and the
answers are merged. Requests needing a cluster permission are refused whole.

=====================================  ==============================================
DeleteTopics                           DELETE on the cluster, or DELETE on each topic
                                       (a topic named by id and not DESCRIBE-able is
                                       answered without its name)
CreatePartitions                       ALTER on each topic
AlterConfigs, IncrementalAlterConfigs  ALTER_CONFIGS on the topic, on the cluster for
                                       brokers and broker loggers, on the group
ElectLeaders, AlterPartitionReassign.  ALTER on the cluster
ListPartitionReassignments             DESCRIBE on the cluster
DescribeQuorum                         DESCRIBE on the cluster
CreateAcls, DeleteAcls                 ALTER on the cluster (SECURITY_DISABLED without
                                       an authorizer)
AlterUserScramCredentials              ALTER on the cluster
AlterClientQuotas                      ALTER_CONFIGS on the cluster
=====================================  ==============================================
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.error_responses import error_response
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.alter_configs_response import (
    AlterConfigsResourceResponse as AlterConfigsResult,
)
from moldau.protocol.messages.create_partitions_response import CreatePartitionsTopicResult
from moldau.protocol.messages.delete_topics_response import DeletableTopicResult
from moldau.protocol.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse as IncrementalAlterConfigsResult,
)
from moldau.security.access import Caller
from moldau.security.acl import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.metadata.image import MetadataImage
    from moldau.security.access import Access


class Context(Caller, Protocol):
    """The request being forwarded (the server's RequestContext)."""

    @property
    def api_key(self) -> int: ...

    @property
    def api_version(self) -> int: ...


Send = Callable[[Any], Awaitable[Any]]
DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED

TOPIC_CONFIG, BROKER_CONFIG, BROKER_LOGGER_CONFIG, GROUP_CONFIG = 2, 4, 8, 32
_CONFIG_RESOURCES = {
    TOPIC_CONFIG: (ResourceType.TOPIC, DENIED),
    BROKER_CONFIG: (ResourceType.CLUSTER, CLUSTER_DENIED),
    BROKER_LOGGER_CONFIG: (ResourceType.CLUSTER, CLUSTER_DENIED),
    GROUP_CONFIG: (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),
}


#: Requests that need a permission on the cluster: refused whole without it.
_CLUSTER_PERMISSION: dict[int, AclOperation] = {
    ApiKey.ELECT_LEADERS: AclOperation.ALTER,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: AclOperation.ALTER,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: AclOperation.DESCRIBE,
    ApiKey.DESCRIBE_QUORUM: AclOperation.DESCRIBE,
    ApiKey.UPDATE_FEATURES: AclOperation.ALTER,
    ApiKey.CREATE_ACLS: AclOperation.ALTER,
    ApiKey.DELETE_ACLS: AclOperation.ALTER,
    ApiKey.ALTER_CLIENT_QUOTAS: AclOperation.ALTER_CONFIGS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: AclOperation.ALTER,
}
#: ACL changes need an authorizer to mean anything: Kafka refuses them without one.
_NEED_AUTHORIZER = (ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS)


async def forward(
    access: Access, image: MetadataImage, ctx: Context, request: Any, send: Send
) -> Any:
    """``send(request)`` with what the principal may not do taken out and answered."""
    if not access.enabled:
        if ctx.api_key in _NEED_AUTHORIZER:
            message = "No Authorizer is configured."
            return error_response(ctx.api_key, request, ErrorCode.SECURITY_DISABLED, message)
        return await send(request)
    if ctx.api_key in _CLUSTER_PERMISSION:
        if access.cluster(ctx, _CLUSTER_PERMISSION[ctx.api_key]):
            return await send(request)
        return error_response(ctx.api_key, request, CLUSTER_DENIED, None)
    if ctx.api_key == ApiKey.DELETE_TOPICS:
        return await _delete_topics(access, image, ctx, request, send)
    if ctx.api_key == ApiKey.CREATE_PARTITIONS:
        return await _create_partitions(access, ctx, request, send)
    if ctx.api_key in (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        return await _alter_configs(access, ctx, request, send)
    return await send(request)


async def _delete_topics(
    access: Access, image: MetadataImage, ctx: Context, request: Any, send: Send
) -> Any:
    if access.cluster(ctx, AclOperation.DELETE, log_denied=False):
        return await send(request)
    refused = []
    if ctx.api_version >= 6:
        kept = []
        for t in request.topics or []:
            name = t.name if t.name is not None else image.topics_by_id.get(t.topic_id)
            if name is None or access.allowed(ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
                kept.append(t)  # unknown ids are the controller's to answer
                continue
            shown = t.name is not None or access.allowed(
                ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_denied=False
            )
            refused.append(
                DeletableTopicResult(
                    name=name if shown else None, topic_id=t.topic_id, error_code=DENIED
                )
            )
        request.topics = kept
    else:
        names = request.topic_names or []
        allowed = access.allowed_names(ctx, AclOperation.DELETE, ResourceType.TOPIC, names)
        refused = [
            DeletableTopicResult(name=n, error_code=DENIED) for n in names if n not in allowed
        ]
        request.topic_names = [n for n in names if n in allowed]
    response = await send(request)
    response.responses = (response.responses or []) + refused
    return response


async def _create_partitions(access: Access, ctx: Context, request: Any, send: Send) -> Any:
    topics = request.topics or []
    counts = Counter(t.name for t in topics)  # duplicates are the controller's to refuse
    allowed = access.allowed_names(
        ctx, AclOperation.ALTER, ResourceType.TOPIC, (t.name for t in topics)
    )
    refused = [
        CreatePartitionsTopicResult(
            name=t.name, error_code=DENIED, error_message="The topic authorization is failed."
        )
        for t in topics
        if t.name not in allowed and counts[t.name] == 1
    ]
    request.topics = [t for t in topics if t.name in allowed or counts[t.name] > 1]
    response = await send(request)
    response.results = (response.results or []) + refused
    return response


async def _alter_configs(access: Access, ctx: Context, request: Any, send: Send) -> Any:
    result_cls = (
        AlterConfigsResult if ctx.api_key == ApiKey.ALTER_CONFIGS else IncrementalAlterConfigsResult
    )
    kept, refused = [], []
    for r in request.resources or []:
        error = _config_refusal(access, ctx, r.resource_type, r.resource_name or "")
        if error is None:
            kept.append(r)
        else:
            refused.append(
                result_cls(
                    error_code=error, resource_type=r.resource_type, resource_name=r.resource_name
                )
            )
    request.resources = kept
    response = await send(request)
    response.responses = (response.responses or []) + refused
    return response


def _config_refusal(
    access: Access, ctx: Context, resource_type: int, name: str
) -> ErrorCode | None:
    if resource_type not in _CONFIG_RESOURCES:
        return None  # an unknown type is the controller's to refuse
    resource, error = _CONFIG_RESOURCES[resource_type]
    target = CLUSTER_NAME if resource == ResourceType.CLUSTER else name
    if access.allowed(ctx, AclOperation.ALTER_CONFIGS, resource, target):
        return None
    return error
