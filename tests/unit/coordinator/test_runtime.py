"""The coordinator runtime over a real log: writes committed before answers, a failed
write reverts the shard and fails its requests, loading, and shard ownership."""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

import moldau.storage.segment as segment_module
from moldau.clock import ManualScheduler
from moldau.config.topic import LogConfig
from moldau.coordinator.group import GroupConfig, OffsetCommit
from moldau.coordinator.group.service import GroupCoordinatorService
from moldau.metadata.image import MetadataImage, PartitionImage, TopicImage
from moldau.metadata.publisher import MetadataPublisher
from moldau.metadata.topics import OFFSETS_TOPIC
from moldau.protocol.errors import ErrorCode
from moldau.records.record import build_batch
from moldau.replication.replica_manager import AppendOrigin, ReplicaManager
from moldau.storage.log_manager import LogManager

from .conftest import SUB

NODE = 1


def image(leader: int = NODE, epoch: int = 0) -> MetadataImage:
    part = PartitionImage(0, (NODE,), (NODE,), leader, epoch, epoch)
    topic = TopicImage(OFFSETS_TOPIC, b"o" * 16, {0: part}, {"cleanup.policy": "compact"})
    return MetadataImage(
        topics={OFFSETS_TOPIC: topic}, topics_by_id={topic.topic_id: OFFSETS_TOPIC}
    )


class Node:
    """One broker's replica manager and group coordinator over ``data`` (no network)."""

    def __init__(self, data: Path, config: GroupConfig | None = None) -> None:
        self.scheduler = ManualScheduler()
        self.scheduler.clock.advance(1_700_000_000_000)
        self.logs = LogManager([data], {})
        self.rm = ReplicaManager(NODE, self.logs, self.scheduler, lambda t: LogConfig())
        self.groups = GroupCoordinatorService(
            config or GroupConfig(group_initial_rebalance_delay_ms=0),
            1,
            self.rm,
            self.scheduler,
            _noop,
        )
        self.publisher = MetadataPublisher(NODE)
        self.publisher.add_listener(self.rm)
        self.publisher.add_listener(self.groups.runtime)

    async def start(self, img: MetadataImage | None = None) -> None:
        self.publisher.publish(img or image())
        await self.groups.runtime.wait_loaded()

    def records(self) -> bytes:
        log = self.logs.get_log(OFFSETS_TOPIC, 0)
        assert log is not None
        return log.read_bytes(0, 1 << 20)


async def _noop() -> None:
    return None


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


def commit(node: Node, offset: int, group: str = "g") -> dict:
    return node.groups.commit_offsets(
        group,
        [OffsetCommit("t", 0, offset)],
        member_id="",
        generation_id=-1,
        group_instance_id=None,
    )


def committed(node: Node, group: str = "g") -> int:
    (o,) = node.groups.fetch_offsets(group, [("t", 0)])
    return o.offset


def test_commit_is_written_and_reloaded(tmp_path: Path) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        await node.start()
        assert await commit(node, 5) == {("t", 0): ErrorCode.NONE}
        assert committed(node) == 5
        node.logs.shutdown()
        again = Node(tmp_path)
        again.logs.load_logs()
        await again.start()
        assert committed(again) == 5

    run(test)


def test_failed_write_reverts_the_shard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        await node.start()
        await commit(node, 5)
        size = len(node.records())

        def disk_full(fd: int, data: Any) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(segment_module, "write_all", disk_full)
        # The storage error reaches the client as NOT_COORDINATOR (it will look again).
        assert await commit(node, 9) == {("t", 0): ErrorCode.NOT_COORDINATOR}
        assert committed(node) == 5  # the in-memory commit was undone
        assert len(node.records()) == size  # and nothing half-written stays in the log
        monkeypatch.undo()
        assert await commit(node, 9) == {("t", 0): ErrorCode.NONE}
        assert committed(node) == 9

    run(test)


def test_failed_sync_write_answers_the_parked_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        await node.start()
        join = join_args()
        joined_ = await joined(node, join)
        assert joined_.error == ErrorCode.NONE
        me = joined_.member_id
        sync = dict(
            generation_id=joined_.generation_id,
            member_id=me,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments={me: b"assignment"},
        )
        monkeypatch.setattr(
            segment_module, "write_all", lambda fd, data: (_ for _ in ()).throw(OSError(28, "full"))
        )
        # The leader's SyncGroup stores the group's assignment: that write fails.
        result = await node.groups.sync("g", **sync)
        assert result.error == ErrorCode.NOT_COORDINATOR
        assert node.groups.describe_group("g").state == "CompletingRebalance"  # undone
        monkeypatch.undo()
        result = await node.groups.sync("g", **sync)
        assert (result.error, result.assignment) == (ErrorCode.NONE, b"assignment")
        assert node.groups.describe_group("g").state == "Stable"

    run(test)


