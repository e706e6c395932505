"""DeleteAcls: ALTER on the cluster; the controller removes every ACL each filter matches."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.delete_acls_request import DeleteAclsRequest
from moldau.protocol.messages.delete_acls_response import DeleteAclsFilterResult, DeleteAclsResponse
from moldau.security.acl import AclOperation
from moldau.server.handlers.forward import to_controller

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY = ApiKey.DELETE_ACLS
MIN_VERSION = 0
MAX_VERSION = 3


def refuse(request: DeleteAclsRequest, error: ErrorCode, message: str | None) -> DeleteAclsResponse:
    return DeleteAclsResponse(
        filter_results=[
            DeleteAclsFilterResult(error_code=error, error_message=message)
            for _ in request.filters or []
        ]
    )


async def handle(
    services: Services, ctx: RequestContext, request: DeleteAclsRequest
) -> DeleteAclsResponse:
    if not services.authorizer.cluster(ctx, AclOperation.ALTER):
        return refuse(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    if not services.authorizer.enabled:
        return refuse(request, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    response: DeleteAclsResponse = await to_controller(services, ctx, request)
    return response
