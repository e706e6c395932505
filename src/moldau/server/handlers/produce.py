"""Produce: validate each partition's batches once, append them whole, answer offsets.

The records stay in the request frame's buffer: batches are validated by header and CRC,
stamped in place and written with one write per segment. acks=0 gets no response;
acks=1 and acks=all answer once the batch is in the log (a single replica is the ISR).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.produce_request import PartitionProduceData, ProduceRequest
from moldau.protocol.messages.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from moldau.records.batch import scan_batches
from moldau.records.compression import Compression

if TYPE_CHECKING:
    from moldau.server.broker import Broker
    from moldau.server.dispatch import RequestContext

log = logging.getLogger(__name__)

API_KEY = ApiKey.PRODUCE
# Advertised and parsed from v0 so librdkafka keeps compression on, but only v3+ (record
# batches v2) is served: v0-2 get UNSUPPORTED_VERSION, as Kafka 4 answers them.
MIN_VERSION = 0
MAX_VERSION = 10
FIRST_SERVED_VERSION = 3
ZSTD_MIN_VERSION = 7  # KIP-110


def append_partition(
    broker: Broker, topic: str, data: PartitionProduceData, version: int
) -> PartitionProduceResponse:
    out = PartitionProduceResponse(index=data.index, base_offset=-1)
    partition_log = broker.get_log(topic, data.index)
    if partition_log is None:
        out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return out
    records = data.records
    if records is None or len(records) == 0:
        out.error_code = ErrorCode.CORRUPT_MESSAGE
        return out
    try:
        infos = scan_batches(records, max_batch_size=partition_log.config.max_message_bytes)
        if version < ZSTD_MIN_VERSION and any(i.compression == Compression.ZSTD for i in infos):
            raise KafkaError(
                "zstd needs produce v7 or later", ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
            )
        result = partition_log.append_as_leader(records, infos, leader_epoch=0)
    except KafkaError as e:
        out.error_code = e.code
        out.error_message = str(e)
        return out
    except OSError as e:
        log.error("append to %s-%d failed: %s", topic, data.index, e)
        out.error_code = ErrorCode.KAFKA_STORAGE_ERROR
        out.error_message = f"append failed: {e.strerror}"
        return out
    broker.high_watermarks[(topic, data.index)] = partition_log.log_end_offset
    broker.purgatory.notify((topic, data.index))
    out.base_offset = result.base_offset
    out.log_append_time_ms = result.log_append_time
    out.log_start_offset = result.log_start_offset
    return out


def refuse(request: ProduceRequest, error: ErrorCode) -> ProduceResponse:
    """The same error for every partition; nothing is appended."""
    return ProduceResponse(
        responses=[
            TopicProduceResponse(
                name=t.name,
                partition_responses=[
                    PartitionProduceResponse(index=p.index, error_code=error, base_offset=-1)
                    for p in t.partition_data or []
                ],
            )
            for t in request.topic_data or []
        ]
    )


async def handle(
    broker: Broker, ctx: RequestContext, request: ProduceRequest
) -> ProduceResponse | None:
    if ctx.api_version < FIRST_SERVED_VERSION:
        return refuse(request, ErrorCode.UNSUPPORTED_VERSION)
    if request.acks not in (-1, 0, 1):
        return refuse(request, ErrorCode.INVALID_REQUIRED_ACKS)
    responses = []
    topic_data = request.topic_data or []
    missing = [t.name for t in topic_data if t.name not in broker.image.topics]
    if missing and broker.config.bool("auto.create.topics.enable"):
        await broker.auto_create_topics(n for n in missing if n is not None)
    for t in topic_data:
        responses.append(
            TopicProduceResponse(
                name=t.name,
                partition_responses=[
                    append_partition(broker, t.name or "", p, ctx.api_version)
                    for p in t.partition_data or []
                ],
            )
        )
    if request.acks == 0:
        return None
    return ProduceResponse(responses=responses)
