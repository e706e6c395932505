"""AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction,
so the offsets a TxnOffsetCommit writes there are committed or aborted with it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from moldau.protocol.messages.add_offsets_to_txn_response import AddOffsetsToTxnResponse
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.ADD_OFFSETS_TO_TXN, 0, 4
FENCED_ERROR_VERSION = 2  # older clients get INVALID_PRODUCER_EPOCH for PRODUCER_FENCED


async def handle(
    services: Services, ctx: RequestContext, request: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    access = services.authorizer
    if not access.allowed(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not access.allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    await services.groups.ensure_topic()
    error = await services.transactions.add_offsets(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
    )
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < FENCED_ERROR_VERSION:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return AddOffsetsToTxnResponse(error_code=error)
