"""The share-group service over a share coordinator's pure state: a share-partition is
read from it, every acknowledgement is answered only once written, and a failed write
answers the error and leaves what is durable in charge (the records come back)."""

from __future__ import annotations

import asyncio

from moldau.clock import ManualClock
from moldau.coordinator.effects import CoordinatorRecord
from moldau.coordinator.share.group import Heartbeat, ShareGroup
from moldau.coordinator.share.partition import RecordState
from moldau.coordinator.share.service import ShareGroupService, ShareSettings
from moldau.coordinator.share_state.shard import (
    ShareCoordinatorShard,
    ShareGroupOffset,
    ShareKey,
    WriteState,
)
from moldau.ids import SeededIds
from moldau.protocol.coordinator_record_serde import GROUP_RECORD_TYPES, deserialize
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


def _initialized(store: ShardStore, partitions: tuple[int, ...] = (0,)) -> None:
    """As the group coordinator does before a member is assigned the partitions."""
    for partition in partitions:
        store.shard.initialize(("g", TOPIC_ID, partition), 0, -1)


def _service(store: ShardStore) -> ShareGroupService:
    configs = {"share.auto.offset.reset": "earliest"}
    return ShareGroupService(
        ShareSettings(), ManualClock(), SeededIds(1), lambda key: None, lambda g: configs, store
    )


def test_acknowledgements_are_durable_and_a_failed_write_brings_the_records_back() -> None:
    async def run() -> None:
        store = ShardStore()
        _initialized(store)
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
        _initialized(store)
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
        _initialized(store)
        store.shard.write(("g", TOPIC_ID, 0), WriteState(0, 7, 0, ()))  # leader epoch 7
        error, sp = await _service(store).share_partition("g", "t", 0, 0, 10, TOPIC_ID, 6)
        assert (error, sp) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, None)

    asyncio.run(run())


def test_alter_on_the_coordinator_fences_a_leader_holding_the_old_state() -> None:
    """AlterShareGroupOffsets starts a new state epoch: the leader's next write of the old
    epoch is FENCED_STATE_EPOCH, it drops its share-partition and reads the new start."""

    async def run() -> None:
        store = ShardStore()
        _initialized(store)
        leader, coordinator = _service(store), _service(store)
        coordinator.coordinator.groups["g"] = ShareGroup("g")  # an empty share group
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
        _initialized(store, (0, 1))
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


def test_the_group_coordinator_initializes_state_and_deletes_it_deleting_first() -> None:
    """Kafka 4.1's ShareGroupStatePartitionMetadata: a heartbeat initializes the state
    of the partitions the group is assigned and records them initialized; Delete records
    the topic deleting, deletes the state, then forgets the topic; a leader on another
    node still holding records of a member that died cannot write the state back."""

    async def run() -> None:
        store = ShardStore()
        written: list[tuple[int, object, set[ShareKey]]] = []

        async def write_group(group_id: str, records: list[CoordinatorRecord]) -> ErrorCode:
            for r in records:
                record = deserialize(GROUP_RECORD_TYPES, r.key, r.value)
                written.append((record.record_type, record.value, set(store.shard.states)))
            return ErrorCode.NONE

        coordinator = ShareGroupService(
            ShareSettings(),
            ManualClock(),
            SeededIds(1),
            lambda key: None,
            lambda g: {"share.auto.offset.reset": "earliest"},
            store,
            write_group,
        )
        leader = _service(store)
        keys = {("g", TOPIC_ID, 0), ("g", TOPIC_ID, 1)}

        def topics(names: object) -> dict[str, tuple[bytes, int]]:
            return {"t": (TOPIC_ID, 2)}

        joined = await coordinator.heartbeat(Heartbeat("g", "m", 0, ("t",)), topics)
        assert joined.error == ErrorCode.NONE
        assert set(store.shard.states) == keys  # initialized before the member is answered
        assert all(store.shard.states[k].start_offset == -1 for k in keys)
        group = coordinator.coordinator.groups["g"]
        assert group.initialized == {TOPIC_ID: ("t", frozenset({0, 1}))}
        assert (group.initializing, group.deleting) == ({}, {})
        states = [v for kind, v, _ in written if kind == 15]
        assert [[t.partitions for t in v.initializing_topics] for v in states] == [[[0, 1]], []]
        assert [[t.partitions for t in v.initialized_topics] for v in states] == [[], [[0, 1]]]

        # The leader (another node) starts at share.auto.offset.reset; the member takes
        # records and dies; its session ends on the coordinator.
        _, sp = await leader.share_partition("g", "t", 0, 0, 100, TOPIC_ID, 1)
        assert sp is not None and sp.start_offset == 0 and sp.acquire("m", 5, 10, now_ms=0)
        await coordinator.heartbeat(Heartbeat("g", "m", -1), topics)
        # The group is empty; its state stays initialized.
        assert not group.members and group.initialized

        written.clear()
        assert await coordinator.delete_offsets("g", "t", [0, 1], TOPIC_ID) == (
            ErrorCode.NONE,
            True,
        )
        states = [(v, present) for kind, v, present in written if kind == 15]
        [(deleting, before_delete), (done, after_delete)] = states
        assert [(t.topic_id, t.topic_name) for t in deleting.deleting_topics] == [(TOPIC_ID, "t")]
        assert deleting.initialized_topics == [] and before_delete == keys
        assert (done.deleting_topics, done.initialized_topics, after_delete) == ([], [], set())
        assert (group.initialized, group.deleting) == ({}, {})

        # The leader's lock expires: its write is refused and nothing comes back.
        leader.clock.advance(60_000)  # type: ignore[attr-defined]
        leader.tick()
        await asyncio.sleep(0.01)
        assert store.shard.states == {}
        assert ("g", "t", 0) not in leader.partitions  # dropped: read again on next use
        assert await coordinator.delete_offsets("g", "t", [0, 1], TOPIC_ID) == (
            ErrorCode.NONE,
            False,
        )

        # A member joining again starts over at share.auto.offset.reset.
        await coordinator.heartbeat(Heartbeat("g", "n", 0, ("t",)), topics)
        assert set(store.shard.states) == keys
        _, again = await leader.share_partition("g", "t", 0, 0, 100, TOPIC_ID, 1)
        assert again is not None and again.start_offset == 0
        assert again.state_of(0) is None  # nothing in flight: the old acquisitions are gone

    asyncio.run(run())


