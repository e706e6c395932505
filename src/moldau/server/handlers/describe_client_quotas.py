"""DescribeClientQuotas (KIP-546): DESCRIBE_CONFIGS on the cluster; the quota entities of
this broker's image that match the filter components."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.metadata.security import QuotaEntity
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.describe_client_quotas_request import DescribeClientQuotasRequest
from moldau.protocol.messages.describe_client_quotas_response import (
    DescribeClientQuotasResponse,
    EntityData,
    EntryData,
    ValueData,
)
from moldau.security.acl import AclOperation
from moldau.security.quotas import CLIENT_ID, IP, USER

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


def _filter(request: DescribeClientQuotasRequest) -> tuple[dict[str, str | None], set[str]]:
    """(exact matches by entity type, types that must merely be present), Kafka's checks."""
    exact: dict[str, str | None] = {}
    present: set[str] = set()
    for c in request.components or []:
        kind = c.entity_type or ""
        if not kind:
            raise KafkaError("Invalid empty entity type.", ErrorCode.INVALID_REQUEST)
        if kind in exact or kind in present:
            raise KafkaError(
                f"Entity type {kind} cannot appear more than once in the filter.",
                ErrorCode.INVALID_REQUEST,
            )
        if kind not in (USER, CLIENT_ID, IP):
            raise KafkaError(f"Unsupported entity type {kind}", ErrorCode.UNSUPPORTED_VERSION)
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise KafkaError(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                    ErrorCode.INVALID_REQUEST,
                )
            exact[kind] = c.match
        elif c.match_type in (MATCH_DEFAULT, MATCH_SPECIFIED):
            if c.match is not None:
                raise KafkaError(
                    "Request specified MATCH_TYPE_DEFAULT or MATCH_TYPE_SPECIFIED, but also "
                    "specified a match string.",
                    ErrorCode.INVALID_REQUEST,
                )
            if c.match_type == MATCH_DEFAULT:
                exact[kind] = None
            else:
                present.add(kind)
        else:
            raise KafkaError(f"Unknown match type {c.match_type}", ErrorCode.INVALID_REQUEST)
    if IP in exact.keys() | present and len(exact.keys() | present) > 1:
        raise KafkaError(
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
            ErrorCode.INVALID_REQUEST,
        )
    return exact, present


def _matches(
    entity: QuotaEntity, exact: dict[str, str | None], present: set[str], strict: bool
) -> bool:
    pairs = dict(entity)
    if strict and len(pairs) != len(exact) + len(present):
        return False
    return all(k in pairs and pairs[k] == v for k, v in exact.items()) and present <= pairs.keys()


async def handle(
    services: Services, ctx: RequestContext, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    if not services.authorizer.cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        return DescribeClientQuotasResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        exact, present = _filter(request)
    except KafkaError as e:
        return DescribeClientQuotasResponse(error_code=e.code, error_message=str(e))
    return DescribeClientQuotasResponse(
        entries=[
            EntryData(
                entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
                values=[ValueData(key=k, value=v) for k, v in sorted(values.items())],
            )
            for entity, values in services.image.security.quotas.items()
            if _matches(entity, exact, present, request.strict)
        ]
    )
