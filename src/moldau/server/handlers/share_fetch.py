"""ShareFetch (KIP-932): acknowledge what the member sends, then acquire records for it
from the share-partitions of its share session and answer them with their
AcquiredRecords ranges, long-polled until some are acquired or ``MaxWaitMs`` passes.

Records stay bytes: the log is read from the share-partition's fetch offset (the first
AVAILABLE record, else its end), whole batches as Fetch reads them, and acquisition
works on the offset range read; the client keeps only the acquired offsets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from moldau.coordinator.share.partition import AcknowledgeType, Acquired, SharePartition
from moldau.coordinator.share.service import wake_key
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.share_fetch_request import ShareFetchRequest
from moldau.protocol.messages.share_fetch_response import (
    AcquiredRecords,
    LeaderIdAndEpoch,
    PartitionData,
    ShareFetchableTopicResponse,
    ShareFetchResponse,
)
from moldau.records.batch import BATCH_HEADER_SIZE, read_batch_header
from moldau.replication.replica_manager import FetchParams, FetchRequestPartition
from moldau.security.acl import AclOperation, ResourceType
from moldau.server.handlers.fetch import records_payload
from moldau.server.handlers.share_acknowledge import acknowledge, count_requests, group_error
from moldau.server.share_session import CLOSE_EPOCH, OPEN_EPOCH
from moldau.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.SHARE_FETCH, 1, 1
DEFAULT_MAX_RECORDS = 500  # a client that sends no MaxRecords (the Java client's default)


@dataclass(slots=True)
class _Answer:
    """What one partition of the response carries."""

    topic_id: bytes
    data: PartitionData
    acquired: list[Acquired] = field(default_factory=list)


async def handle(
    services: Services, ctx: RequestContext, request: ShareFetchRequest
) -> ShareFetchResponse:
    group_id, member_id = request.group_id or "", request.member_id or ""
    error, message = group_error(services, ctx, group_id, member_id)
    if error:
        return ShareFetchResponse(error_code=error, error_message=message)
    listed = [(t.topic_id, p) for t in request.topics or [] for p in t.partitions or []]
    epoch = request.share_session_epoch
    forgotten = [
        (t.topic_id, p) for t in request.forgotten_topics_data or [] for p in t.partitions or []
    ]
    error, session = services.share_sessions.update(
        group_id, member_id, epoch, [(tid, p.partition_index) for tid, p in listed], forgotten
    )
    if error or session is None:
        return ShareFetchResponse(error_code=error)
    answers: dict[tuple[bytes, int], _Answer] = {}
    for topic_id, p in listed:
        if p.acknowledgement_batches:
            answer = _answer(answers, topic_id, p.partition_index)
            answer.data.acknowledge_error_code = await acknowledge(
                services,
                ctx,
                group_id,
                member_id,
                topic_id,
                p.partition_index,
                p.acknowledgement_batches,
            )
    acknowledged = [(key, answer.data.acknowledge_error_code) for key, answer in answers.items()]
    if acknowledged:
        count_requests(services, True, ((topic_id, e) for (topic_id, _), e in acknowledged))
    shares = services.shares
    if epoch == CLOSE_EPOCH:
        shares.release_member(group_id, member_id)
    else:
        full = epoch == OPEN_EPOCH
        await _acquire(
            services, ctx, request, group_id, member_id, list(session.partitions), answers, full
        )
        count_requests(
            services,
            False,
            (
                (tp[0], answers[tp].data.error_code if tp in answers else 0)
                for tp in session.partitions
            ),
        )
    return ShareFetchResponse(
        acquisition_lock_timeout_ms=shares.limits(group_id).record_lock_duration_ms,
        responses=_responses(answers),
    )


def _answer(answers: dict[tuple[bytes, int], _Answer], topic_id: bytes, partition: int) -> _Answer:
    key = (topic_id, partition)
    answer = answers.get(key)
    if answer is None:
        answer = answers[key] = _Answer(
            topic_id, PartitionData(partition_index=partition, records=b"")
        )
    return answer


async def _acquire(
    services: Services,
    ctx: RequestContext,
    request: ShareFetchRequest,
    group_id: str,
    member_id: str,
    partitions: list[tuple[bytes, int]],
    answers: dict[tuple[bytes, int], _Answer],
    full: bool,
) -> None:
    """Acquire records from the session's partitions, waiting for some up to MaxWaitMs."""
    image = services.image
    rm = services.replica_manager
    clock = services.clock
    readable: list[tuple[bytes, str, int]] = []
    for topic_id, partition in partitions:
        topic = image.topics_by_id.get(topic_id)
        error = ErrorCode.NONE
        if topic is None:
            error = ErrorCode.UNKNOWN_TOPIC_ID
        elif not services.authorizer.allowed(ctx, AclOperation.READ, ResourceType.TOPIC, topic):
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        else:
            readable.append((topic_id, topic, partition))
        if error or full:
            _answer(answers, topic_id, partition).data.error_code = error
    if full:  # a new session: offsets altered while the group was empty are read again
        services.shares.refresh(group_id, [(topic, p) for _, topic, p in readable])
    max_records = request.max_records if request.max_records > 0 else DEFAULT_MAX_RECORDS
    max_bytes = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    deadline = clock.now_ms() + max(request.max_wait_ms, 0)
    while True:
        budget, room = max_records, max_bytes
        for topic_id, topic, partition in readable:
            if budget <= 0 or room <= 0:
                break
            answer = answers.get((topic_id, partition))
            if answer is not None and (answer.acquired or answer.data.error_code):
                continue
            error, taken, size = await _acquire_one(
                services, group_id, member_id, topic_id, topic, partition, budget, room, answers
            )
            if error:
                _answer(answers, topic_id, partition).data.error_code = error
            budget -= sum(a.last_offset - a.first_offset + 1 for a in taken)
            room -= size
        if budget < max_records or any(a.data.error_code for a in answers.values()):
            return
        keys: list[Hashable] = [("hw", (topic, p)) for _, topic, p in readable]
        keys += [wake_key(group_id, topic, p) for _, topic, p in readable]
        if not readable or not await rm.purgatory.wait(keys, deadline):
            return


