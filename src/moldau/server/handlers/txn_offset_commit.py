"""TxnOffsetCommit: a transactional producer's consumed offsets, written to
``__consumer_offsets`` in its transaction and visible only once it commits."""

from __future__ import annotations

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

if TYPE_CHECKING:
    from moldau.server.dispatch import RequestContext
    from moldau.server.services import Services

API_KEY = ApiKey.TXN_OFFSET_COMMIT
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(
    services: Services, ctx: RequestContext, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    image = services.image
    offsets, unknown = [], set()
    for t in request.topics or []:
        for p in t.partitions or []:
            tp = (t.name or "", p.partition_index)
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
    return TxnOffsetCommitResponse(
        topics=[
            TxnOffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        if (t.name, p.partition_index) in unknown
                        else errors.get((t.name or "", p.partition_index), ErrorCode.NONE),
                    )
                    for p in t.partitions or []
                ],
            )
            for t in request.topics or []
        ]
    )
