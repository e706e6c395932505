"""Share groups (KIP-932) for `moldau groups` and the console, over Moldau's own protocol
client: librdkafka's admin API has no ListGroups type filter for them, no
ShareGroupDescribe and no DescribeShareGroupOffsets. Groups are listed by every broker
(each lists those it coordinates); a group is described by its coordinator (found with
FindCoordinator)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from moldau.protocol.client import Address, NetworkClient
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from moldau.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from moldau.protocol.messages.list_groups_request import ListGroupsRequest
from moldau.protocol.messages.metadata_request import MetadataRequest
from moldau.protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from moldau.security.client import ClientSecurity

REQUEST_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class ShareMember:
    member_id: str
    client_id: str
    host: str
    assignment: list[tuple[str, int]]


@dataclass(frozen=True)
class SharePartitionOffsets:
    topic: str
    partition: int
    start_offset: int  # -1: the group has no state for it
    lag: int  # -1: unknown
    error: str | None  # the partition's error, if any


@dataclass(frozen=True)
class ShareGroupView:
    group: str
    state: str
    coordinator: int
    members: list[ShareMember]
    offsets: list[SharePartitionOffsets]


async def _to(security: ClientSecurity, address: Address, message: Any, version: int) -> Any:
    client = NetworkClient("moldau-admin", request_timeout_ms=REQUEST_TIMEOUT_MS, security=security)
    try:
        return await client.send(address, message, version)
    finally:
        client.close()


async def _to_any(
    servers: list[Address], security: ClientSecurity, message: Any, version: int
) -> Any:
    """The answer of the first bootstrap server that answers."""
    error: Exception = ConnectionError("no bootstrap server")
    for address in servers:
        try:
            return await _to(security, address, message, version)
        except (ConnectionError, TimeoutError, OSError) as e:
            error = e
    raise error


async def share_group_states(servers: list[Address], security: ClientSecurity) -> dict[str, str]:
    """Every share group of the cluster and its state (Empty, Stable)."""
    metadata = await _to_any(servers, security, MetadataRequest(topics=[]), 12)
    states: dict[str, str] = {}
    for broker in metadata.brokers:
        listing = await _to(
            security, (broker.host, broker.port), ListGroupsRequest(types_filter=["share"]), 5
        )
        states.update((g.group_id, g.group_state) for g in listing.groups)
    return states


async def describe_share_group(
    servers: list[Address], security: ClientSecurity, group: str
) -> ShareGroupView | None:
    """The share group's members and share-partition offsets; None if it is no share group."""
    find = FindCoordinatorRequest(coordinator_keys=[group])
    [found] = (await _to_any(servers, security, find, 4)).coordinators
    if found.error_code:
        raise ConnectionError(f"no coordinator for {group!r}: {ErrorCode(found.error_code).name}")
    coordinator = (found.host, found.port)
    [described] = (
        await _to(security, coordinator, ShareGroupDescribeRequest(group_ids=[group]), 1)
    ).groups
    if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    if described.error_code:
        raise ConnectionError(f"{ErrorCode(described.error_code).name}: {described.error_message}")
    request = DescribeShareGroupOffsetsRequest(
        groups=[DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]
    )
    [offsets] = (await _to(security, coordinator, request, 1)).groups
    return ShareGroupView(
        group=group,
        state=described.group_state,
        coordinator=found.node_id,
        members=[
            ShareMember(
                m.member_id,
                m.client_id,
                m.client_host,
                [
                    (tp.topic_name, p)
                    for tp in m.assignment.topic_partitions
                    for p in sorted(tp.partitions)
                ],
            )
            for m in described.members
        ],
        offsets=[
            SharePartitionOffsets(
                t.topic_name,
                p.partition_index,
                p.start_offset,
                p.lag,
                f"{ErrorCode(p.error_code).name}: {p.error_message}" if p.error_code else None,
            )
            for t in offsets.topics
            for p in t.partitions
        ],
    )