def test_a_deleted_topic_is_forgotten_and_its_successor_initialized_afresh() -> None:
    """Kafka's maybeCleanupShareGroupState / maybeCleanupShareState: a deleted topic
    leaves the group's initialized topics and the share coordinator's state; the topic
    created again under its name (a new id) is initialized at the next heartbeat and its
    leader starts at share.auto.offset.reset, not where the old topic's state was."""

    async def run() -> None:
        store = ShardStore()
        written: list[object] = []

        async def write_group(group_id: str, records: list[CoordinatorRecord]) -> ErrorCode:
            for r in records:
                record = deserialize(GROUP_RECORD_TYPES, r.key, r.value)
                if record.record_type == 15:  # ShareGroupStatePartitionMetadata
                    written.append(record.value)
            return ErrorCode.NONE

        configs = {"share.auto.offset.reset": "latest"}
        service = ShareGroupService(
            ShareSettings(),
            ManualClock(),
            SeededIds(1),
            lambda key: None,
            lambda g: configs,
            store,
            write_group,
        )
        shapes = {"t": (TOPIC_ID, 1)}
        await service.heartbeat(Heartbeat("g", "m", 0, ("t",)), lambda names: shapes)
        group = service.coordinator.groups["g"]
        assert group.initialized == {TOPIC_ID: ("t", frozenset({0}))}
        _, old = await service.share_partition("g", "t", 0, 0, 40, TOPIC_ID, 1)
        assert old is not None and old.start_offset == 40  # latest: the high watermark
        other = ("other-group", b"o" * 16, 0)
        store.shard.initialize(other, 0, 7)

        written.clear()
        await service.on_topics_deleted({TOPIC_ID})
        cleanup = store.shard.remove_topics({TOPIC_ID})  # the share coordinator's side
        assert (group.initialized, group.initializing, group.deleting) == ({}, {}, {})
        [record] = written
        assert record.initialized_topics == []  # type: ignore[attr-defined]
        assert ("g", "t", 0) not in service.partitions
        assert set(store.shard.states) == {other}  # only the deleted topic's state went
        assert len(cleanup.records) == 2 and all(r.value is None for r in cleanup.records)

        new_id = b"n" * 16
        shapes["t"] = (new_id, 1)
        beat = await service.heartbeat(Heartbeat("g", "m", 1), lambda names: shapes)
        assert beat.error == ErrorCode.NONE and beat.assignment == {"t": (0,)}
        assert group.initialized == {new_id: ("t", frozenset({0}))}
        assert store.shard.states[("g", new_id, 0)].start_offset == -1
        _, fresh = await service.share_partition("g", "t", 0, 0, 3, new_id, 1)
        assert fresh is not None and fresh.start_offset == 3

    asyncio.run(run())


def test_a_topic_deleted_while_being_initialized_is_not_recorded_initialized() -> None:
    async def run() -> None:
        store = ShardStore()
        gate = asyncio.Event()
        initialize = store.initialize

        async def slow_initialize(key: ShareKey, state_epoch: int, start_offset: int) -> ErrorCode:
            await gate.wait()
            return await initialize(key, state_epoch, start_offset)

        store.initialize = slow_initialize  # type: ignore[method-assign]
        service = ShareGroupService(
            ShareSettings(), ManualClock(), SeededIds(1), lambda key: None, lambda g: {}, store
        )
        joining = asyncio.ensure_future(
            service.heartbeat(Heartbeat("g", "m", 0, ("t",)), lambda n: {"t": (TOPIC_ID, 1)})
        )
        await asyncio.sleep(0.01)
        group = service.coordinator.groups["g"]
        assert group.initializing == {TOPIC_ID: ("t", frozenset({0}))}
        await service.on_topics_deleted({TOPIC_ID})
        gate.set()
        await joining
        assert (group.initialized, group.initializing) == ({}, {})

    asyncio.run(run())


def test_a_leader_reading_state_never_initialized_tells_the_member_to_retry() -> None:
    """The share coordinator answers INVALID_REQUEST for state that does not exist; the
    leader holds nothing and answers COORDINATOR_NOT_AVAILABLE (retried by clients) until
    the group coordinator initializes it. Describe reads it as no information; Alter
    initializes it."""

    async def run() -> None:
        store = ShardStore()
        service = _service(store)
        error, sp = await service.share_partition("g", "t", 0, 0, 100, TOPIC_ID, 1)
        assert (error, sp) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)
        assert ("g", "t", 0) not in service.partitions and store.shard.states == {}
        assert store.writes == 0
        assert await service.read_offset("g", "t", 0, TOPIC_ID) == (ErrorCode.NONE, None)

        _initialized(store)
        error, sp = await service.share_partition("g", "t", 0, 0, 100, TOPIC_ID, 1)
        assert error == ErrorCode.NONE and sp is not None and sp.start_offset == 0

        other = ("g", TOPIC_ID, 1)
        assert await service.alter_start_offset("g", "t", 1, 42, TOPIC_ID) == ErrorCode.NONE
        assert (store.shard.states[other].start_offset, store.shard.states[other].state_epoch) == (
            42,
            1,
        )

    asyncio.run(run())
