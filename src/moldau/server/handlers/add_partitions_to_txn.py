"""AddPartitionsToTxn: a producer registers the partitions it is about to write (v0-3),
or a partition leader asks whether they are registered (v4+, KIP-890, verify only)."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from moldau.protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

# v5 only adds TRANSACTION_ABORTABLE, which brokers already handle.
API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5
BATCHED_VERSION = 4  # brokers' form: several transactions, verify only (KIP-890)
FENCED_ERROR_VERSION = 2  # older clients get INVALID_PRODUCER_EPOCH for PRODUCER_FENCED

TopicPartition = tuple[str, int]


def _partitions(topics: list[AddPartitionsToTxnTopic]) -> list[TopicPartition]:
    return [(t.name or "", p) for t in topics for p in t.partitions or []]


def _results(errors: dict[TopicPartition, ErrorCode]) -> list[AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = defaultdict(list)
    for (topic, partition), error in errors.items():
        by_topic[topic].append(
            AddPartitionsToTxnPartitionResult(partition_index=partition, partition_error_code=error)
        )
    return [
        AddPartitionsToTxnTopicResult(name=t, results_by_partition=ps) for t, ps in by_topic.items()
    ]


async def _add(
    services: Services, ctx: RequestContext, txn: AddPartitionsToTxnTransaction, version: int
) -> dict[TopicPartition, ErrorCode]:
    wanted = _partitions(txn.topics or [])
    access = services.authorizer
    if version < BATCHED_VERSION:
        # A producer's request: WRITE on its transactional id and on every topic; as Kafka,
        # nothing is added when one is refused, and the others are "not attempted".
        if not access.allowed(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn.transactional_id or ""
        ):
            return dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        topics = {t for t, _ in wanted}
        refused = topics - access.allowed_names(ctx, AclOperation.WRITE, ResourceType.TOPIC, topics)
        if refused:
            return {
                tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED
                if tp[0] in refused
                else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in wanted
            }
    image = services.image
    unknown = {tp for tp in wanted if image.partition(*tp) is None}
    if unknown:
        # As Kafka: nothing is added; the others were not attempted.
        return {
            tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if tp in unknown
            else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in wanted
        }
    if txn.verify_only:
        return services.transactions.verify_partitions(
            txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted
        )
    error = await services.transactions.add_partitions(
        txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted
    )
    if error == ErrorCode.PRODUCER_FENCED and version < FENCED_ERROR_VERSION:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return dict.fromkeys(wanted, error)


async def handle(
    services: Services, ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    if ctx.api_version >= BATCHED_VERSION:
        if not services.authorizer.cluster(ctx, AclOperation.CLUSTER_ACTION):  # brokers only
            return AddPartitionsToTxnResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return AddPartitionsToTxnResponse(
            results_by_transaction=[
                AddPartitionsToTxnResult(
                    transactional_id=t.transactional_id,
                    topic_results=_results(await _add(services, ctx, t, ctx.api_version)),
                )
                for t in request.transactions or []
            ]
        )
    single = AddPartitionsToTxnTransaction(
        transactional_id=request.v3_and_below_transactional_id,
        producer_id=request.v3_and_below_producer_id,
        producer_epoch=request.v3_and_below_producer_epoch,
        topics=request.v3_and_below_topics,
    )
    return AddPartitionsToTxnResponse(
        results_by_topic_v3_and_below=_results(await _add(services, ctx, single, ctx.api_version))
    )
