"""CreateAcls: ALTER on the cluster; decided by the controller (AccessControlEntryRecords)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.create_acls_request import CreateAclsRequest
from moldau.protocol.messages.create_acls_response import AclCreationResult, CreateAclsResponse
from moldau.security.acl import AclOperation
from moldau.server.handlers.forward import to_controller

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY = ApiKey.CREATE_ACLS
MIN_VERSION = 0
MAX_VERSION = 3


def refuse(request: CreateAclsRequest, error: ErrorCode, message: str | None) -> CreateAclsResponse:
    return CreateAclsResponse(
        results=[
            AclCreationResult(error_code=error, error_message=message)
            for _ in request.creations or []
        ]
    )


async def handle(
    services: Services, ctx: RequestContext, request: CreateAclsRequest
) -> CreateAclsResponse:
    if not services.authorizer.cluster(ctx, AclOperation.ALTER):
        return refuse(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    if not services.authorizer.enabled:
        return refuse(request, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    response: CreateAclsResponse = await to_controller(services, ctx, request)
    return response
