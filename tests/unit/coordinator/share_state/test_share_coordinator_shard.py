"""The share coordinator's pure state: writes become ShareSnapshot / ShareUpdate records,
and a shard rebuilt from those records (as after a restart) holds the same state."""

from __future__ import annotations

from moldau.coordinator.effects import CoordinatorRecord
from moldau.coordinator.share_state.service import partition_for
from moldau.coordinator.share_state.shard import (
    SNAPSHOT_RECORD_TYPE,
    UPDATE_RECORD_TYPE,
    ShareCoordinatorShard,
    ShareStateLoader,
    StateBatch,
    WriteState,
    combine,
)
from moldau.protocol.coordinator_record_serde import SHARE_RECORD_TYPES, deserialize
from moldau.protocol.errors import ErrorCode

TOPIC_ID = bytes(range(16))
KEY = ("workers", TOPIC_ID, 3)
AVAILABLE, ACKED, ARCHIVED = 0, 2, 4


def _write(shard: ShareCoordinatorShard, data: WriteState, log: list[CoordinatorRecord]) -> None:
    error, effects = shard.write(KEY, data)
    assert error == ErrorCode.NONE
    assert len(effects.records) == 1
    log.extend(effects.records)


def _initialized(
    per_snapshot: int = 500, state_epoch: int = 0
) -> tuple[ShareCoordinatorShard, list[CoordinatorRecord]]:
    """A shard where the group coordinator initialized KEY (start offset -1: the
    leader's ``share.auto.offset.reset`` decides), and the log of that."""
    shard = ShareCoordinatorShard(records_per_snapshot=per_snapshot)
    return shard, list(shard.initialize(KEY, state_epoch, -1).records)


def _reload(log: list[CoordinatorRecord], per_snapshot: int) -> ShareCoordinatorShard:
    loader = ShareStateLoader(per_snapshot)
    for r in log:
        loader.replay(r.key, r.value)
    return loader.finish(0)


def _types(log: list[CoordinatorRecord]) -> list[int]:
    return [deserialize(SHARE_RECORD_TYPES, r.key, r.value).record_type for r in log]


def test_initialize_is_a_snapshot_then_updates_then_a_snapshot_again() -> None:
    shard, log = _initialized(per_snapshot=2)
    _write(shard, WriteState(0, 1, 0, (StateBatch(0, 9, AVAILABLE, 1),)), log)
    _write(shard, WriteState(0, 1, 0, (StateBatch(0, 4, ACKED, 1),)), log)
    _write(shard, WriteState(0, 1, 3, (StateBatch(5, 6, ARCHIVED, 5),)), log)
    _write(shard, WriteState(0, 1, -1, (StateBatch(10, 11, AVAILABLE, 1),)), log)
    assert _types(log) == [
        SNAPSHOT_RECORD_TYPE,
        UPDATE_RECORD_TYPE,
        UPDATE_RECORD_TYPE,
        SNAPSHOT_RECORD_TYPE,
        UPDATE_RECORD_TYPE,
    ]
    state = shard.states[KEY]
    assert state.start_offset == 3  # -1 leaves it where it was
    assert state.snapshot_epoch == 1
    assert state.batches == (
        StateBatch(3, 4, ACKED, 1),
        StateBatch(5, 6, ARCHIVED, 5),
        StateBatch(7, 11, AVAILABLE, 1),  # alike neighbours merged
    )
    assert _reload(log, 2).states == shard.states
    # Replaying only up to the second update gives the state written by then.
    assert _reload(log[:4], 2).states[KEY].batches == (
        StateBatch(3, 4, ACKED, 1),
        StateBatch(5, 6, ARCHIVED, 5),
        StateBatch(7, 9, AVAILABLE, 1),
    )


