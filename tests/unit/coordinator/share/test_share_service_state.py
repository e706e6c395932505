"""The share-group service over a share coordinator's pure state: a share-partition is
read from it, every acknowledgement is answered only once written, and a failed write
answers the error and leaves what is durable in charge (the records come back)."""

from __future__ import annotations

import asyncio

from moldau.clock import ManualClock
from moldau.coordinator.share.partition import RecordState
from moldau.coordinator.share.service import ShareGroupService, ShareSettings
from moldau.coordinator.share_state.shard import (
    ShareCoordinatorShard,
    ShareGroupOffset,
    ShareKey,
    WriteState,
)
from moldau.ids import SeededIds
from moldau.protocol.errors import ErrorCode

TOPIC_ID = b"t" * 16
KEY = ("g", "t", 0)
ACCEPT, RELEASE = 1, 2


class ShardStore:
    """A StateStore answering from a share coordinator shard; ``failing`` fails writes."""

    def __init__(self) -> None:
        self.shard = ShareCoordinatorShard()
        self.failing: ErrorCode = ErrorCode.NONE
        self.writes = 0

    async def read(self, key: ShareKey, leader_epoch: int) -> tuple[ErrorCode, ShareGroupOffset]:
        return self.shard.read(key, leader_epoch)

    async def write(self, key: ShareKey, data: WriteState) -> ErrorCode:
        await asyncio.sleep(0)
        if self.failing:
            return self.failing
        self.writes += 1
        return self.shard.write(key, data)[0]

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> ErrorCode:
        self.shard.initialize(key, state_epoch, start_offset)
        return ErrorCode.NONE

    async def delete(self, key: ShareKey) -> ErrorCode:
        self.shard.delete(key)
        return ErrorCode.NONE


def _service(store: ShardStore) -> ShareGroupService:
    configs = {"share.auto.offset.reset": "earliest"}
    return ShareGroupService(
        ShareSettings(), ManualClock(), SeededIds(1), lambda key: None, lambda g: configs, store
    )


def test_acknowledgements_are_durable_and_a_failed_write_brings_the_records_back() -> None:
    async def run() -> None:
        store = ShardStore()
        service = _service(store)
        error, sp = await service.share_partition("g", "t", 0, 0, 100, TOPIC_ID, 3)
        assert error == ErrorCode.NONE and sp is not None
        assert store.shard.states[("g", TOPIC_ID, 0)].start_offset == 0  # written at once
        sp.acquire("m", 9, 10, 0)
        ack = await service.acknowledge("g", "m", "t", 0, [(0, 4, [ACCEPT])], TOPIC_ID)
        assert ack == ErrorCode.NONE
        assert store.shard.states[("g", TOPIC_ID, 0)].start_offset == 5

        # Concurrent acknowledgements share writes: never more writes than requests.
        before = store.writes
        results = await asyncio.gather(
            service.acknowledge("g", "m", "t", 0, [(5, 5, [ACCEPT])], TOPIC_ID),
            service.acknowledge("g", "m", "t", 0, [(6, 6, [ACCEPT])], TOPIC_ID),
            service.acknowledge("g", "m", "t", 0, [(7, 7, [RELEASE])], TOPIC_ID),
        )
        assert results == [ErrorCode.NONE] * 3
        assert store.writes - before <= 2
        assert store.shard.states[("g", TOPIC_ID, 0)].start_offset == 7

        store.failing = ErrorCode.COORDINATOR_NOT_AVAILABLE
        failed = await service.acknowledge("g", "m", "t", 0, [(8, 9, [ACCEPT])], TOPIC_ID)
        assert failed == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert KEY not in service.partitions  # dropped: what is durable is in charge
        store.failing = ErrorCode.NONE
        error, again = await service.share_partition("g", "t", 0, 0, 100, TOPIC_ID, 3)
        assert again is not None and again.start_offset == 7
        assert again.state_of(7) == (RecordState.AVAILABLE, 1)  # released before
        assert again.state_of(8) == (RecordState.AVAILABLE, 1)  # its accept was not written
        taken = again.acquire("n", 20, 100, 0)
        assert taken[0].first_offset == 7

    asyncio.run(run())


