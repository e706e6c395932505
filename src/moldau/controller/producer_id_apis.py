"""The controller's side of AllocateProducerIds: blocks of producer ids for brokers."""

from __future__ import annotations

from moldau.controller.context import ControllerContext
from moldau.controller.quorum_controller import ControllerResult
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from moldau.protocol.messages.allocate_producer_ids_response import AllocateProducerIdsResponse


async def allocate_producer_ids(
    controller: ControllerContext, version: int, request: AllocateProducerIdsRequest
) -> AllocateProducerIdsResponse:
    """A block of producer ids for a broker, recorded so no id is handed out twice."""

    def op(image: MetadataImage) -> ControllerResult[AllocateProducerIdsResponse]:
        broker = image.brokers.get(request.broker_id)
        if broker is None or broker.epoch != request.broker_epoch:
            stale = AllocateProducerIdsResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
            return ControllerResult(stale)
        block, outcome = controller.topics.allocate_producer_ids(image, request.broker_id)
        response = AllocateProducerIdsResponse(
            producer_id_start=block.start, producer_id_len=len(block)
        )
        return ControllerResult(response, outcome.records)

    return await controller.quorum.write(op)
