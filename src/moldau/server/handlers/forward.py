"""Requests only the controller can decide: handled by sending them to it (Kafka's
forwarding). A quorum of one calls its controller in-process. What the caller may not
do is answered here (:mod:`moldau.security.forwarded`) and never forwarded."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from moldau.security.forwarded import forward

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services


async def to_controller(services: Services, ctx: RequestContext, request: Any) -> Any:
    async def send(allowed: Any) -> Any:
        return await services.controller.call(ctx.api_key, ctx.api_version, allowed)

    return await forward(services.authorizer, services.image, ctx, request, send)
