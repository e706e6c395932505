"""Describe any Kafka-protocol cluster: brokers (fenced or not), the controller quorum
(DescribeQuorum: leader, epoch, voters and their lag) and every partition's leader,
replicas and ISR."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from moldau.protocol.client import NetworkClient
from moldau.protocol.messages.describe_cluster_request import DescribeClusterRequest
from moldau.protocol.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from moldau.protocol.messages.metadata_request import MetadataRequest
from moldau.security.client import ClientSecurity


def servers(bootstrap: str) -> Iterator[tuple[str, int]]:
    for server in filter(None, (s.strip() for s in bootstrap.split(","))):
        host, _, port = server.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bad server address {server!r} (HOST:PORT)")
        yield host, int(port)


async def describe_cluster(
    bootstrap: str, timeout_ms: int = 10_000, security: ClientSecurity | None = None
) -> dict[str, Any]:
    """Brokers, quorum and partitions as a dict, from the first of the comma-separated
    ``bootstrap`` servers that answers (over TLS/SASL with ``security``)."""
    error: Exception = ConnectionError(f"no server in {bootstrap!r}")
    for address in servers(bootstrap):
        try:
            return await _describe(address, timeout_ms, security)
        except (ConnectionError, TimeoutError, OSError) as e:
            error = e
    raise error


async def _describe(
    address: tuple[str, int], timeout_ms: int, security: ClientSecurity | None
) -> dict[str, Any]:
    client = NetworkClient(
        "moldau-cluster-describe", request_timeout_ms=timeout_ms, security=security
    )
    try:
        cluster = await client.send(address, DescribeClusterRequest(include_fenced_brokers=True), 2)
        metadata = await client.send(address, MetadataRequest(topics=None), 12)
        quorum = await client.send(
            address,
            DescribeQuorumRequest(
                topics=[
                    TopicData(
                        topic_name="__cluster_metadata",
                        partitions=[PartitionData(partition_index=0)],
                    )
                ]
            ),
            1,
        )
    finally:
        client.close()
    result: dict[str, Any] = {
        "cluster_id": cluster.cluster_id,
        "brokers": [
            {
                "id": b.broker_id,
                "endpoint": f"{b.host}:{b.port}",
                "rack": b.rack,
                "fenced": b.is_fenced,
            }
            for b in sorted(cluster.brokers, key=lambda b: b.broker_id)
        ],
        "topics": {
            t.name: [
                {
                    "partition": p.partition_index,
                    "leader": p.leader_id,
                    "replicas": list(p.replica_nodes),
                    "isr": list(p.isr_nodes),
                    "offline": list(p.offline_replicas),
                }
                for p in sorted(t.partitions, key=lambda p: p.partition_index)
            ]
            for t in sorted(metadata.topics, key=lambda t: t.name or "")
        },
    }
    if quorum.error_code == 0 and quorum.topics:
        q = quorum.topics[0].partitions[0]
        result["quorum"] = {
            "leader": q.leader_id,
            "epoch": q.leader_epoch,
            "high_watermark": q.high_watermark,
            "voters": [_replica(r, q.high_watermark) for r in q.current_voters],
            "observers": [_replica(r, q.high_watermark) for r in q.observers],
        }
    else:
        result["quorum"] = {"error": quorum.error_code}
    return result


def _replica(r: Any, high_watermark: int) -> dict[str, int]:
    return {
        "id": r.replica_id,
        "log_end_offset": r.log_end_offset,
        "lag": max(0, high_watermark - r.log_end_offset),
    }
