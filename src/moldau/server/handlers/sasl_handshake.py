"""SaslHandshake: pick the SASL mechanism (and, from v1, Kafka-framed tokens to follow)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from moldau.protocol.messages.sasl_handshake_response import SaslHandshakeResponse

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.SASL_HANDSHAKE, 0, 1


async def handle(
    services: Services, ctx: RequestContext, request: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    session = ctx.connection.session
    error = session.handshake(request.mechanism or "", ctx.api_version)
    return SaslHandshakeResponse(error_code=error, mechanisms=list(session.listener.mechanisms))
