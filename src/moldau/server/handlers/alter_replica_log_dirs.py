"""AlterReplicaLogDirs: move replicas on this broker to another of its log dirs
(``kafka-reassign-partitions`` with ``log_dirs``, ``Admin.alterReplicaLogDirs``).

The move runs in the background (a future log catches up, then is swapped in); the
answer only says it was accepted. A replica not hosted yet is created in the asked dir
later and answers REPLICA_NOT_AVAILABLE meanwhile, which tools retry, as with Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.alter_replica_log_dirs_request import AlterReplicaLogDirsRequest
from moldau.protocol.messages.alter_replica_log_dirs_response import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)
from moldau.security.acl import AclOperation

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.ALTER_REPLICA_LOG_DIRS, 0, 2


def alter(services: Services, path: str, topic: str, partition: int) -> ErrorCode:
    log_manager = services.replica_manager.log_manager
    try:
        log_manager.alter_log_dir(topic, partition, log_manager.log_dir(path))
    except KafkaError as e:
        return e.code
    return ErrorCode.NONE


async def handle(
    services: Services, ctx: RequestContext, request: AlterReplicaLogDirsRequest
) -> AlterReplicaLogDirsResponse:
    allowed = services.authorizer.cluster(ctx, AclOperation.ALTER)
    results: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
    for d in request.dirs:
        for t in d.topics:
            for p in t.partitions:
                code = (
                    alter(services, d.path, t.name, p)
                    if allowed
                    else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                )
                results.setdefault(t.name, []).append(
                    AlterReplicaLogDirPartitionResult(partition_index=p, error_code=code)
                )
    return AlterReplicaLogDirsResponse(
        results=[
            AlterReplicaLogDirTopicResult(topic_name=name, partitions=parts)
            for name, parts in results.items()
        ]
    )
