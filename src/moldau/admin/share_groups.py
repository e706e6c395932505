"""Share groups (KIP-932) for `moldau groups` and the console, over Moldau's own protocol
client: librdkafka's admin API has no ListGroups type filter for them, no
ShareGroupDescribe and no DescribeShareGroupOffsets. Groups are listed by every broker
(each lists those it coordinates); a group is described by its coordinator (found with
FindCoordinator)."""

from __future__ import annotations

import asyncio
import logging
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

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_MS = 30_000
COORDINATOR_ATTEMPTS, RETRY_BACKOFF_S = 20, 0.25  # a coordinator loading: up to ~5 s
_MOVING = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)


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
        try:
            listing = await _to(
                security, (broker.host, broker.port), ListGroupsRequest(types_filter=["share"]), 5
            )
        except (ConnectionError, TimeoutError, OSError) as e:  # the others still answer
            log.warning("share groups of broker %d: %s", broker.node_id, e or type(e).__name__)
            continue
        states.update((g.group_id, g.group_state) for g in listing.groups)
    return states


async def _share_group_coordinator(
    servers: list[Address], security: ClientSecurity, group: str
) -> tuple[int, Address] | None:
    """The group's coordinator (id, address), waiting out one that is still loading; None
    if none answers in time (the caller then treats the group as no share group)."""
    find = FindCoordinatorRequest(coordinator_keys=[group])
    for _ in range(COORDINATOR_ATTEMPTS):
        [found] = (await _to_any(servers, security, find, 4)).coordinators
        if not found.error_code:
            return found.node_id, (found.host, found.port)
        await asyncio.sleep(RETRY_BACKOFF_S)
    return None


async def describe_share_group(
    servers: list[Address], security: ClientSecurity, group: str
) -> ShareGroupView | None:
    """The share group's members and share-partition offsets; None if it is no share group."""
    for _ in range(COORDINATOR_ATTEMPTS):
        found = await _share_group_coordinator(servers, security, group)
        if found is None:
            return None
        node_id, coordinator = found
        [described] = (
            await _to(security, coordinator, ShareGroupDescribeRequest(group_ids=[group]), 1)
        ).groups
        if described.error_code not in _MOVING:
            break
        await asyncio.sleep(RETRY_BACKOFF_S)
    if described.error_code in (ErrorCode.GROUP_ID_NOT_FOUND, *_MOVING):
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
        coordinator=node_id,
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
