"""Fetch: file ranges up to the high watermark, long-polled until enough bytes arrive.

No record is read into Python: the response carries the log's file ranges and the network
layer sends them with sendfile. Fetch sessions are declined (session id 0), which KIP-227
allows, so every request is a full fetch.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.fetch_request import FetchPartition, FetchRequest
from moldau.protocol.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from moldau.protocol.primitives import RecordsSpill

if TYPE_CHECKING:
    from moldau.server.broker import Broker
    from moldau.server.dispatch import RequestContext
    from moldau.storage.log import LogReadResult

API_KEY = ApiKey.FETCH
MIN_VERSION = 4
MAX_VERSION = 12
# Results up to this size are copied instead of sent with sendfile: a syscall per few
# hundred bytes costs more than the copy, and a copied result holds no segment file open,
# so a fetch over thousands of partitions stays within the descriptor budget.
INLINE_RECORDS_MAX = 16 * 1024


class FileRecords(RecordsSpill):
    """Records sent straight from segment files (``ranges`` of ``FileRange``)."""

    __slots__ = ("ranges", "_size")

    def __init__(self, result: LogReadResult) -> None:
        self.ranges = result.ranges
        self._size = result.size

    @property
    def size(self) -> int:
        return self._size


def read_partition(
    broker: Broker, topic: str, p: FetchPartition, budget: int, first: bool
) -> PartitionData:
    out = PartitionData(partition_index=p.partition)
    log = broker.get_log(topic, p.partition)
    if log is None:
        out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        out.high_watermark = -1
        return out
    hw = broker.high_watermarks.get((topic, p.partition), 0)
    out.high_watermark = hw
    out.last_stable_offset = hw
    out.log_start_offset = log.log_start_offset
    try:
        result = log.read(
            p.fetch_offset,
            min(p.partition_max_bytes, budget),
            max_offset=hw,
            min_one_batch=first,
        )
    except KafkaError as e:
        out.error_code = e.code
        return out
    out.records = FileRecords(result) if result.size > INLINE_RECORDS_MAX else result.to_bytes()
    return out


def read_all(broker: Broker, request: FetchRequest) -> tuple[list[FetchableTopicResponse], int]:
    budget = request.max_bytes
    total = 0
    responses = []
    for t in request.topics or []:
        parts = []
        for p in t.partitions or []:
            data = read_partition(broker, t.topic or "", p, max(budget - total, 0), total == 0)
            records = data.records
            size = records.size if isinstance(records, FileRecords) else len(records or b"")
            total += size
            parts.append(data)
        responses.append(FetchableTopicResponse(topic=t.topic, partitions=parts))
    return responses, total


async def handle(broker: Broker, ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    responses, total = read_all(broker, request)
    min_bytes = max(request.min_bytes, 1)
    if total < min_bytes and request.max_wait_ms > 0 and not _has_error(responses):
        keys = [(t.topic, p.partition) for t in request.topics or [] for p in t.partitions or []]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.max_wait_ms / 1000
        while total < min_bytes and await broker.purgatory.wait(keys, deadline - loop.time()):
            responses, total = read_all(broker, request)
    return FetchResponse(session_id=0, responses=responses)


def _has_error(responses: list[FetchableTopicResponse]) -> bool:
    return any(p.error_code for t in responses for p in t.partitions or [])
