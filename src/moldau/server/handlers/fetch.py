"""Fetch: file ranges up to the high watermark (the last stable offset for read_committed,
with the aborted transactions the client must drop), long-polled until enough bytes arrive.

No record is read into Python: the response carries the log's file ranges and the network
layer sends them with sendfile. From v7, incremental fetch sessions (KIP-227) let clients
send and receive only the partitions that changed. A follower's fetch that must wait
answers :class:`Pending` (a purgatory watch, ``ReplicaManager.follower_fetch``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.fetch_request import FetchRequest
from moldau.protocol.messages.fetch_response import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchResponse,
    LeaderIdAndEpoch,
    PartitionData,
    SnapshotId,
)
from moldau.protocol.primitives import RecordsSpill
from moldau.replication.replica_manager import FetchParams, FetchRequestPartition, FetchResult
from moldau.security.acl import AclOperation, ResourceType
from moldau.security.quotas import FETCH
from moldau.server.fetch_session import INVALID_SESSION_ID, FetchContext
from moldau.server.request_context import Pending
from moldau.storage.local_log import LogReadResult

if TYPE_CHECKING:
    from collections.abc import Sequence

    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services
    from moldau.storage.remote.remote_log_reader import RemoteLogReadResult

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.FETCH, 4, 12
SESSIONS_VERSION = 7  # KIP-227
CLIENT_RACK_VERSION = 11  # KIP-392: rack_id, preferred_read_replica, reads from followers
ZSTD_MIN_VERSION = 10  # KIP-110: older consumers cannot decode zstd batches
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


# The tagged fields' defaults, shared rather than three objects built per partition
# answered. Never mutated: a partition that has one of them gets an object of its own.
_NO_DIVERGENCE, _NO_LEADER, _NO_SNAPSHOT = EpochEndOffset(), LeaderIdAndEpoch(), SnapshotId()


def partition_data(index: int, r: FetchResult) -> PartitionData:
    data = PartitionData(
        partition_index=index,
        error_code=r.error,
        high_watermark=r.high_watermark,
        last_stable_offset=r.last_stable_offset,
        log_start_offset=r.log_start_offset,
        records=records_payload(r.records),
        preferred_read_replica=r.preferred_read_replica,
        diverging_epoch=_NO_DIVERGENCE,
        current_leader=_NO_LEADER,
        snapshot_id=_NO_SNAPSHOT,
    )
    if r.diverging_epoch is not None:
        data.diverging_epoch = EpochEndOffset(*r.diverging_epoch)
    if r.aborted:
        data.aborted_transactions = [
            AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
            for t in r.aborted
        ]
    return data


def records_payload(read: LogReadResult | RemoteLogReadResult | None) -> FileRecords | bytes:
    """Never null records: librdkafka 2.0.2 cannot parse them (Kafka writes empty).
    Remote reads are bytes already."""
    if read is None or not read.size:
        return b""
    if isinstance(read, LogReadResult) and read.size > INLINE_RECORDS_MAX:
        return FileRecords(read)
    return read.to_bytes()


def _responses(
    answered: list[tuple[FetchRequestPartition, FetchResult]],
) -> list[FetchableTopicResponse]:
    """Group answered partitions by topic, keeping their order (consecutive runs)."""
    responses: list[FetchableTopicResponse] = []
    for p, result in answered:
        if not responses or responses[-1].topic != p.topic:
            responses.append(FetchableTopicResponse(topic=p.topic, partitions=[]))
        partitions = responses[-1].partitions
        assert partitions is not None
        partitions.append(partition_data(p.partition, result))
    return responses


def _readable(
    services: Services,
    ctx: RequestContext,
    request: FetchRequest,
    partitions: Sequence[FetchRequestPartition],
) -> set[str]:
    """Topics this fetch may read: followers need CLUSTER_ACTION, consumers READ."""
    access = services.authorizer
    if request.replica_id >= 0:
        if access.cluster(ctx, AclOperation.CLUSTER_ACTION):
            return {p.topic for p in partitions}
        return set()
    return access.allowed_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, (p.topic for p in partitions)
    )


async def _read(
    services: Services,
    params: FetchParams,
    partitions: Sequence[FetchRequestPartition],
    readable: set[str],
) -> list[FetchResult]:
    """Fetch what may be read; the rest answers TOPIC_AUTHORIZATION_FAILED."""
    allowed = [p for p in partitions if p.topic in readable]
    results = iter(await services.replica_manager.fetch_messages(params, allowed))
    return [next(results) if p.topic in readable else _UNAUTHORIZED for p in partitions]


_UNAUTHORIZED = FetchResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
_UNSUPPORTED_COMPRESSION = FetchResult(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)


def _refuse_zstd(
    services: Services, partitions: Sequence[FetchRequestPartition], results: list[FetchResult]
) -> list[FetchResult]:
    """A consumer's Fetch below v10 of a topic with ``compression.type=zstd`` answers
    UNSUPPORTED_COMPRESSION_TYPE for it, as Kafka does (it decides by the topic's config,
    without looking into the batches)."""
    logs = services.replica_manager.log_manager
    out = []
    for p, result in zip(partitions, results, strict=True):
        log = logs.get_log(p.topic, p.partition)
        zstd = log is not None and log.config.compression_type == "zstd"
        out.append(_UNSUPPORTED_COMPRESSION if zstd else result)
    return out


async def handle(
    services: Services, ctx: RequestContext, request: FetchRequest
) -> FetchResponse | Pending:
    quotas = services.quotas
    consumer = request.replica_id < 0
    window = (
        quotas.max_in_window(FETCH, ctx.principal.name, ctx.client_id or "") if consumer else None
    )
    params = FetchParams(
        replica_id=request.replica_id,
        max_wait_ms=request.max_wait_ms,
        min_bytes=max(request.min_bytes, 1),
        max_bytes=request.max_bytes if window is None else min(request.max_bytes, int(window)),
        isolation_level=request.isolation_level,
        rack_id=request.rack_id or ""
        if consumer and ctx.api_version >= CLIENT_RACK_VERSION
        else None,
    )
    requested = [
        FetchRequestPartition(
            t.topic or "",
            p.partition,
            p.fetch_offset,
            p.partition_max_bytes,
            current_leader_epoch=p.current_leader_epoch,
            log_start_offset=p.log_start_offset,
            last_fetched_epoch=p.last_fetched_epoch,
        )
        for t in request.topics or []
        for p in t.partitions or []
    ]
    if ctx.api_version >= SESSIONS_VERSION:
        forgotten = [
            (t.topic or "", p)
            for t in request.forgotten_topics_data or []
            for p in t.partitions or []
        ]
        context = services.fetch_sessions.new_context(
            request.session_id, request.session_epoch, requested, forgotten
        )
    else:
        context = FetchContext(INVALID_SESSION_ID, requested)
    if context.error:
        return FetchResponse(error_code=context.error, session_id=INVALID_SESSION_ID)
    readable = _readable(services, ctx, request, context.partitions)
    if not consumer and readable:  # a follower may read all of them or none
        # A follower's long poll is answered right after the append it waits for, with no
        # task parked meanwhile (its position was recorded by the read just done).
        read = services.replica_manager.follower_fetch(params, context.partitions)
        if isinstance(read, list):
            return _answer(services, params, context, read)
        return Pending(read, lambda: _answer(services, params, context, read.result()))
    results = await _read(services, params, context.partitions, readable)
    if consumer and ctx.api_version < ZSTD_MIN_VERSION:
        results = _refuse_zstd(services, context.partitions, results)
    if consumer and window is not None:
        size = sum(r.size for r in results)
        ctx.throttle_ms = quotas.record_request(FETCH, ctx, size, services.clock.now_ms())
        if ctx.throttle_ms:
            # Over the quota: answer nothing now (Kafka's throttled fetch response); the
            # client fetches the same offsets again once its throttle time is over.
            quotas.unrecord(FETCH, ctx.principal.name, ctx.client_id or "", size)
            session_id = INVALID_SESSION_ID if context.full else context.session_id
            return FetchResponse(session_id=session_id, responses=[])
    return _answer(services, params, context, results)


def _answer(
    services: Services, params: FetchParams, context: FetchContext, results: list[FetchResult]
) -> FetchResponse:
    services.replica_manager.topic_stats.fetched(params.from_follower, context.partitions, results)
    return FetchResponse(
        session_id=context.session_id, responses=_responses(context.select(results))
    )