def test_a_new_leader_epoch_reads_again() -> None:
    async def run() -> None:
        store = ShardStore()
        service = _service(store)
        _, sp = await service.share_partition("g", "t", 0, 0, 100, TOPIC_ID, 1)
        assert sp is not None
        sp.acquire("m", 3, 10, 0)
        await service.acknowledge("g", "m", "t", 0, [(0, 1, [ACCEPT])], TOPIC_ID)
        _, same = await service.share_partition("g", "t", 0, 0, 100, TOPIC_ID, 1)
        assert same is sp
        _, moved = await service.share_partition("g", "t", 0, 0, 100, TOPIC_ID, 2)
        assert moved is not sp and moved is not None and moved.start_offset == 2
        # The old leader epoch is fenced from now on.
        old = WriteState(0, 1, 0, ())
        assert store.shard.write(("g", TOPIC_ID, 0), old)[0] == ErrorCode.FENCED_LEADER_EPOCH

    asyncio.run(run())


def test_a_deposed_leader_is_told_to_look_again() -> None:
    async def run() -> None:
        store = ShardStore()
        store.shard.write(("g", TOPIC_ID, 0), WriteState(0, 7, 0, ()))  # leader epoch 7
        error, sp = await _service(store).share_partition("g", "t", 0, 0, 10, TOPIC_ID, 6)
        assert (error, sp) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, None)

    asyncio.run(run())


def test_alter_on_the_coordinator_fences_a_leader_holding_the_old_state() -> None:
    """AlterShareGroupOffsets starts a new state epoch: the leader's next write of the old
    epoch is FENCED_STATE_EPOCH, it drops its share-partition and reads the new start."""

    async def run() -> None:
        store = ShardStore()
        leader, coordinator = _service(store), _service(store)
        _, sp = await leader.share_partition("g", "t", 0, 0, 100, TOPIC_ID, 1)
        assert sp is not None
        taken = sp.acquire("m", 9, 10, now_ms=0)
        assert taken
        assert not await coordinator.alter_start_offset("g", "t", 0, 50, TOPIC_ID)
        error, durable = await coordinator.read_offset("g", "t", 0, TOPIC_ID)
        assert (error, durable is not None and durable.start_offset) == (ErrorCode.NONE, 50)
        error = await leader.acknowledge("g", "m", "t", 0, [(0, 9, [ACCEPT])], TOPIC_ID)
        assert error == ErrorCode.FENCED_STATE_EPOCH
        _, again = await leader.share_partition("g", "t", 0, 0, 100, TOPIC_ID, 1)
        assert again is not None and again.fetch_offset() == 50
        assert await coordinator.delete_offsets("g", "t", [0], TOPIC_ID) == (ErrorCode.NONE, True)
        assert await coordinator.read_offset("g", "t", 0, TOPIC_ID) == (ErrorCode.NONE, None)

    asyncio.run(run())


def test_a_new_session_reads_an_idle_share_partition_again_after_an_alter() -> None:
    """A leader that never writes again (nothing acquired) still sees the altered start
    once a member opens a session; one holding acquired records keeps them."""

    async def run() -> None:
        store = ShardStore()
        leader, coordinator = _service(store), _service(store)
        _, idle = await leader.share_partition("g", "t", 0, 0, 100, TOPIC_ID, 1)
        _, busy = await leader.share_partition("g", "t", 1, 0, 100, TOPIC_ID, 1)
        assert idle is not None and busy is not None and busy.acquire("m", 4, 10, now_ms=0)
        for partition in (0, 1):
            assert not await coordinator.alter_start_offset("g", "t", partition, 30, TOPIC_ID)
        leader.refresh("g", [("t", 0), ("t", 1)])
        _, again = await leader.share_partition("g", "t", 0, 0, 100, TOPIC_ID, 1)
        _, kept = await leader.share_partition("g", "t", 1, 0, 100, TOPIC_ID, 1)
        assert again is not None and again.fetch_offset() == 30
        assert kept is busy

    asyncio.run(run())
