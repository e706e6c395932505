"""The two tiers of a topic's partitions as ListOffsets (v9) tells them: the log start
offset (-2, over both tiers), the local log start offset (-4, KIP-405) and the highest
offset copied to the remote tier (-5, KIP-1005), asked of each partition's leader."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass

from moldau.protocol.client import Address, NetworkClient
from moldau.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)

LIST_OFFSETS_VERSION = 9
EARLIEST, EARLIEST_LOCAL, LATEST_TIERED = -2, -4, -5
REQUEST_TIMEOUT_MS = 30_000


@dataclass(frozen=True, slots=True)
class PartitionTiers:
    log_start_offset: int
    local_log_start_offset: int
    highest_offset_in_remote_storage: int  # -1: nothing copied (or not tiered)


async def partition_tiers(
    topic: str, leaders: dict[int, Address]
) -> dict[int, PartitionTiers | None]:
    """``leaders``: partition -> its leader's address. None for a partition whose leader
    did not answer or answered an error."""
    by_leader: dict[Address, list[int]] = defaultdict(list)
    for partition, address in leaders.items():
        by_leader[address].append(partition)
    found: dict[int, PartitionTiers | None] = dict.fromkeys(leaders)
    client = NetworkClient("moldau-cli", request_timeout_ms=REQUEST_TIMEOUT_MS)
    try:
        answers = await asyncio.gather(
            *(_ask(client, address, topic, parts) for address, parts in by_leader.items()),
            return_exceptions=True,
        )
    finally:
        client.close()
    for answer in answers:
        if isinstance(answer, dict):
            found.update(answer)
    return found


async def _ask(
    client: NetworkClient, address: Address, topic: str, partitions: list[int]
) -> dict[int, PartitionTiers]:
    offsets: dict[int, list[int]] = defaultdict(list)
    for spec in (EARLIEST, EARLIEST_LOCAL, LATEST_TIERED):
        request = ListOffsetsRequest(
            replica_id=-1,
            topics=[
                ListOffsetsTopic(
                    topic, [ListOffsetsPartition(p, timestamp=spec) for p in partitions]
                )
            ],
        )
        response = await client.send(address, request, LIST_OFFSETS_VERSION)
        for t in response.topics:
            for p in t.partitions:
                if p.error_code == 0:
                    offsets[p.partition_index].append(p.offset)
    return {p: PartitionTiers(*values) for p, values in offsets.items() if len(values) == 3}
