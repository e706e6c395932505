"""Produce: hand each partition's batches to the replica manager, answer with offsets.

The records stay in the request frame's buffer: the replica manager validates them by
header and CRC, stamps them in place and appends them whole. acks=0 gets no response;
acks=1 is answered after the leader's append; acks=all once the high watermark passes
the batch (every in-sync replica has it), as a :class:`Pending` response: the connection
handles its next requests while this one waits for the followers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.produce_request import ProduceRequest
from moldau.protocol.messages.produce_response import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from moldau.records.batch import ATTRIBUTES_OFFSET, MAGIC_OFFSET, TRANSACTIONAL_FLAG
from moldau.replication.replica_manager import AppendResult
from moldau.security.acl import AclOperation, ResourceType
from moldau.security.quotas import PRODUCE
from moldau.server.auto_create import auto_create_topics
from moldau.server.request_context import Pending

if TYPE_CHECKING:
    from moldau.replication.replica_manager import ReplicaManager
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

# Advertised and parsed from v0 so librdkafka keeps compression on, but only v3+ (record
# batches v2) is served: v0-2 get UNSUPPORTED_VERSION, as Kafka 4 answers them.
API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.PRODUCE, 0, 10
FIRST_SERVED_VERSION = 3
ZSTD_MIN_VERSION = 7  # KIP-110


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


_UNAUTHORIZED = AppendResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def _transactional(records: bytes | bytearray | memoryview | None) -> bool:
    """Whether a partition's (first) batch is transactional, from its header alone."""
    return (
        records is not None
        and len(records) > ATTRIBUTES_OFFSET + 1
        and records[MAGIC_OFFSET] == 2
        and bool(records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_FLAG)
    )


# No leader hint (KIP-951's currentLeader, v10+): the encoder only reads it, so every
# partition of every response shares one instead of allocating its own.
_NO_LEADER_HINT = LeaderIdAndEpoch()


def _response(index: int, r: AppendResult) -> PartitionProduceResponse:
    error = r.error
    return PartitionProduceResponse(
        index,
        error,
        r.base_offset,
        r.log_append_time,
        r.log_start_offset,
        [BatchIndexAndErrorMessage(i, m) for i, m in r.record_errors] if error else [],
        r.message if error else None,
        _NO_LEADER_HINT,
    )


async def handle(
    services: Services, ctx: RequestContext, request: ProduceRequest
) -> ProduceResponse | Pending | None:
    if ctx.api_version < FIRST_SERVED_VERSION:
        return refuse(request, ErrorCode.UNSUPPORTED_VERSION)
    if request.acks not in (-1, 0, 1):
        return refuse(request, ErrorCode.INVALID_REQUIRED_ACKS)
    topic_data = request.topic_data or []
    access = services.authorizer
    if any(_transactional(p.records) for t in topic_data for p in t.partition_data or []) and not (
        request.transactional_id is not None
        and access.allowed(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
        )
    ):
        return refuse(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable = access.allowed_names(
        ctx, AclOperation.WRITE, ResourceType.TOPIC, (t.name or "" for t in topic_data)
    )
    ctx.throttle_ms = services.quotas.record_request(
        PRODUCE, ctx, ctx.size, services.clock.now_ms()
    )
    await auto_create_topics(services, access.creatable(ctx, writable))
    entries = {
        (t.name or "", p.index): p.records or bytearray()
        for t in topic_data
        if t.name in writable
        for p in t.partition_data or []
    }
    validation = services.schema_validation
    refused = await validation.refusals(entries) if validation else {}
    for tp in refused:
        del entries[tp]
    replica_manager = services.replica_manager
    results = await replica_manager.append_records(
        entries,
        required_acks=request.acks,
        allow_zstd=ctx.api_version >= ZSTD_MIN_VERSION,
        transactional_id=request.transactional_id,
    )
    results.update(refused)
    if request.acks == 0:
        return None
    if request.acks == -1:
        if ctx.throttle_ms:
            # Over its quota: answered in turn, then muted, as Kafka does; a pending answer
            # would let the next requests in before the mute, and the client's own backoff
            # (KIP-219) and the mute would add up instead of overlapping.
            return await _replicated(replica_manager, request, results)
        return Pending(
            replica_manager.replicated(results, request.timeout_ms),
            lambda: _produce_response(request, results),
        )
    return _produce_response(request, results)


async def _replicated(
    replica_manager: ReplicaManager,
    request: ProduceRequest,
    results: dict[tuple[str, int], AppendResult],
) -> ProduceResponse:
    """acks=all: answered once every in-sync replica has the batches (or the timeout)."""
    await replica_manager.await_replication(results, request.timeout_ms)
    return _produce_response(request, results)


def _produce_response(
    request: ProduceRequest, results: dict[tuple[str, int], AppendResult]
) -> ProduceResponse:
    topic_data = request.topic_data or []
    return ProduceResponse(
        responses=[
            TopicProduceResponse(
                name=t.name,
                partition_responses=[
                    _response(p.index, results.get((t.name or "", p.index), _UNAUTHORIZED))
                    for p in t.partition_data or []
                ],
            )
            for t in topic_data
        ]
    )