async def _acquire_one(
    services: Services,
    group_id: str,
    member_id: str,
    topic_id: bytes,
    topic: str,
    partition: int,
    max_records: int,
    max_bytes: int,
    answers: dict[tuple[bytes, int], _Answer],
) -> tuple[ErrorCode, list[Acquired], int]:
    """Read from one share-partition's fetch offset and acquire what was read."""
    rm = services.replica_manager
    tp = (topic, partition)
    leader = rm.partition(tp)
    replica_log = rm.local_log(tp)
    if leader is None or replica_log is None or not leader.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, [], 0
    error, sp = await services.shares.share_partition(
        group_id,
        topic,
        partition,
        replica_log.log_start_offset,
        leader.high_watermark,
        topic_id,
        leader.leader_epoch,
    )
    if sp is None:
        return error, [], 0
    committed = services.shares.read_committed(group_id)
    while True:
        if sp.fetch_offset() < replica_log.log_start_offset:
            # the records were deleted meanwhile
            services.shares.reset((group_id, topic, partition), replica_log.log_start_offset)
        offset = sp.fetch_offset()
        hw = leader.high_watermark
        if offset >= (replica_log.last_stable_offset(hw) if committed else hw):
            return ErrorCode.NONE, [], 0
        [result] = await rm.fetch_messages(
            FetchParams(max_bytes=max_bytes, isolation_level=int(committed)),
            [FetchRequestPartition(topic, partition, offset, max_bytes)],
        )
        if result.error:
            return ErrorCode(result.error), [], 0
        if result.records is None or not result.records.size:
            return ErrorCode.NONE, [], 0
        taken = sp.acquire(
            member_id, result.records.next_offset - 1, max_records, services.clock.now_ms()
        )
        if taken and result.aborted:
            data = await asyncio.to_thread(result.records.to_bytes)  # a file read
            taken = _archive_aborted(sp, member_id, taken, _aborted_batches(data, result.aborted))
            services.shares.persist_later((group_id, topic, partition))
            if not taken:
                continue  # all of it aborted: read on past it
        break
    if taken:
        answer = _answer(answers, topic_id, partition)
        answer.acquired = taken
        answer.data.records = records_payload(result.records)
        answer.data.acquired_records = [
            AcquiredRecords(a.first_offset, a.last_offset, a.delivery_count) for a in taken
        ]
        answer.data.current_leader = LeaderIdAndEpoch(services.node_id, leader.leader_epoch)
    return ErrorCode.NONE, taken, result.size if taken else 0


def _aborted_batches(records: bytes, aborted: list[AbortedTxn]) -> list[tuple[int, int]]:
    """Offset ranges of the batches read that belong to aborted transactions (Kafka's
    SharePartition.filterAbortedTransactionalAcquiredRecords): a producer's transactional
    batches from its aborted transaction's first offset up to its abort marker. Only
    batch headers are read, and only when an aborted transaction overlaps the read."""
    pending = sorted(aborted, key=lambda t: t.first_offset)
    data = memoryview(records)
    aborting: set[int] = set()
    ranges: list[tuple[int, int]] = []
    pos = 0
    while pos + BATCH_HEADER_SIZE <= len(data):
        batch = read_batch_header(data, pos)
        pos = batch.end_position
        while pending and pending[0].first_offset <= batch.last_offset:
            aborting.add(pending.pop(0).producer_id)
        if batch.producer_id not in aborting or not batch.is_transactional:
            continue
        if batch.is_control:
            aborting.discard(batch.producer_id)  # the abort marker ends the transaction
        else:
            ranges.append((batch.base_offset, batch.last_offset))
    return ranges


def _archive_aborted(
    sp: SharePartition, member_id: str, taken: list[Acquired], aborted: list[tuple[int, int]]
) -> list[Acquired]:
    """Archive the acquired records of aborted transactions (acknowledged as gaps: they are
    no records to a read_committed consumer) and hand out only the rest."""
    kept: list[Acquired] = []
    for a in taken:
        start = a.first_offset
        for first, last in aborted:
            first, last = max(first, start), min(last, a.last_offset)
            if first > last:
                continue
            if first > start:
                kept.append(Acquired(start, first - 1, a.delivery_count))
            sp.acknowledge(member_id, first, last, [AcknowledgeType.GAP])
            start = last + 1
        if start <= a.last_offset:
            kept.append(Acquired(start, a.last_offset, a.delivery_count))
    return kept


def _responses(answers: dict[tuple[bytes, int], _Answer]) -> list[ShareFetchableTopicResponse]:
    topics: dict[bytes, ShareFetchableTopicResponse] = {}
    for answer in answers.values():
        topic = topics.setdefault(
            answer.topic_id, ShareFetchableTopicResponse(topic_id=answer.topic_id)
        )
        topic.partitions.append(answer.data)
    return list(topics.values())
