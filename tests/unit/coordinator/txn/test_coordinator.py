"""The pure transaction coordinator, driven step by step with a hand-held clock.

Every operation's records are replayed into a :class:`TransactionLoader` as the runtime
would after a failover, so each test also checks that the log says what the memory says.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.coordinator.effects import Effects
from moldau.coordinator.txn.coordinator import (
    MarkerTask,
    TransactionCoordinator,
    TransactionLoader,
    TxnConfig,
)
from moldau.coordinator.txn.records import decode_key, decode_value
from moldau.coordinator.txn.state import MAX_EPOCH, TxnState
from moldau.protocol.errors import ErrorCode

TID = "app-1"
T0 = 1_000_000


class Harness:
    """The coordinator of one ``__transaction_state`` partition and the log it wrote."""

    def __init__(self, coordinator_epoch: int = 3, **config: int) -> None:
        self.config = TxnConfig(**config)
        self.coordinator = TransactionCoordinator(self.config, coordinator_epoch)
        self.log: list[tuple[bytes, bytes | None]] = []
        self.now = T0
        self.next_id = 1000

    def _absorb(self, effects: Effects) -> None:
        assert effects.txn is None  # the transaction log is never itself transactional
        self.log += [(r.key, r.value) for r in effects.records]

    def init(
        self, tid: str = TID, timeout_ms: int = 60_000, expected: tuple[int, int] | None = None
    ) -> tuple[ErrorCode, int, int, MarkerTask | None]:
        c = self.coordinator
        new_id = -1
        if c.needs_producer_id(tid, None if expected is None else expected[1]):
            new_id, self.next_id = self.next_id, self.next_id + 1
        result, effects = c.init_producer_id(self.now, tid, timeout_ms, expected, new_id)
        self._absorb(effects)
        return result.error, result.producer_id, result.producer_epoch, result.markers

    def add(self, pid: int, epoch: int, *tps: tuple[str, int], tid: str = TID) -> ErrorCode:
        error, effects = self.coordinator.add_partitions(self.now, tid, pid, epoch, tps)
        self._absorb(effects)
        return error

    def end(
        self, pid: int, epoch: int, commit: bool, tid: str = TID
    ) -> tuple[ErrorCode, MarkerTask | None]:
        result, effects = self.coordinator.end_transaction(self.now, tid, pid, epoch, commit)
        self._absorb(effects)
        return result.error, result.markers

    def complete(self, task: MarkerTask) -> bool:
        done, effects = self.coordinator.complete(self.now, task)
        self._absorb(effects)
        return done

    def state(self, tid: str = TID) -> TxnState:
        return self.coordinator.txns[tid].state

    def replayed(self, coordinator_epoch: int = 4) -> TransactionCoordinator:
        """A new coordinator loaded from the log (a failover to another node)."""
        loader = TransactionLoader()
        for key, value in self.log:
            loader.replay(key, value)
        return TransactionCoordinator(self.config, coordinator_epoch, loader.txns)

    def assert_log_matches_memory(self) -> None:
        loaded = self.replayed().txns
        memory = self.coordinator.txns
        assert loaded.keys() == memory.keys()
        for tid, txn in memory.items():
            got = loaded[tid]
            assert (got.producer_id, got.producer_epoch, got.state, got.partitions) == (
                txn.producer_id,
                txn.producer_epoch,
                txn.state,
                txn.partitions,
            )
            assert (got.timeout_ms, got.start_ms, got.last_update_ms) == (
                txn.timeout_ms,
                txn.start_ms,
                txn.last_update_ms,
            )


def test_first_init_allocates_an_id_and_later_ones_bump_the_epoch() -> None:
    h = Harness()
    error, pid, epoch, markers = h.init()
    assert (error, pid, epoch, markers) == (ErrorCode.NONE, 1000, 0, None)
    assert h.init()[:3] == (ErrorCode.NONE, 1000, 1)
    assert h.state() is TxnState.EMPTY
    key, value = h.log[-1]
    assert value is not None
    assert decode_key(key) == TID
    written = decode_value(TID, value)
    assert (written.producer_id, written.producer_epoch, written.state) == (1000, 1, TxnState.EMPTY)
    h.assert_log_matches_memory()


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
def test_transaction_timeout_beyond_the_maximum_is_refused(timeout_ms: int) -> None:
    h = Harness()
    assert h.init(timeout_ms=timeout_ms)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert h.log == [] and TID not in h.coordinator.txns
    assert Harness(transaction_max_timeout_ms=5000).init(timeout_ms=5001)[0] == (
        ErrorCode.INVALID_TRANSACTION_TIMEOUT
    )


def test_commit_goes_through_prepare_and_markers_then_complete() -> None:
    h = Harness()
    _, pid, epoch, _ = h.init()
    h.now += 10
    assert h.add(pid, epoch, ("t", 0), ("t", 1)) == ErrorCode.NONE
    assert h.state() is TxnState.ONGOING and h.coordinator.txns[TID].start_ms == h.now
    written = len(h.log)
    assert h.add(pid, epoch, ("t", 1)) == ErrorCode.NONE
    assert len(h.log) == written  # nothing new: no record
    h.now += 10
    assert h.add(pid, epoch, ("__consumer_offsets", 7)) == ErrorCode.NONE
    assert h.coordinator.txns[TID].start_ms == h.now - 10  # the timer started with the first
    error, task = h.end(pid, epoch, commit=True)
    assert error == ErrorCode.NONE and task is not None
    assert task == MarkerTask(
        TID, pid, epoch, True, 3, frozenset({("t", 0), ("t", 1), ("__consumer_offsets", 7)})
    )
    assert h.state() is TxnState.PREPARE_COMMIT
    h.assert_log_matches_memory()
    # Retries while the markers go out, and after.
    assert h.end(pid, epoch, commit=True) == (ErrorCode.CONCURRENT_TRANSACTIONS, None)
    assert h.add(pid, epoch, ("t", 2)) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert h.complete(task)
    assert h.state() is TxnState.COMPLETE_COMMIT and h.coordinator.txns[TID].partitions == set()
    assert h.end(pid, epoch, commit=True) == (ErrorCode.NONE, None)
    assert h.end(pid, epoch, commit=False) == (ErrorCode.INVALID_TXN_STATE, None)
    assert not h.complete(task)  # once only
    # The next transaction starts from CompleteCommit.
    assert h.add(pid, epoch, ("t", 2)) == ErrorCode.NONE
    error, task = h.end(pid, epoch, commit=False)
    assert error == ErrorCode.NONE and task is not None and not task.committed
    assert task.partitions == {("t", 2)}
    assert h.complete(task) and h.state() is TxnState.COMPLETE_ABORT
    h.assert_log_matches_memory()


def test_end_without_a_transaction_and_unknown_producers() -> None:
    h = Harness()
    _, pid, epoch, _ = h.init()
    assert h.end(pid, epoch, commit=True)[0] == ErrorCode.INVALID_TXN_STATE
    assert h.end(pid + 1, epoch, commit=True)[0] == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert h.add(pid, epoch, ("t", 0), tid="other") == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert h.add(pid, epoch + 1, ("t", 0)) == ErrorCode.PRODUCER_FENCED
    assert h.add(pid, epoch, ("t", 0), tid="") == ErrorCode.INVALID_REQUEST


def test_a_new_producer_fences_the_old_one_and_aborts_its_transaction() -> None:
    h = Harness()
    _, pid, old_epoch, _ = h.init()
    h.add(pid, old_epoch, ("t", 0))
    error, _, _, task = h.init()
    # The open transaction is aborted under a bumped epoch; the caller retries.
    assert error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert task == MarkerTask(TID, pid, old_epoch + 1, False, 3, frozenset({("t", 0)}))
    assert h.state() is TxnState.PREPARE_ABORT
    assert h.init()[0] == ErrorCode.CONCURRENT_TRANSACTIONS  # still aborting
    assert h.end(pid, old_epoch, commit=True)[0] == ErrorCode.PRODUCER_FENCED
    assert h.complete(task)
    error, same_pid, new_epoch, _ = h.init()
    assert (error, same_pid, new_epoch) == (ErrorCode.NONE, pid, old_epoch + 2)
    assert h.add(pid, old_epoch, ("t", 0)) == ErrorCode.PRODUCER_FENCED
    h.assert_log_matches_memory()


def test_kip360_recovery_bumps_once_and_fences_older_epochs() -> None:
    h = Harness()
    _, pid, _, _ = h.init()
    _, _, epoch, _ = h.init()  # epoch 1
    assert h.init(expected=(pid, epoch))[:3] == (ErrorCode.NONE, pid, epoch + 1)
    # The answer was lost: the same request again gets the same epoch back.
    assert h.init(expected=(pid, epoch))[:3] == (ErrorCode.NONE, pid, epoch + 1)
    assert h.init(expected=(pid, epoch - 1))[0] == ErrorCode.PRODUCER_FENCED
    assert h.init(expected=(pid + 7, epoch + 1))[0] == ErrorCode.PRODUCER_FENCED


def test_an_exhausted_epoch_moves_to_a_new_producer_id() -> None:
    h = Harness()
    _, pid, _, _ = h.init()
    h.coordinator.txns[TID].producer_epoch = MAX_EPOCH - 1
    error, new_pid, epoch, _ = h.init()
    assert (error, epoch) == (ErrorCode.NONE, 0) and new_pid != pid
    assert h.coordinator.txns[TID].previous_producer_id == pid


def test_timed_out_transactions_are_aborted_and_their_producer_fenced() -> None:
    h = Harness()
    _, pid, epoch, _ = h.init(timeout_ms=1000)
    _, other_pid, other_epoch, _ = h.init(tid="patient", timeout_ms=60_000)
    h.add(pid, epoch, ("t", 0))
    h.add(other_pid, other_epoch, ("t", 1), tid="patient")
    h.now += 1000
    assert h.coordinator.timed_out(h.now) == []  # at the limit, not past it
    h.now += 1
    assert h.coordinator.timed_out(h.now) == [TID]
    tasks, effects = h.coordinator.abort_timed_out(h.now, [TID, "patient"])
    h._absorb(effects)
    assert tasks == [MarkerTask(TID, pid, epoch + 1, False, 3, frozenset({("t", 0)}))]
    assert h.state() is TxnState.PREPARE_ABORT and h.state("patient") is TxnState.ONGOING
    assert h.end(pid, epoch, commit=True)[0] == ErrorCode.PRODUCER_FENCED
    h.assert_log_matches_memory()


def test_idle_transactional_ids_expire_with_a_tombstone() -> None:
    h = Harness(transactional_id_expiration_ms=5000)
    _, pid, epoch, _ = h.init()
    h.init(tid="busy")
    h.now += 4000
    h.add(pid, epoch, ("t", 0))  # an open transaction never expires
    h.now += 2000
    assert h.coordinator.expired(h.now) == ["busy"]
    h._absorb(h.coordinator.expire(h.now, ["busy", TID]))
    assert "busy" not in h.coordinator.txns and TID in h.coordinator.txns
    assert decode_key(h.log[-1][0]) == "busy" and h.log[-1][1] is None
    h.assert_log_matches_memory()
    assert h.init(tid="busy")[:3] == (ErrorCode.NONE, 1002, 0)  # a new id: a new producer


def test_failover_resumes_prepared_transactions_under_the_new_epoch() -> None:
    h = Harness(coordinator_epoch=3)
    _, pid, epoch, _ = h.init()
    h.add(pid, epoch, ("t", 0), ("t", 5))
    _, old_task = h.end(pid, epoch, commit=True)
    assert old_task is not None
    _, other, other_epoch, _ = h.init(tid="aborting")
    h.add(other, other_epoch, ("u", 1), tid="aborting")
    h.end(other, other_epoch, commit=False, tid="aborting")
    successor = h.replayed(coordinator_epoch=4)
    tasks = sorted(successor.pending_markers(), key=lambda t: t.transactional_id)
    assert tasks == [
        MarkerTask("aborting", other, other_epoch, False, 4, frozenset({("u", 1)})),
        MarkerTask(TID, pid, epoch, True, 4, frozenset({("t", 0), ("t", 5)})),
    ]
    # The old coordinator's completion is refused: the new one completes.
    done, _ = successor.complete(T0, old_task)
    assert not done
    done, effects = successor.complete(T0, tasks[1])
    assert done and successor.txns[TID].state is TxnState.COMPLETE_COMMIT
    assert len(effects.records) == 1


def test_verification_answers_per_partition() -> None:
    h = Harness()
    _, pid, epoch, _ = h.init()
    h.add(pid, epoch, ("t", 0))
    verify = h.coordinator.verify_partitions
    assert verify(TID, pid, epoch, [("t", 0), ("t", 1)]) == {
        ("t", 0): ErrorCode.NONE,
        ("t", 1): ErrorCode.TRANSACTION_ABORTABLE,
    }
    assert verify(TID, pid, epoch - 1, [("t", 0)]) == {("t", 0): ErrorCode.PRODUCER_FENCED}
    assert verify(TID, pid + 1, epoch, [("t", 0)]) == {
        ("t", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING
    }
    h.end(pid, epoch, commit=False)
    assert verify(TID, pid, epoch, [("t", 0)]) == {("t", 0): ErrorCode.CONCURRENT_TRANSACTIONS}


def test_describe_and_list_filters() -> None:
    h = Harness()
    _, pid, epoch, _ = h.init()
    _, other, _, _ = h.init(tid="idle")
    h.add(pid, epoch, ("t", 0))
    h.now += 500
    c = h.coordinator
    described = c.describe(TID)
    assert described is not None and described.state is TxnState.ONGOING
    assert c.describe("missing") is None
    ids = lambda txns: sorted(t.transactional_id for t in txns)  # noqa: E731
    assert ids(c.list_transactions(set(), set(), -1, h.now)) == [TID, "idle"]
    assert ids(c.list_transactions({TxnState.ONGOING}, set(), -1, h.now)) == [TID]
    assert ids(c.list_transactions(set(), {other}, -1, h.now)) == ["idle"]
    assert ids(c.list_transactions({TxnState.ONGOING}, set(), 400, h.now)) == [TID]
    assert ids(c.list_transactions({TxnState.ONGOING}, set(), 600, h.now)) == []


# -- property: any sequence of client calls keeps the log and the memory in step ----------

OPS = st.lists(
    st.tuples(
        st.sampled_from(["init", "add", "commit", "abort", "complete", "tick", "stale"]),
        st.sampled_from([TID, "b"]),
        st.integers(0, 3),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_any_call_sequence_replays_to_the_same_state(ops: list[tuple[str, str, int]]) -> None:
    """Valid or not, every call leaves a state the log reproduces, transitions only
    along Kafka's edges (IllegalTransitionError would raise), and a producer whose epoch
    moved on can never again change its transaction."""
    h = Harness(transaction_max_timeout_ms=10_000)
    producers: dict[str, tuple[int, int]] = {}
    tasks: list[MarkerTask] = []
    for op, tid, n in ops:
        txn = h.coordinator.txns.get(tid)
        if op == "init":
            error, pid, epoch, task = h.init(tid, timeout_ms=1000)
            if error == ErrorCode.NONE:
                producers[tid] = (pid, epoch)
            if task is not None:
                tasks.append(task)
        elif op in ("add", "commit", "abort", "stale") and tid in producers:
            pid, epoch = producers[tid]
            if op == "stale":
                epoch -= 1
            if op in ("add", "stale"):
                error = h.add(pid, epoch, ("t", n), tid=tid)
                if op == "stale" and error == ErrorCode.NONE:
                    pytest.fail("a fenced epoch changed its transaction")
            else:
                _, task = h.end(pid, epoch, op == "commit", tid=tid)
                if task is not None:
                    tasks.append(task)
        elif op == "complete" and tasks:
            h.complete(tasks.pop(n % len(tasks)))
        elif op == "tick":
            h.now += 600
            found, effects = h.coordinator.abort_timed_out(h.now, h.coordinator.timed_out(h.now))
            h._absorb(effects)
            tasks += found
        if txn is not None and txn.state is TxnState.ONGOING:
            assert txn.partitions, "an ongoing transaction has partitions"
        h.assert_log_matches_memory()


def test_snapshot_and_restore_undo_a_failed_write() -> None:
    """What the runtime does when the records of an operation cannot be written."""
    h = Harness()
    _, pid, epoch, _ = h.init()
    h.add(pid, epoch, ("t", 0))
    c = h.coordinator
    before = c.snapshot([TID, "new"])
    h.add(pid, epoch, ("t", 1))
    h.init(tid="new")
    c.restore(before)
    assert c.txns[TID].partitions == {("t", 0)} and "new" not in c.txns
    everything = c.snapshot(None)
    h.end(pid, epoch, commit=True)
    c.restore(everything)
    assert c.txns[TID].state is TxnState.ONGOING and c.txns[TID].partitions == {("t", 0)}