def test_an_unknown_key_is_not_read_nor_written_and_a_known_one_fences() -> None:
    """Kafka 4.1: reading state that does not exist is INVALID_REQUEST (the group
    coordinator initializes it first); its summary reads start offset -1."""
    shard = ShareCoordinatorShard()
    error, state = shard.read(KEY, 0)
    assert (error, state.start_offset) == (ErrorCode.INVALID_REQUEST, -1)
    assert shard.read(KEY, -1)[0] == ErrorCode.INVALID_REQUEST
    assert shard.read_summary(KEY).start_offset == -1
    assert shard.write(KEY, WriteState(2, 5, 100, ()))[0] == ErrorCode.INVALID_REQUEST
    assert KEY not in shard.states
    shard, log = _initialized(state_epoch=2)
    error, state = shard.read(KEY, 0)  # initialized at -1: the leader picks the start
    assert (error, state.start_offset, state.state_epoch) == (ErrorCode.NONE, -1, 2)
    _write(shard, WriteState(2, 5, 100, ()), log)
    assert shard.read(KEY, 4)[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert shard.write(KEY, WriteState(2, 4, 120, ()))[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert shard.write(KEY, WriteState(1, 6, 120, ()))[0] == ErrorCode.FENCED_STATE_EPOCH
    assert shard.states[KEY].start_offset == 100  # fenced writes changed nothing
    assert _reload(log, 500).read(KEY, 5) == (ErrorCode.NONE, shard.states[KEY])


def test_initialize_starts_a_new_state_epoch_and_delete_leaves_tombstones() -> None:
    shard, log = _initialized()
    _write(shard, WriteState(0, 1, 0, (StateBatch(0, 4, ACKED, 1),)), log)
    log.extend(shard.initialize(KEY, 1, 50).records)
    state = shard.states[KEY]
    assert (state.state_epoch, state.start_offset, state.batches) == (1, 50, ())
    assert shard.write(KEY, WriteState(0, 1, 60, ()))[0] == ErrorCode.FENCED_STATE_EPOCH
    assert _reload(log, 500).states == shard.states
    tombstones = shard.delete(KEY).records
    assert [r.value for r in tombstones] == [None, None]
    assert KEY not in shard.states
    assert KEY not in _reload(log + tombstones, 500).states
    # A leader still holding the deleted state can neither read nor write it back.
    assert shard.read(KEY, 1)[0] == ErrorCode.INVALID_REQUEST
    assert shard.write(KEY, WriteState(1, 1, 60, ()))[0] == ErrorCode.INVALID_REQUEST
    assert KEY not in shard.states


def test_undo_restores_the_state_before_a_failed_write() -> None:
    shard, log = _initialized()
    _write(shard, WriteState(0, 1, 0, ()), log)
    undo = shard.snapshot(None)
    _write(shard, WriteState(0, 1, 7, ()), log)
    shard.restore(undo)
    assert shard.states[KEY].start_offset == 0


def test_combine_overrides_prunes_and_merges() -> None:
    old = [StateBatch(0, 9, AVAILABLE, 1), StateBatch(10, 19, ARCHIVED, 5)]
    new = [StateBatch(5, 12, ACKED, 2)]
    assert combine(old, new, 2) == (
        StateBatch(2, 4, AVAILABLE, 1),
        StateBatch(5, 12, ACKED, 2),
        StateBatch(13, 19, ARCHIVED, 5),
    )
    joined = [StateBatch(0, 4, ACKED, 1), StateBatch(5, 9, ACKED, 1)]
    assert combine([], joined, 0) == (StateBatch(0, 9, ACKED, 1),)
    assert combine(old, [], 30) == ()


def test_partitioner_is_kafkas() -> None:
    """Values from jshell: "g:AAECAwQFBgcICQoLDA0ODw:0".hashCode() is -720837769, and
    Math.abs("workers:AAECAwQFBgcICQoLDA0ODw:3".hashCode()) % 50 is 6."""
    assert partition_for(("g", TOPIC_ID, 0), 50) == (-720837769 & 0x7FFFFFFF) % 50
    assert partition_for(KEY, 50) == 6
