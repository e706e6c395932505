"""The controller's side of the broker lifecycle RPCs: BrokerRegistration,
BrokerHeartbeat and UnregisterBroker (decided by :class:`ClusterControl`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.controller.cluster_control import Registration
from moldau.controller.quorum_controller import ControllerResult
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from moldau.protocol.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from moldau.protocol.messages.broker_registration_request import BrokerRegistrationRequest
from moldau.protocol.messages.broker_registration_response import BrokerRegistrationResponse
from moldau.protocol.messages.unregister_broker_request import UnregisterBrokerRequest
from moldau.protocol.messages.unregister_broker_response import UnregisterBrokerResponse

if TYPE_CHECKING:
    from moldau.controller.context import ControllerContext


async def broker_registration(
    controller: ControllerContext, version: int, request: BrokerRegistrationRequest
) -> BrokerRegistrationResponse:
    reg = Registration(
        request.broker_id,
        request.incarnation_id,
        request.cluster_id,
        tuple((li.name, li.host, li.port, li.security_protocol) for li in request.listeners),
        request.rack,
    )

    def op(image: MetadataImage) -> ControllerResult[BrokerRegistrationResponse]:
        epoch = image.offset + 1  # where the registration will land: epochs only grow
        error, message, records = controller.cluster.register(
            image, reg, epoch, controller.clock.now_ms()
        )
        response = BrokerRegistrationResponse(
            error_code=error, broker_epoch=epoch if error == ErrorCode.NONE else -1
        )
        return ControllerResult(response, records)

    return await controller.quorum.write(op)


async def broker_heartbeat(
    controller: ControllerContext, version: int, request: BrokerHeartbeatRequest
) -> BrokerHeartbeatResponse:
    def op(image: MetadataImage) -> ControllerResult[BrokerHeartbeatResponse]:
        result = controller.cluster.heartbeat(
            image,
            request.broker_id,
            request.broker_epoch,
            request.current_metadata_offset,
            request.want_fence,
            request.want_shut_down,
            controller.clock.now_ms(),
        )
        response = BrokerHeartbeatResponse(
            error_code=result.error,
            is_caught_up=result.is_caught_up,
            is_fenced=result.is_fenced,
            should_shut_down=result.should_shut_down,
        )
        return ControllerResult(response, result.records)

    return await controller.quorum.write(op)


async def unregister_broker(
    controller: ControllerContext, version: int, request: UnregisterBrokerRequest
) -> UnregisterBrokerResponse:
    def op(image: MetadataImage) -> ControllerResult[UnregisterBrokerResponse]:
        error, records = controller.cluster.unregister(image, request.broker_id)
        return ControllerResult(UnregisterBrokerResponse(error_code=error), records)

    return await controller.quorum.write(op)
