"""TxnOffsetCommit: a transactional producer's consumed offsets, written to
``__consumer_offsets`` in its transaction and visible only once it commits."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from moldau.coordinator.group.results import OffsetCommit
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.txn_offset_commit_request import TxnOffsetCommitRequest
from moldau.protocol.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.TXN_OFFSET_COMMIT, 0, 4


async def handle(
    services: Services, ctx: RequestContext, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    access, topics = services.authorizer, request.topics or []
    if not access.allowed(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        return _refuse_all(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not access.allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _refuse_all(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = access.allowed_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name or "" for t in topics)
    )
    image = services.image
    offsets, unknown, refused = [], set(), set()
    for t in topics:
        for p in t.partitions or []:
            tp = (t.name or "", p.partition_index)
            if tp[0] not in readable:
                refused.add(tp)
                continue
            if image.partition(*tp) is None:
                unknown.add(tp)
                continue
            offsets.append(
                OffsetCommit(
                    *tp, p.committed_offset, p.committed_leader_epoch, p.committed_metadata
                )
            )
    errors = await services.groups.txn_commit_offsets(
        request.group_id,
        offsets,
        producer_id=request.producer_id,
        producer_epoch=request.producer_epoch,
        member_id=request.member_id or "",
        generation_id=request.generation_id,
        group_instance_id=request.group_instance_id,
    )
    errors.update(dict.fromkeys(unknown, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    errors.update(dict.fromkeys(refused, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    return _response(request, lambda tp: errors.get(tp, ErrorCode.NONE))


def _refuse_all(request: TxnOffsetCommitRequest, error: ErrorCode) -> TxnOffsetCommitResponse:
    return _response(request, lambda tp: error)


def _response(
    request: TxnOffsetCommitRequest, error_of: Callable[[tuple[str, int]], int]
) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        topics=[
            TxnOffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=error_of((t.name or "", p.partition_index)),
                    )
                    for p in t.partitions or []
                ],
            )
            for t in request.topics or []
        ]
    )