def join_args(rebalance_timeout_ms: int = 10_000) -> dict:
    """A JoinGroup's arguments for a new dynamic member (no member id)."""
    return dict(
        member_id="",
        group_instance_id=None,
        client_id="c",
        client_host="/127.0.0.1",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=rebalance_timeout_ms,
        protocol_type="consumer",
        protocols=[("range", SUB)],
        require_known_member_id=False,
    )


async def joined(node: Node, join: dict) -> Any:
    """A JoinGroup, with the clock moved on so the join phase can end."""
    task = asyncio.ensure_future(node.groups.join("g", **join))
    for _ in range(50):
        await asyncio.sleep(0)
        node.scheduler.advance(1_000)
        if task.done():
            break
    return await asyncio.wait_for(task, 5)


def test_undecodable_records_are_skipped_on_load(tmp_path: Path) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        await node.start()
        await commit(node, 3)
        garbage = bytearray(build_batch([(b"\x00\x01\x00", b"\x7f\x7f")]))
        result = node.rm.append_to_leader(
            (OFFSETS_TOPIC, 0), garbage, origin=AppendOrigin.COORDINATOR
        )
        assert result.error == ErrorCode.NONE
        await commit(node, 4, group="h")
        node.logs.shutdown()
        again = Node(tmp_path)
        again.logs.load_logs()
        await again.start()
        assert committed(again) == 3 and committed(again, "h") == 4

    run(test)


def test_shard_ownership_follows_leadership(tmp_path: Path) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        await node.start()
        await commit(node, 1)
        node.publisher.publish(image(leader=2, epoch=1))  # another broker leads it now
        assert await commit(node, 2) == {("t", 0): ErrorCode.NOT_COORDINATOR}
        node.publisher.publish(image(leader=NODE, epoch=2))
        assert await commit(node, 2) == {("t", 0): ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
        await node.groups.runtime.wait_loaded()
        assert committed(node) == 1
        assert await commit(node, 2) == {("t", 0): ErrorCode.NONE}

    run(test)


def test_a_parked_join_is_answered_when_the_shard_moves(tmp_path: Path) -> None:
    """A JoinGroup waiting for the other members to rejoin gets NOT_COORDINATOR as soon as
    this node stops leading the group's partition (found by the whole-cluster restart
    fault test: the consumer otherwise waits out its rebalance timeout)."""

    async def test() -> None:
        node = Node(tmp_path)
        await node.start()
        join = join_args(rebalance_timeout_ms=300_000)
        assert (await joined(node, join)).error == ErrorCode.NONE
        second = asyncio.ensure_future(node.groups.join("g", **join))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not second.done()  # waits for the first member to rejoin
        node.publisher.publish(image(leader=2, epoch=1))
        result = await asyncio.wait_for(second, 5)
        assert result.error == ErrorCode.NOT_COORDINATOR

    run(test)


def test_clients_cannot_write_the_offsets_topic(tmp_path: Path) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        await node.start()
        batch = bytearray(build_batch([(b"k", b"v")]))
        result = node.rm.append_to_leader((OFFSETS_TOPIC, 0), batch, origin=AppendOrigin.CLIENT)
        assert result.error == ErrorCode.INVALID_TOPIC_EXCEPTION

    run(test)


def test_group_writes_wait_offsets_commit_timeout_ms(tmp_path: Path) -> None:
    """``offsets.commit.timeout.ms``: a commit whose replica never fetches times out then,
    not before."""

    async def test() -> None:
        node = Node(tmp_path, GroupConfig(offsets_commit_timeout_ms=1_234))
        part = PartitionImage(0, (NODE, 2), (NODE, 2), NODE, 0, 0)  # replica 2 never fetches
        topic = TopicImage(OFFSETS_TOPIC, b"o" * 16, {0: part}, {"cleanup.policy": "compact"})
        await node.start(
            MetadataImage(
                topics={OFFSETS_TOPIC: topic}, topics_by_id={topic.topic_id: OFFSETS_TOPIC}
            )
        )
        pending = asyncio.ensure_future(commit(node, 5))
        for _ in range(20):
            await asyncio.sleep(0)
        node.scheduler.advance(1_233)
        for _ in range(20):
            await asyncio.sleep(0)
        assert not pending.done()
        node.scheduler.advance(1)
        result = await asyncio.wait_for(pending, 10)
        # Kafka answers a timed-out group write with COORDINATOR_NOT_AVAILABLE.
        assert result == {("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}

    run(test)
