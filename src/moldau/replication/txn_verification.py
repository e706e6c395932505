"""KIP-890 (part 1): a partition leader checks with the transaction coordinator before it
lets a producer start a transaction on a partition.

A transactional batch from a producer with no transaction open on the partition would
start one. If the producer never added the partition (a bug, or a zombie whose
transaction was already aborted), no marker would ever end it and the last stable offset
would hang there for good. So the leader first asks the coordinator (AddPartitionsToTxn
v4+, verify only) whether the partition is in the producer's current transaction, and
appends only if so. A guard taken before asking and dropped by any marker for the
producer makes sure an abort that lands meanwhile is not followed by a stale append
(Kafka's VerificationGuard).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from moldau.protocol.errors import ErrorCode
from moldau.records.batch import BATCH_HEADER_SIZE, read_batch_header
from moldau.storage.unified_log import UnifiedLog

TopicPartition = tuple[str, int]

# (transactional id, producer id, epoch, partitions) -> per-partition coordinator answers
Verify = Callable[
    [str, int, int, list[TopicPartition]], Awaitable[Mapping[TopicPartition, ErrorCode]]
]

# What the coordinator says, as old producers understand it in a produce response
# (Kafka's AddPartitionsToTxnManager and ReplicaManager conversions).
_PRODUCE_ERRORS = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.TRANSACTION_ABORTABLE: ErrorCode.INVALID_TXN_STATE,
    ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NETWORK_EXCEPTION: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_COORDINATOR: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: ErrorCode.INVALID_TXN_STATE,
}


@dataclass(frozen=True, slots=True)
class Guard:
    """Taken before asking the coordinator; valid while no marker for the producer was
    written to the partition since."""

    producer_id: int


class TransactionVerifier:
    def __init__(self, verify: Verify) -> None:
        self.verify = verify
        self._guards: dict[tuple[TopicPartition, int], Guard] = {}

    def needs_verification(
        self, log: UnifiedLog, records: bytes | bytearray | memoryview
    ) -> tuple[int, int] | None:
        """(producer id, epoch) of a transactional batch that would start a transaction
        on ``log``, else None."""
        if len(records) < BATCH_HEADER_SIZE:
            return None
        info = read_batch_header(records)
        if not info.is_transactional or info.is_control or info.producer_id < 0:
            return None
        if log.producer_state.has_ongoing_transaction(info.producer_id):
            return None
        return info.producer_id, info.producer_epoch

    async def check(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> tuple[dict[TopicPartition, ErrorCode], dict[TopicPartition, Guard]]:
        """Ask the coordinator; (produce errors of the partitions refused, guards of the
        verified ones)."""
        guards = {}
        for tp in partitions:
            guard = guards[tp] = Guard(producer_id)
            self._guards[(tp, producer_id)] = guard
        try:
            answers = await self.verify(transactional_id, producer_id, producer_epoch, partitions)
        except (ConnectionError, TimeoutError):
            answers = dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        errors = {}
        for tp in partitions:
            code = answers.get(tp, ErrorCode.INVALID_TXN_STATE)
            if code != ErrorCode.NONE:
                errors[tp] = _PRODUCE_ERRORS.get(code, code)
                guards.pop(tp)
                self._guards.pop((tp, producer_id), None)
        return errors, guards

    def still_valid(self, tp: TopicPartition, guard: Guard) -> bool:
        return self._guards.get((tp, guard.producer_id)) is guard

    def done(self, tp: TopicPartition, producer_id: int) -> None:
        """A marker was written for the producer (its transaction ended), or its
        transaction started: a guard taken before no longer counts."""
        self._guards.pop((tp, producer_id), None)
