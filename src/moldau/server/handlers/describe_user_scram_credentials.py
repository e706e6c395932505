"""DescribeUserScramCredentials: DESCRIBE on the cluster; mechanisms and iteration counts
of users' SCRAM credentials (never the keys), from this broker's image."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from moldau.protocol.messages.describe_user_scram_credentials_response import (
    CredentialInfo,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from moldau.security.acl import AclOperation

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0


async def handle(
    services: Services, ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    if not services.authorizer.cluster(ctx, AclOperation.DESCRIBE):
        return DescribeUserScramCredentialsResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        )
    scram = services.image.security.scram
    asked = Counter(u.name for u in request.users or [])
    results = []
    for user in asked or sorted(scram):
        result = DescribeUserScramCredentialsResult(user=user)
        if asked[user] > 1:
            result.error_code = ErrorCode.DUPLICATE_RESOURCE
            result.error_message = f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
        elif user not in scram:
            result.error_code = ErrorCode.RESOURCE_NOT_FOUND
            result.error_message = (
                f"Attempt to describe a user credential that does not exist: {user}"
            )
        else:
            result.credential_infos = [
                CredentialInfo(mechanism=m, iterations=c.iterations)
                for m, c in sorted(scram[user].items())
            ]
        results.append(result)
    return DescribeUserScramCredentialsResponse(results=results)
