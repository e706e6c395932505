"""DescribeLogDirs: this broker's log dirs, their disk space and the size and lag of
every replica in them (``kafka-log-dirs --describe``, UIs' partition sizes, JBOD moves).

Offset lag as Kafka reports it: a current replica's distance below its high watermark
(0 for the leader), a future replica's distance below the current one it copies.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest
from moldau.protocol.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from moldau.security.acl import AclOperation
from moldau.storage.log_manager import LogDirDescription, ReplicaInDir

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DESCRIBE_LOG_DIRS, 0, 4

INVALID_OFFSET_LAG = -1  # the replica's current log is not here (Kafka's value)


def offset_lag(services: Services, replica: ReplicaInDir) -> int:
    tp = replica.topic_partition
    current = services.replica_manager.local_log(tp)
    if current is None:
        return INVALID_OFFSET_LAG
    if replica.is_future:
        return max(current.log_end_offset - replica.log_end_offset, 0)
    return max(services.replica_manager.high_watermark(tp) - replica.log_end_offset, 0)


def result(
    services: Services, described: LogDirDescription, wanted: dict[str, set[int]] | None
) -> DescribeLogDirsResult:
    if described.error is not None:
        return DescribeLogDirsResult(
            error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=str(described.path.absolute())
        )
    by_topic: dict[str, list[DescribeLogDirsPartition]] = defaultdict(list)
    for replica in described.replicas:
        topic, partition = replica.topic_partition
        if wanted is not None and partition not in wanted.get(topic, ()):
            continue
        by_topic[topic].append(
            DescribeLogDirsPartition(
                partition_index=partition,
                partition_size=replica.size_bytes,
                offset_lag=offset_lag(services, replica),
                is_future_key=replica.is_future,
            )
        )
    return DescribeLogDirsResult(
        error_code=ErrorCode.NONE,
        log_dir=str(described.path.absolute()),
        topics=[
            DescribeLogDirsTopic(name=topic, partitions=sorted(parts, key=_partition_index))
            for topic, parts in sorted(by_topic.items())
        ],
        total_bytes=described.total_bytes,
        usable_bytes=described.usable_bytes,
    )


def _partition_index(p: DescribeLogDirsPartition) -> int:
    return p.partition_index


async def handle(
    services: Services, ctx: RequestContext, request: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    if not services.authorizer.cluster(ctx, AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    wanted = (
        None if request.topics is None else {t.topic: set(t.partitions) for t in request.topics}
    )
    # statvfs per dir: off the event loop.
    dirs = await asyncio.to_thread(services.replica_manager.log_manager.describe_dirs)
    return DescribeLogDirsResponse(results=[result(services, d, wanted) for d in dirs])
