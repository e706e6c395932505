"""What a controller listener serves: the Raft RPCs of the metadata quorum and the
controller's own APIs (broker lifecycle, ISR changes, forwarded admin requests).

The controller APIs are decided only by the active controller; elsewhere they answer
NOT_CONTROLLER and the caller (a broker's controller channel) tries the new leader.

With an authorizer, only brokers and controllers may use a controller listener: every API
needs CLUSTER_ACTION on the cluster (DescribeQuorum: DESCRIBE), as Kafka's ControllerApis
asks of Raft, broker lifecycle and forwarding (Envelope) requests; a broker has checked
its client's own permissions before it forwards (``security/forwarded.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from moldau.controller import apis as controller_apis
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages import REQUESTS
from moldau.protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from moldau.security.access import Access
from moldau.security.acl import AclOperation
from moldau.server.dispatch import Dispatcher
from moldau.server.handlers import sasl_authenticate, sasl_handshake

if TYPE_CHECKING:
    from moldau.metadata.image import MetadataImage
    from moldau.raft.driver import RaftManager
    from moldau.server.controller_server import ControllerServer
    from moldau.server.request_context import RequestContext

RAFT_APIS = (
    ApiKey.VOTE,
    ApiKey.BEGIN_QUORUM_EPOCH,
    ApiKey.END_QUORUM_EPOCH,
    ApiKey.FETCH,
    ApiKey.FETCH_SNAPSHOT,
    ApiKey.DESCRIBE_QUORUM,
)


@dataclass(frozen=True)
class ControllerListenerContext:
    raft: RaftManager
    controller: ControllerServer | None
    access: Access = field(default_factory=Access)  # allows all without an authorizer
    image: Callable[[], MetadataImage | None] = lambda: None  # where the ACLs are

    def authorize(self, ctx: RequestContext, api_key: int) -> None:
        if not self.access.enabled:
            return
        image = self.image()
        if image is not None:
            self.access.load(image)
        op = (
            AclOperation.DESCRIBE
            if api_key == ApiKey.DESCRIBE_QUORUM
            else AclOperation.CLUSTER_ACTION
        )
        if not self.access.cluster(ctx, op):
            raise KafkaError(
                f"{ctx.principal} may not {op.name} on the cluster (is it in super.users?)",
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            )


@dataclass(frozen=True)
class _Handler:
    api_key: int
    MIN_VERSION: int
    MAX_VERSION: int

    async def handle(
        self, node: ControllerListenerContext, ctx: RequestContext, request: Any
    ) -> Any:
        if self.api_key == ApiKey.API_VERSIONS:
            return ApiVersionsResponse(error_code=0, api_keys=_advertised())
        node.authorize(ctx, self.api_key)
        if self.api_key in RAFT_APIS:
            return await node.raft.handle(self.api_key, ctx.api_version, request)
        if node.controller is None or not node.controller.active:
            raise KafkaError("this node is not the active controller", ErrorCode.NOT_CONTROLLER)
        return await node.controller.apis.handle(self.api_key, ctx.api_version, request)


def _handler(api_key: int) -> _Handler:
    cls = REQUESTS[api_key]
    return _Handler(api_key, cls.MIN_VERSION, cls.MAX_VERSION)


CONTROLLER_LISTENER_HANDLERS: dict[int, Any] = {
    key: _handler(key) for key in (*RAFT_APIS, ApiKey.API_VERSIONS, *controller_apis.HANDLERS)
}
# Brokers log in to SASL controller listeners as to any (the handlers use only the session).
CONTROLLER_LISTENER_HANDLERS[ApiKey.SASL_HANDSHAKE] = sasl_handshake
CONTROLLER_LISTENER_HANDLERS[ApiKey.SASL_AUTHENTICATE] = sasl_authenticate


def _advertised() -> list[ApiVersion]:
    return [
        ApiVersion(api_key=k, min_version=h.MIN_VERSION, max_version=h.MAX_VERSION)
        for k, h in sorted(CONTROLLER_LISTENER_HANDLERS.items())
    ]


def controller_listener_dispatcher(
    raft: RaftManager,
    controller: ControllerServer | None,
    access: Access | None = None,
    image: Callable[[], MetadataImage | None] = lambda: None,
    **security: Any,
) -> Dispatcher:
    """``access`` authorizes on the ACLs of ``image()``; ``security``: the listeners'
    TLS/SASL and SCRAM credentials (Dispatcher's keywords)."""
    context = ControllerListenerContext(raft, controller, access or Access(), image)
    return Dispatcher(context, CONTROLLER_LISTENER_HANDLERS, _advertised, **security)
