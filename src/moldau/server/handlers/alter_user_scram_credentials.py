"""AlterUserScramCredentials: ALTER on the cluster; the controller turns each salted
password into UserScramCredentialRecords (salt, StoredKey, ServerKey, iterations)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from moldau.protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from moldau.security.acl import AclOperation
from moldau.server.handlers.forward import to_controller

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(
    services: Services, ctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    if not services.authorizer.cluster(ctx, AclOperation.ALTER):
        users = dict.fromkeys(
            [d.name for d in request.deletions or []] + [u.name for u in request.upsertions or []]
        )
        return AlterUserScramCredentialsResponse(
            results=[
                AlterUserScramCredentialsResult(
                    user=u, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                )
                for u in users
            ]
        )
    response: AlterUserScramCredentialsResponse = await to_controller(services, ctx, request)
    return response
