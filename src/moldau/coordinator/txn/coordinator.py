"""Kafka's transaction coordinator for one ``__transaction_state`` partition, sans IO.

Each operation takes the request's fields and the time, changes the transactional ids'
state and returns its answer plus the ``__transaction_state`` records to write (the
coordinator runtime writes them and answers once they are committed). Operations that
put a transaction in PrepareCommit/PrepareAbort also return a :class:`MarkerTask`: the
COMMIT or ABORT markers to write to every partition of the transaction, which the
service sends once the record is committed, then calls :meth:`complete` to write
CompleteCommit/CompleteAbort. Kafka's rules throughout (TransactionCoordinator,
TransactionMetadata): epoch bumps fence zombies, a producer retrying InitProducerId after
a lost answer gets the same epoch back (KIP-360), an InitProducerId during an open
transaction aborts it with a bumped epoch and says CONCURRENT_TRANSACTIONS, transactions
open longer than their timeout are aborted the same way, and idle transactional ids
expire after ``transactional.id.expiration.ms``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from moldau.coordinator.effects import CoordinatorRecord, Effects
from moldau.protocol.errors import ErrorCode

from .records import decode_key, decode_value, encode_key, encode_value
from .state import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    TopicPartition,
    TransactionMetadata,
    TxnState,
    epoch_exhausted,
)


@dataclass(frozen=True)
class TxnConfig:
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000


@dataclass(frozen=True)
class MarkerTask:
    """Markers to write for a transaction that is being committed or aborted."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1
    markers: MarkerTask | None = None  # the abort of the transaction this call fenced


@dataclass(frozen=True)
class EndResult:
    error: ErrorCode
    markers: MarkerTask | None = None


class TransactionLoader:
    """Replays ``__transaction_state`` records, oldest first, while a shard loads."""

    def __init__(self) -> None:
        self.txns: dict[str, TransactionMetadata] = {}

    def replay(self, key: bytes, value: bytes | None, producer_id: int = -1) -> None:
        """Raises ValueError if the record does not decode."""
        transactional_id = decode_key(key)
        if value is None:
            self.txns.pop(transactional_id, None)
        else:
            self.txns[transactional_id] = decode_value(transactional_id, value)

    def replay_marker(self, producer_id: int, committed: bool) -> None:
        """``__transaction_state`` holds no transactional data."""


