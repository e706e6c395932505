"""ListTransactions: the transactions this broker coordinates, filtered by state,
producer id and (v1, KIP-994) how long they have been running."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.list_transactions_request import ListTransactionsRequest
from moldau.protocol.messages.list_transactions_response import (
    ListTransactionsResponse,
    TransactionState,
)
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.LIST_TRANSACTIONS, 0, 1


async def handle(
    services: Services, ctx: RequestContext, request: ListTransactionsRequest
) -> ListTransactionsResponse:
    found, unknown = services.transactions.list_transactions(
        request.state_filters or [], request.producer_id_filters or [], request.duration_filter
    )
    access = services.authorizer
    visible = access.allowed_names(
        ctx,
        AclOperation.DESCRIBE,
        ResourceType.TRANSACTIONAL_ID,
        (t.transactional_id for t in found),
        log_denied=False,
    )
    return ListTransactionsResponse(
        unknown_state_filters=unknown,
        transaction_states=[
            TransactionState(
                transactional_id=t.transactional_id,
                producer_id=t.producer_id,
                transaction_state=t.state.display,
            )
            for t in found
            if t.transactional_id in visible
        ],
    )
