"""AlterClientQuotas (KIP-546): ALTER_CONFIGS on the cluster; the controller validates each
entity and writes ClientQuotaRecords."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.alter_client_quotas_request import AlterClientQuotasRequest
from moldau.protocol.messages.alter_client_quotas_response import (
    AlterClientQuotasResponse,
    EntityData,
    EntryData,
)
from moldau.security.acl import AclOperation
from moldau.server.handlers.forward import to_controller

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(
    services: Services, ctx: RequestContext, request: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    if not services.authorizer.cluster(ctx, AclOperation.ALTER_CONFIGS):
        return AlterClientQuotasResponse(
            entries=[
                EntryData(
                    error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    entity=[
                        EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                        for e in entry.entity or []
                    ],
                )
                for entry in request.entries or []
            ]
        )
    response: AlterClientQuotasResponse = await to_controller(services, ctx, request)
    return response
