"""DeleteRecords: move partitions' log start offsets up (the low watermark)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.delete_records_request import DeleteRecordsRequest
from moldau.protocol.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)

if TYPE_CHECKING:
    from moldau.server.broker import Broker
    from moldau.server.dispatch import RequestContext

API_KEY = ApiKey.DELETE_RECORDS
MIN_VERSION = 0
MAX_VERSION = 2


def delete(broker: Broker, topic: str, partition: int, offset: int) -> DeleteRecordsPartitionResult:
    """``offset`` -1 means the high watermark; the log rejects offsets above it."""
    result = DeleteRecordsPartitionResult(partition_index=partition, low_watermark=-1)
    t = broker.image.topics.get(topic)
    log = broker.get_log(topic, partition)
    if t is None or log is None:
        result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    elif t.is_internal:
        result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
    else:
        try:
            hw = broker.high_watermarks.get((topic, partition), 0)
            result.low_watermark = log.delete_records_before(offset, hw)
        except KafkaError as e:
            result.error_code = e.code
    return result


async def handle(
    broker: Broker, ctx: RequestContext, request: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    topics = [
        DeleteRecordsTopicResult(
            name=t.name,
            partitions=[
                delete(broker, t.name or "", p.partition_index, p.offset)
                for p in t.partitions or []
            ],
        )
        for t in request.topics or []
    ]
    if any(p.error_code == ErrorCode.NONE for t in topics for p in t.partitions or []):
        # Checkpoint the new log start offsets now, so a crash cannot resurrect records
        # the client was told are gone.
        broker.log_manager.checkpoint()
    return DeleteRecordsResponse(topics=topics)
