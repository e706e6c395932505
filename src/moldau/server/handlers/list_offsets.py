"""ListOffsets: earliest, latest, max timestamp, or the first offset at a timestamp."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsRequest
from moldau.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)

if TYPE_CHECKING:
    from moldau.server.broker import Broker
    from moldau.server.dispatch import RequestContext

API_KEY = ApiKey.LIST_OFFSETS
MIN_VERSION = 1
MAX_VERSION = 7

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3


def lookup(broker: Broker, topic: str, p: ListOffsetsPartition) -> ListOffsetsPartitionResponse:
    out = ListOffsetsPartitionResponse(partition_index=p.partition_index)
    log = broker.get_log(topic, p.partition_index)
    if log is None:
        out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return out
    out.leader_epoch = 0
    hw = broker.high_watermarks.get((topic, p.partition_index), 0)
    if p.timestamp == EARLIEST:
        out.offset = log.log_start_offset
    elif p.timestamp == LATEST:
        out.offset = hw
    elif p.timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_offset()
        if found is not None:
            out.offset, out.timestamp = found
    elif p.timestamp < 0:
        out.error_code = ErrorCode.INVALID_REQUEST
    else:
        found = log.offset_for_timestamp(p.timestamp)
        if found is not None and found[0] < hw:
            out.offset, out.timestamp = found
    return out


async def handle(
    broker: Broker, ctx: RequestContext, request: ListOffsetsRequest
) -> ListOffsetsResponse:
    return ListOffsetsResponse(
        topics=[
            ListOffsetsTopicResponse(
                name=t.name,
                partitions=[lookup(broker, t.name or "", p) for p in t.partitions or []],
            )
            for t in request.topics or []
        ]
    )
