"""Partition sizes of any Kafka-protocol cluster from DescribeLogDirs, asked of every
broker (what ``kafka-log-dirs --describe`` and UIs show): a partition's size is its
largest current replica (a lagging follower holds less; future replicas being moved
between dirs are not counted)."""

from __future__ import annotations

import asyncio

from moldau.admin.cluster import servers
from moldau.protocol.client import NetworkClient
from moldau.protocol.messages.describe_cluster_request import DescribeClusterRequest
from moldau.protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest

DESCRIBE_LOG_DIRS_VERSION = 1  # what every broker since Kafka 2.0 answers


async def partition_sizes(bootstrap: str, timeout_ms: int = 10_000) -> dict[tuple[str, int], int]:
    """(topic, partition) -> bytes, from every broker's online log dirs."""
    client = NetworkClient("moldau-log-dirs", request_timeout_ms=timeout_ms)
    try:
        first = next(servers(bootstrap))
        cluster = await client.send(first, DescribeClusterRequest(), 0)
        brokers = [(b.host, b.port) for b in cluster.brokers]
        answers = await asyncio.gather(
            *(
                client.send(b, DescribeLogDirsRequest(topics=None), DESCRIBE_LOG_DIRS_VERSION)
                for b in brokers
            ),
            return_exceptions=True,
        )
    finally:
        client.close()
    sizes: dict[tuple[str, int], int] = {}
    for answer in answers:
        if isinstance(answer, BaseException):
            continue  # a broker down: the others still tell
        for result in answer.results:
            if result.error_code != 0:
                continue
            for topic in result.topics:
                for p in topic.partitions:
                    if not p.is_future_key:
                        key = (topic.name, p.partition_index)
                        sizes[key] = max(sizes.get(key, 0), p.partition_size)
    return sizes
