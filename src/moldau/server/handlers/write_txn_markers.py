"""WriteTxnMarkers: a transaction coordinator asks this partition leader to write COMMIT
or ABORT markers (``coordinator/txn/marker_writer.py`` does the work)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.coordinator.txn.marker_writer import Marker
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.write_txn_markers_request import WriteTxnMarkersRequest
from moldau.protocol.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)
from moldau.security.acl import AclOperation

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.WRITE_TXN_MARKERS, 0, 1


async def handle(
    services: Services, ctx: RequestContext, request: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    markers = [
        Marker(
            m.producer_id,
            m.producer_epoch,
            m.transaction_result,
            m.coordinator_epoch,
            tuple((t.name or "", p) for t in m.topics or [] for p in t.partition_indexes or []),
        )
        for m in request.markers or []
    ]
    if services.authorizer.cluster(ctx, AclOperation.CLUSTER_ACTION):  # coordinators only
        written = await services.transactions.write_markers(markers)
    else:
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        written = [dict.fromkeys(m.partitions, refused) for m in markers]
    return WriteTxnMarkersResponse(
        markers=[
            WritableTxnMarkerResult(
                producer_id=m.producer_id,
                topics=[
                    WritableTxnMarkerTopicResult(
                        name=t.name,
                        partitions=[
                            WritableTxnMarkerPartitionResult(
                                partition_index=p, error_code=errors[(t.name or "", p)]
                            )
                            for p in t.partition_indexes or []
                        ],
                    )
                    for t in m.topics or []
                ],
            )
            for m, errors in zip(request.markers or [], written, strict=True)
        ]
    )
