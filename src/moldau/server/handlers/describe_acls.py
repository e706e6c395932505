"""DescribeAcls: DESCRIBE on the cluster; the ACLs of this broker's image that match."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.describe_acls_request import DescribeAclsRequest
from moldau.protocol.messages.describe_acls_response import (
    AclDescription,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from moldau.security.acl import AclFilter, AclOperation

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DESCRIBE_ACLS, 0, 3


async def handle(
    services: Services, ctx: RequestContext, request: DescribeAclsRequest
) -> DescribeAclsResponse:
    if not services.authorizer.cluster(ctx, AclOperation.DESCRIBE):
        return DescribeAclsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if not services.authorizer.enabled:
        return DescribeAclsResponse(
            error_code=ErrorCode.SECURITY_DISABLED,
            error_message="No Authorizer is configured on the broker",
        )
    acl_filter = AclFilter(
        request.resource_type_filter,
        request.resource_name_filter,
        request.pattern_type_filter,
        request.principal_filter,
        request.host_filter,
        request.operation,
        request.permission_type,
    )
    if acl_filter.is_unknown():
        return DescribeAclsResponse(
            error_code=ErrorCode.INVALID_REQUEST, error_message="Unknown filter."
        )
    resources: dict[tuple[int, str, int], list[AclDescription]] = {}
    for acl in services.image.security.acls.values():
        if acl_filter.matches(acl):
            key = (acl.resource_type, acl.resource_name, acl.pattern_type)
            resources.setdefault(key, []).append(
                AclDescription(
                    principal=acl.principal,
                    host=acl.host,
                    operation=acl.operation,
                    permission_type=acl.permission_type,
                )
            )
    return DescribeAclsResponse(
        resources=[
            DescribeAclsResource(resource_type=t, resource_name=n, pattern_type=p, acls=acls)
            for (t, n, p), acls in resources.items()
        ]
    )
