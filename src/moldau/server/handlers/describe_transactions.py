"""DescribeTransactions: a transactional id's state, producer and partitions."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from moldau.protocol.messages.describe_transactions_response import (
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DESCRIBE_TRANSACTIONS, 0, 0


def describe(services: Services, transactional_id: str) -> TransactionState:
    error, txn = services.transactions.describe(transactional_id)
    if txn is None:
        return TransactionState(error_code=error, transactional_id=transactional_id)
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(txn.partitions):
        by_topic[topic].append(partition)
    return TransactionState(
        error_code=ErrorCode.NONE,
        transactional_id=transactional_id,
        transaction_state=txn.state.display,
        transaction_timeout_ms=txn.timeout_ms,
        transaction_start_time_ms=txn.start_ms,
        producer_id=txn.producer_id,
        producer_epoch=txn.producer_epoch,
        topics=[TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()],
    )


async def handle(
    services: Services, ctx: RequestContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(
        transaction_states=[
            describe(services, t)
            if services.authorizer.allowed(
                ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t
            )
            else TransactionState(
                error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transactional_id=t
            )
            for t in request.transactional_ids or []
        ]
    )
