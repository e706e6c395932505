"""Offsets committed in a transaction (TxnOffsetCommit) on the pure group coordinator:
pending until the marker, unstable for require_stable, visible on COMMIT, gone on ABORT,
and the same after a reload of the records and markers written."""

from __future__ import annotations

from moldau.coordinator.effects import Effects
from moldau.coordinator.group import GroupConfig, GroupCoordinator, OffsetCommit
from moldau.coordinator.group.loader import GroupLoader
from moldau.coordinator.group.offsets_records import encode_offset_key
from moldau.protocol.errors import ErrorCode

T0 = 1_000_000
GROUP = "g"
PID, EPOCH = 42, 3


class Log:
    """What the runtime would write: (records, producer id of a transactional batch or
    None, marker result or None) per operation."""

    def __init__(self) -> None:
        self.batches: list[tuple[list[tuple[bytes, bytes | None]], int | None, bool | None]] = []

    def add(self, effects: Effects) -> None:
        txn = effects.txn
        records = [(r.key, r.value) for r in effects.records]
        if txn is None:
            self.batches.append((records, None, None))
        else:
            self.batches.append((records, txn.producer_id, txn.marker))

    def reload(self) -> GroupCoordinator:
        loader = GroupLoader()
        for records, producer_id, marker in self.batches:
            if marker is not None:
                assert producer_id is not None and not records
                loader.replay_marker(producer_id, marker)
                continue
            for key, value in records:
                loader.replay(key, value, -1 if producer_id is None else producer_id)
        coordinator = GroupCoordinator(GroupConfig(), now_ms=T0)
        coordinator.finish_load(loader, T0)
        return coordinator


def txn_commit(c: GroupCoordinator, log: Log, offset: int, pid: int = PID) -> None:
    results, effects = c.offsets.txn_commit_offsets(
        T0, group_id=GROUP, producer_id=pid, producer_epoch=EPOCH, member_id="",
        generation_id=-1, group_instance_id=None, offsets=[OffsetCommit("t", 0, offset)],
    )  # fmt: skip
    assert results == {("t", 0): ErrorCode.NONE}
    assert effects.txn is not None and effects.txn.marker is None
    log.add(effects)


def fetched(c: GroupCoordinator, stable: bool = True) -> tuple[int, bool]:
    (o,) = c.offsets.fetch_offsets(GROUP, [("t", 0)], require_stable=stable)
    return o.offset, o.unstable


def test_pending_until_commit_dropped_on_abort_and_reloaded_alike() -> None:
    c, log = GroupCoordinator(GroupConfig(), now_ms=T0), Log()
    txn_commit(c, log, 10)
    assert fetched(c) == (-1, True)
    assert fetched(c, stable=False) == (-1, False)
    assert log.reload().offsets.fetch_offsets(GROUP, [("t", 0)], require_stable=True)[0].unstable
    log.add(c.offsets.complete_transaction(T0, PID, EPOCH, True, 5))
    assert fetched(c) == (10, False)
    assert fetched(log.reload()) == (10, False)
    txn_commit(c, log, 20)
    log.add(c.offsets.complete_transaction(T0, PID, EPOCH, False, 5))
    assert fetched(c) == (10, False)
    assert fetched(log.reload()) == (10, False)


def test_a_later_plain_commit_wins_over_a_pending_one() -> None:
    c, log = GroupCoordinator(GroupConfig(), now_ms=T0), Log()
    txn_commit(c, log, 10)
    results, effects = c.offsets.commit_offsets(
        T0, group_id=GROUP, member_id="", generation_id=-1, group_instance_id=None,
        offsets=[OffsetCommit("t", 0, 15)],
    )  # fmt: skip
    assert results == {("t", 0): ErrorCode.NONE}
    log.add(effects)
    log.add(c.offsets.complete_transaction(T0, PID, EPOCH, True, 5))
    assert fetched(c) == (15, False)
    assert fetched(log.reload()) == (15, False)


def test_markers_of_other_producers_leave_pending_offsets_alone() -> None:
    c, log = GroupCoordinator(GroupConfig(), now_ms=T0), Log()
    txn_commit(c, log, 10)
    txn_commit(c, log, 30, pid=PID + 1)
    log.add(c.offsets.complete_transaction(T0, PID + 1, EPOCH, False, 5))
    assert fetched(c) == (-1, True)
    log.add(c.offsets.complete_transaction(T0, PID, EPOCH, True, 5))
    assert fetched(c) == (10, False)
    assert fetched(log.reload()) == (10, False)
    assert c.offsets.groups_with_pending(PID) == []


def test_an_offset_with_a_pending_transactional_one_does_not_expire_until_its_marker() -> None:
    """As Kafka's cleanupExpiredOffsets: the expired plain offset stays while a transaction
    holds one of its partition; its COMMIT marker then makes the pending one committed."""
    config = GroupConfig(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1_000)
    c, log = GroupCoordinator(config, now_ms=T0), Log()
    results, effects = c.offsets.commit_offsets(
        T0, group_id=GROUP, member_id="", generation_id=-1, group_instance_id=None,
        offsets=[OffsetCommit("t", 0, 5), OffsetCommit("t", 1, 6)],
    )  # fmt: skip
    log.add(effects)
    txn_commit(c, log, 10)
    expired = c.tick(T0 + 61_000)
    log.add(expired)
    assert [r.key for r in expired.records] == [encode_offset_key(GROUP, "t", 1)]
    assert fetched(c, stable=False) == (5, False)
    log.add(c.offsets.complete_transaction(T0, PID, EPOCH, True, 5))
    assert fetched(c) == (10, False)
    assert fetched(log.reload()) == (10, False)
