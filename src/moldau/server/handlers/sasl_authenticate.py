"""SaslAuthenticate: one SASL token in, one out (KIP-152); from v1 the session lifetime
(KIP-368) tells the client when to re-authenticate."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from moldau.protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.SASL_AUTHENTICATE, 0, 2


async def handle(
    services: Services, ctx: RequestContext, request: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    outcome = ctx.connection.session.authenticate(bytes(request.auth_bytes), ctx.api_version)
    return SaslAuthenticateResponse(
        error_code=outcome.error,
        error_message=outcome.message,
        auth_bytes=outcome.token,
        session_lifetime_ms=outcome.session_lifetime_ms,
    )
