"""The quorum controller's single writer: decisions against the latest state, answers on
commit, and a failed append that leaves nothing behind."""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Sequence
from pathlib import Path

import pytest

from moldau.clock import AsyncioScheduler
from moldau.controller.apis import ControllerApis
from moldau.controller.context import ControllerContext
from moldau.controller.quorum_controller import QuorumController
from moldau.controller.topic_control import TopicControl
from moldau.metadata.records import MetadataRecord, RegisterBrokerRecord
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.client import NetworkClient
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from moldau.raft import QuorumConfig, VoterAddress
from moldau.raft.driver import RaftManager
from tests.integration.raft_helpers import RecordingListener


def create(*names: str, partitions: int = 1) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=[
            CreatableTopic(name=n, num_partitions=partitions, replication_factor=-1) for n in names
        ]
    )


def quorum_of_one(path: Path) -> RaftManager:
    """A single node's metadata log: a Raft quorum of one on real files."""
    return RaftManager(
        1,
        "cluster",
        QuorumConfig(voters={1: VoterAddress("localhost", 0)}),
        path,
        NetworkClient("test"),
        AsyncioScheduler(),
        RecordingListener(),
    )


async def controller(path: Path) -> tuple[ControllerApis, RaftManager, list[int]]:
    raft = quorum_of_one(path)
    await raft.start()
    if not raft.image.brokers:
        await raft.wait_committed(raft.append([RegisterBrokerRecord(broker_id=1, fenced=False)]))
    quorum = QuorumController(raft, raft.image)
    raft.set_commit_callback(quorum.handle_commit)
    committed: list[int] = []
    quorum.add_commit_listener(lambda records, offset: committed.append(offset))
    return ControllerApis(ControllerContext(quorum, TopicControl(1, {}, 1))), raft, committed


def test_concurrent_creates_of_one_name_let_exactly_one_win(tmp_path: Path) -> None:
    async def test() -> None:
        apis, raft, committed = await controller(tmp_path)
        responses = await asyncio.gather(
            *(apis.handle(ApiKey.CREATE_TOPICS, 7, create("t")) for _ in range(5))
        )
        codes = sorted(r.topics[0].error_code for r in responses)
        assert codes == [ErrorCode.NONE] + [ErrorCode.TOPIC_ALREADY_EXISTS] * 4
        assert len(committed) == 1
        raft.close()
        # What the one winner committed is what a restart replays.
        again = quorum_of_one(tmp_path)
        await again.start()
        assert list(again.image.topics) == ["t"]
        again.close()

    asyncio.run(test())


def test_answers_carry_what_was_committed(tmp_path: Path) -> None:
    async def test() -> None:
        apis, raft, committed = await controller(tmp_path)
        response = await apis.handle(ApiKey.CREATE_TOPICS, 7, create("a", "b", partitions=3))
        assert [(t.name, t.error_code, t.num_partitions) for t in response.topics] == [
            ("a", 0, 3),
            ("b", 0, 3),
        ]
        assert apis.context.quorum.committed.topics.keys() == {"a", "b"}
        assert committed == [apis.context.quorum.committed.offset]
        raft.close()

    asyncio.run(test())


class FailingLog:
    """A metadata log whose disk is full."""

    def append(self, records: Sequence[MetadataRecord]) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    async def wait_committed(self, offset: int) -> None:
        raise AssertionError("nothing was appended")


def test_a_failed_append_reverts_the_latest_state(tmp_path: Path) -> None:
    async def test() -> None:
        apis, raft, _ = await controller(tmp_path)
        await apis.handle(ApiKey.CREATE_TOPICS, 7, create("kept"))
        quorum = apis.context.quorum
        quorum.log_writer = FailingLog()
        with pytest.raises(KafkaError) as e:
            await apis.handle(ApiKey.CREATE_TOPICS, 7, create("lost"))
        assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR
        assert "lost" not in quorum.latest.topics and "kept" in quorum.latest.topics
        quorum.log_writer = raft
        response = await apis.handle(ApiKey.CREATE_TOPICS, 7, create("lost"))
        assert response.topics[0].error_code == ErrorCode.NONE
        raft.close()

    asyncio.run(test())
