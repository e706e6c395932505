"""A transactional id's state (Kafka's TransactionMetadata and TransactionState).

States and their ids are Kafka's (the ids are what ``__transaction_state`` stores); a
transition is only allowed from the states Kafka allows it from, so an impossible step
is a bug caught at once instead of a corrupt log.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue

TopicPartition = tuple[str, int]


class TxnState(Enum):
    """(id in the log, name shown by DescribeTransactions/ListTransactions)."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def display(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> TxnState:
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return next((s for s in cls if s.display == name), None)

    @property
    def expiration_allowed(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


_S = TxnState
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalTransitionError(RuntimeError):
    """A transition Kafka forbids: a coordinator bug, never a client's doing."""


def epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch for fencing: a producer id is retired one step early."""
    return epoch >= MAX_EPOCH - 1


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # the epoch before the last bump (KIP-360)
    previous_producer_id: int = NO_PRODUCER_ID
    timeout_ms: int = 60_000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1

    def copy(self) -> TransactionMetadata:
        """An independent copy (the runtime's rollback point; far cheaper than deepcopy)."""
        return replace(self, partitions=set(self.partitions))

    def transition(self, state: TxnState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransitionError(
                f"transaction {self.transactional_id}: {self.state.display} -> "
                f"{state.display} is not a valid transition"
            )
        self.state = state
        self.last_update_ms = now_ms