class TransactionCoordinator:
    def __init__(
        self,
        config: TxnConfig | None = None,
        coordinator_epoch: int = 0,
        txns: dict[str, TransactionMetadata] | None = None,
    ) -> None:
        self.config = config or TxnConfig()
        self.coordinator_epoch = coordinator_epoch
        self.txns: dict[str, TransactionMetadata] = txns or {}

    # -- runtime hooks: no timers of its own (the service runs the periodic checks) -----
    def next_timer_ms(self) -> int | None:
        return None

    def tick(self, now_ms: int) -> Effects:
        return Effects()

    def snapshot(self, keys: Iterable[str] | None) -> dict[str, TransactionMetadata | None]:
        if keys is None:
            return {"": None, **{k: t.copy() for k, t in self.txns.items()}}  # "" marks all
        return {k: None if (t := self.txns.get(k)) is None else t.copy() for k in keys}

    def restore(self, snapshot: dict[str, TransactionMetadata | None]) -> None:
        if "" in snapshot:
            self.txns = {k: v for k, v in snapshot.items() if v is not None}
            return
        for key, txn in snapshot.items():
            if txn is None:
                self.txns.pop(key, None)
            else:
                self.txns[key] = txn

    # -- reads -------------------------------------------------------------------------
    def needs_producer_id(self, transactional_id: str, expected_epoch: int | None) -> bool:
        """Whether InitProducerId would hand out a new producer id (a new transactional
        id, or an exhausted epoch): the service allocates one before calling it."""
        txn = self.txns.get(transactional_id)
        if txn is None:
            return True
        return (
            txn.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
            and epoch_exhausted(txn.producer_epoch)
            and (expected_epoch is None or expected_epoch == txn.producer_epoch)
        )

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        txn = self.txns.get(transactional_id)
        return None if txn is None or txn.state is TxnState.DEAD else txn.copy()

    def list_transactions(
        self, states: set[TxnState], producer_ids: set[int], min_duration_ms: int, now_ms: int
    ) -> list[TransactionMetadata]:
        """ListTransactions' filters (empty: any; duration -1: any)."""
        return [
            t
            for t in self.txns.values()
            if t.state is not TxnState.DEAD
            and (not producer_ids or t.producer_id in producer_ids)
            and (not states or t.state in states)
            and (min_duration_ms < 0 or now_ms - t.start_ms > min_duration_ms)
        ]

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-890: is each partition in the producer's current transaction?"""
        wanted = list(partitions)
        txn = self.txns.get(transactional_id)
        if not transactional_id:
            error: ErrorCode | None = ErrorCode.INVALID_REQUEST
        elif txn is None or txn.producer_id != producer_id:
            error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif txn.producer_epoch != producer_epoch:
            error = ErrorCode.PRODUCER_FENCED
        elif txn.state.preparing:
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        else:
            error = None
        if error is not None:
            return dict.fromkeys(wanted, error)
        assert txn is not None
        return {
            tp: ErrorCode.NONE if tp in txn.partitions else ErrorCode.TRANSACTION_ABORTABLE
            for tp in wanted
        }

    def timed_out(self, now_ms: int) -> list[str]:
        return [
            t.transactional_id
            for t in self.txns.values()
            if t.state is TxnState.ONGOING and t.start_ms + t.timeout_ms < now_ms
        ]

    def expired(self, now_ms: int) -> list[str]:
        limit = now_ms - self.config.transactional_id_expiration_ms
        return [
            t.transactional_id
            for t in self.txns.values()
            if t.state.expiration_allowed and t.last_update_ms <= limit
        ]

    def pending_markers(self) -> list[MarkerTask]:
        """Transactions whose markers are still to be written (after a load)."""
        return [self._marker_task(t) for t in self.txns.values() if t.state.preparing]

    # -- writes ------------------------------------------------------------------------
    def init_producer_id(
        self,
        now_ms: int,
        transactional_id: str,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        new_producer_id: int,
    ) -> tuple[InitResult, Effects]:
        """InitProducerId with a transactional id. ``expected`` is the (producer id, epoch)
        a recovering producer sends (KIP-360); ``new_producer_id`` a fresh id for when
        ``needs_producer_id`` said one is needed (-1 otherwise)."""
        effects = Effects()
        if not transactional_id:
            return InitResult(ErrorCode.INVALID_REQUEST), effects
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT), effects
        txn = self.txns.get(transactional_id)
        if txn is None:
            if new_producer_id < 0:
                return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS), effects
            txn = TransactionMetadata(
                transactional_id, new_producer_id, timeout_ms=timeout_ms, last_update_ms=now_ms
            )
            self.txns[transactional_id] = txn
        if expected is not None and not _valid_producer_id(txn, *expected):
            return InitResult(ErrorCode.PRODUCER_FENCED), effects
        state = txn.state
        if state is TxnState.ONGOING:
            # Abort the open transaction under a bumped epoch, fencing the old producer;
            # the caller retries and then gets an epoch of its own.
            task = self._fence_and_abort(txn, now_ms, effects)
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS, markers=task), effects
        if state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS), effects
        expected_epoch = None if expected is None else expected[1]
        if self.needs_producer_id(transactional_id, expected_epoch) and txn.producer_epoch >= 0:
            if new_producer_id < 0:
                return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS), effects
            txn.previous_producer_id = txn.producer_id
            txn.last_producer_epoch = (
                txn.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
            )
            txn.producer_id, txn.producer_epoch = new_producer_id, 0
        else:
            bumped = txn.producer_epoch + 1
            if expected_epoch is None:
                txn.producer_epoch, txn.last_producer_epoch = bumped, NO_PRODUCER_EPOCH
            elif txn.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == txn.producer_epoch:
                txn.producer_epoch, txn.last_producer_epoch = bumped, txn.producer_epoch
            elif expected_epoch != txn.last_producer_epoch:
                return InitResult(ErrorCode.PRODUCER_FENCED), effects
            # else: a retry of a bump whose answer was lost: the same epoch again
        txn.timeout_ms = timeout_ms
        txn.partitions = set()
        txn.start_ms = -1
        txn.transition(TxnState.EMPTY, now_ms)
        self._write(txn, effects)
        return InitResult(ErrorCode.NONE, txn.producer_id, txn.producer_epoch), effects

    def add_partitions(
        self,
        now_ms: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> tuple[ErrorCode, Effects]:
        """AddPartitionsToTxn / AddOffsetsToTxn: the transaction starts (its timer too)
        with its first partition."""
        effects = Effects()
        txn = self.txns.get(transactional_id)
        error = self._check_producer(transactional_id, txn, producer_id, producer_epoch)
        if error is not None:
            return error, effects
        assert txn is not None
        added = set(partitions)
        if txn.state.preparing or txn.state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
            return ErrorCode.CONCURRENT_TRANSACTIONS, effects
        if txn.state is TxnState.ONGOING and added <= txn.partitions:
            return ErrorCode.NONE, effects
        if txn.state is not TxnState.ONGOING:
            txn.start_ms = now_ms
        txn.partitions |= added
        txn.transition(TxnState.ONGOING, now_ms)
        self._write(txn, effects)
        return ErrorCode.NONE, effects

    def end_transaction(
        self,
        now_ms: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
    ) -> tuple[EndResult, Effects]:
        """EndTxn: PrepareCommit/PrepareAbort is written, then markers go out. A retry
        after the transaction got past that answers as the first call did."""
        effects = Effects()
        txn = self.txns.get(transactional_id)
        error = self._check_producer(transactional_id, txn, producer_id, producer_epoch)
        if error is not None:
            return EndResult(error), effects
        assert txn is not None
        state = txn.state
        if state is TxnState.ONGOING:
            target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            txn.transition(target, now_ms)
            self._write(txn, effects)
            return EndResult(ErrorCode.NONE, self._marker_task(txn)), effects
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        preparing = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if state is done:
            return EndResult(ErrorCode.NONE), effects
        if state is preparing:
            return EndResult(ErrorCode.CONCURRENT_TRANSACTIONS), effects
        return EndResult(ErrorCode.INVALID_TXN_STATE), effects

    def complete(self, now_ms: int, task: MarkerTask) -> tuple[bool, Effects]:
        """Every marker of ``task`` is written: CompleteCommit/CompleteAbort. False (and
        nothing written) if the transaction moved on or this shard's epoch changed."""
        effects = Effects()
        txn = self.txns.get(task.transactional_id)
        preparing = TxnState.PREPARE_COMMIT if task.committed else TxnState.PREPARE_ABORT
        if (
            task.coordinator_epoch != self.coordinator_epoch
            or txn is None
            or txn.producer_id != task.producer_id
            or txn.producer_epoch != task.producer_epoch
            or txn.state is not preparing
        ):
            return False, effects
        txn.partitions = set()
        done = TxnState.COMPLETE_COMMIT if task.committed else TxnState.COMPLETE_ABORT
        txn.transition(done, now_ms)
        self._write(txn, effects)
        return True, effects

    def abort_timed_out(
        self, now_ms: int, transactional_ids: Iterable[str]
    ) -> tuple[list[MarkerTask], Effects]:
        """Abort transactions open longer than their timeout, fencing their producers."""
        effects = Effects()
        tasks = []
        for transactional_id in transactional_ids:
            txn = self.txns.get(transactional_id)
            if (
                txn is not None
                and txn.state is TxnState.ONGOING
                and txn.start_ms + txn.timeout_ms < now_ms
            ):
                tasks.append(self._fence_and_abort(txn, now_ms, effects))
        return tasks, effects

    def expire(self, now_ms: int, transactional_ids: Iterable[str]) -> Effects:
        """Forget transactional ids idle for transactional.id.expiration.ms (Dead, then a
        tombstone)."""
        effects = Effects()
        limit = now_ms - self.config.transactional_id_expiration_ms
        for transactional_id in transactional_ids:
            txn = self.txns.get(transactional_id)
            if txn is not None and txn.state.expiration_allowed and txn.last_update_ms <= limit:
                txn.transition(TxnState.DEAD, now_ms)
                del self.txns[transactional_id]
                effects.records.append(CoordinatorRecord(encode_key(transactional_id), None))
        return effects

    # -- plumbing ----------------------------------------------------------------------
    def _check_producer(
        self,
        transactional_id: str,
        txn: TransactionMetadata | None,
        producer_id: int,
        producer_epoch: int,
    ) -> ErrorCode | None:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        return None

    def _fence_and_abort(
        self, txn: TransactionMetadata, now_ms: int, effects: Effects
    ) -> MarkerTask:
        if txn.producer_epoch < MAX_EPOCH:
            txn.producer_epoch += 1
        txn.last_producer_epoch = NO_PRODUCER_EPOCH
        txn.transition(TxnState.PREPARE_EPOCH_FENCE, now_ms)
        txn.transition(TxnState.PREPARE_ABORT, now_ms)
        self._write(txn, effects)
        return self._marker_task(txn)

    def _marker_task(self, txn: TransactionMetadata) -> MarkerTask:
        return MarkerTask(
            txn.transactional_id,
            txn.producer_id,
            txn.producer_epoch,
            txn.state is TxnState.PREPARE_COMMIT,
            self.coordinator_epoch,
            frozenset(txn.partitions),
        )

    @staticmethod
    def _write(txn: TransactionMetadata, effects: Effects) -> None:
        effects.records.append(
            CoordinatorRecord(encode_key(txn.transactional_id), encode_value(txn))
        )


def _valid_producer_id(txn: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """KIP-360: a producer may re-initialize with its id and epoch if it is the current
    producer, the metadata is new, or it retries after its epoch was exhausted."""
    return (
        txn.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == txn.producer_id
        or (producer_id == txn.previous_producer_id and epoch_exhausted(epoch))
    )
