"""InitProducerId: a fresh producer id for an idempotent producer, or the producer id and
a bumped epoch of a transactional id from its transaction coordinator."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.init_producer_id_request import InitProducerIdRequest
from moldau.protocol.messages.init_producer_id_response import InitProducerIdResponse
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.INIT_PRODUCER_ID, 0, 4
FENCED_ERROR_VERSION = 4  # older clients get INVALID_PRODUCER_EPOCH for PRODUCER_FENCED

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


def _error(code: ErrorCode) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        error_code=code, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH
    )


async def handle(
    services: Services, ctx: RequestContext, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    pid, epoch = request.producer_id, request.producer_epoch
    if request.transactional_id == "":
        return _error(ErrorCode.INVALID_REQUEST)
    access = services.authorizer
    if request.transactional_id is not None:
        if not access.allowed(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
        ):
            return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif not access.idempotent_write(ctx):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
        return _error(ErrorCode.INVALID_REQUEST)
    if request.transactional_id is not None:
        result = await services.transactions.init_producer_id(
            request.transactional_id, request.transaction_timeout_ms, pid, epoch
        )
        error = result.error
        if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < FENCED_ERROR_VERSION:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        if error != ErrorCode.NONE:
            return _error(error)
        return InitProducerIdResponse(
            producer_id=result.producer_id, producer_epoch=result.producer_epoch
        )
    # As Kafka does for idempotent producers, a recovering producer (KIP-360 sends its
    # old id and epoch) gets a fresh id: ids are only ever handed out once.
    try:
        producer_id = await services.producer_ids.next_id()
    except KafkaError as e:
        return _error(e.code)
    return InitProducerIdResponse(producer_id=producer_id, producer_epoch=0)
