"""EndTxn: commit or abort. Answered once PrepareCommit/PrepareAbort is committed; the
coordinator then writes the markers on its own."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.end_txn_request import EndTxnRequest
from moldau.protocol.messages.end_txn_response import EndTxnResponse
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

# v5 is KIP-890 part 2 (an epoch bump per transaction).
API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.END_TXN, 0, 4
FENCED_ERROR_VERSION = 2  # older clients get INVALID_PRODUCER_EPOCH for PRODUCER_FENCED


async def handle(services: Services, ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    if not services.authorizer.allowed(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        return EndTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    error = await services.transactions.end_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed
    )
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < FENCED_ERROR_VERSION:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return EndTxnResponse(error_code=error)
