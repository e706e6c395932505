"""RaftManager on one node: a quorum of one on real files (its own leader at once), and a
voter whose peers are unreachable (never leader). Multi-node runs are in
tests/integration/test_raft_quorum.py."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from moldau.clock import AsyncioScheduler
from moldau.metadata.records import MetadataRecord, TopicRecord
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.client import NetworkClient
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages import describe_quorum_request as dq_req
from moldau.protocol.messages import vote_request as v_req
from moldau.raft import QuorumConfig, VoterAddress
from moldau.raft.config import MetadataLogConfig
from moldau.raft.driver import METADATA_DIR, RaftManager
from moldau.raft.file_log import SNAPSHOT_SUFFIX
from tests.integration.raft_helpers import RecordingListener
from tests.unit.raft.test_file_log import write_quorum_of_one_log


def topic(i: int) -> TopicRecord:
    return TopicRecord(name=f"topic-{i}", topic_id=i.to_bytes(16, "big"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 30))


def manager(
    tmp_path: Path,
    listener: RecordingListener,
    voters: int = 1,
    log_config: MetadataLogConfig | None = None,
) -> RaftManager:
    config = QuorumConfig(
        voters={v: VoterAddress("127.0.0.1", free_port()) for v in range(1, voters + 1)}
    )
    return RaftManager(
        1,
        "cluster",
        config,
        tmp_path,
        NetworkClient("test", request_timeout_ms=1000),
        AsyncioScheduler(),
        listener,
        log_config=log_config,
    )


async def commit(raft: RaftManager, *records: MetadataRecord) -> int:
    offset = raft.append(list(records))
    await raft.wait_committed(offset)
    return offset


def topics_of(listener: RecordingListener) -> list[str]:
    return [r.name for r in listener.state() if isinstance(r, TopicRecord)]


def test_a_quorum_of_one_takes_over_a_log_of_earlier_releases(tmp_path: Path) -> None:
    write_quorum_of_one_log(tmp_path / METADATA_DIR, [[topic(0), topic(1)], [topic(2)]])

    async def test() -> None:
        listener = RecordingListener()
        raft = manager(tmp_path, listener)
        await raft.start()
        assert raft.is_leader and raft.leader() == (1, 1)
        assert listener.commits == [([topic(0), topic(1), topic(2)], 2)], (
            "the log found at start is handed over as one run"
        )
        assert listener.leaders == [(1, 1)], "leadership is announced after the old log"
        callback: list[int] = []
        raft.set_commit_callback(lambda records, offset: callback.append(offset))
        assert await commit(raft, topic(3)) == 4, "offset 3 is the LeaderChange"
        assert callback == [4] and listener.commits[-1] == ([topic(3)], 4)
        assert sorted(raft.image.topics) == ["topic-0", "topic-1", "topic-2", "topic-3"]
        raft.close()

        again = RecordingListener()
        raft = manager(tmp_path, again)
        await raft.start()
        assert raft.leader() == (1, 2)
        assert topics_of(again) == ["topic-0", "topic-1", "topic-2", "topic-3"]
        raft.close()

    run(test)


def test_snapshots_bound_the_log_and_a_restart_starts_from_the_latest(tmp_path: Path) -> None:
    config = MetadataLogConfig(segment_bytes=2048, max_record_bytes_between_snapshots=1500)

    async def test() -> None:
        listener = RecordingListener()
        raft = manager(tmp_path, listener, log_config=config)
        await raft.start()
        for i in range(60):
            await commit(raft, topic(i))
            await asyncio.sleep(0)  # a quorum of one commits without yielding
        await asyncio.sleep(0.2)  # the last snapshot is written off the loop
        directory = tmp_path / METADATA_DIR
        snapshots = sorted(directory.glob("*" + SNAPSHOT_SUFFIX))
        assert 1 <= len(snapshots) <= 2, "older snapshots go as the log is cut"
        assert raft.client.state.high_watermark == 61
        log_start = int(sorted(directory.glob("*.log"))[0].name.split(".")[0])
        assert log_start > 0, "segments before the previous snapshot are deleted"
        image = raft.image
        raft.close()

        again = RecordingListener()
        raft = manager(tmp_path, again, log_config=config)
        await raft.start()
        while raft.committed_offset < 61:  # a snapshot is decoded in a worker thread
            await asyncio.sleep(0.01)
        assert len(again.snapshots) == 1
        last_offset = again.snapshots[0].offset
        latest = int(snapshots[-1].name.split("-")[0])
        assert last_offset == latest - 1
        assert again.snapshots[0].cluster_id == "cluster"
        assert all(last > last_offset for _, last in again.commits)
        assert topics_of(again) == [f"topic-{i}" for i in range(60)]
        assert raft.image.topics == image.topics
        await commit(raft, topic(60))
        assert topics_of(again)[-1] == "topic-60"
        raft.close()

    run(test)


def test_a_quiet_log_is_snapshotted_once_the_interval_passed(tmp_path: Path) -> None:
    """metadata.log.max.snapshot.interval.ms: one record committed, then nothing: a
    snapshot is written once the interval passed (its timer, no later commit needed)."""
    config = MetadataLogConfig(max_snapshot_interval_ms=300)

    async def test() -> None:
        raft = manager(tmp_path, RecordingListener(), log_config=config)
        await raft.start()
        await commit(raft, topic(0))
        directory = tmp_path / METADATA_DIR
        while not list(directory.glob("*" + SNAPSHOT_SUFFIX)):
            await asyncio.sleep(0.02)
        [snapshot] = directory.glob("*" + SNAPSHOT_SUFFIX)
        assert int(snapshot.name.split("-")[0]) == raft.client.state.high_watermark
        await asyncio.sleep(0.6)  # nothing new committed: no second snapshot
        assert len(list(directory.glob("*" + SNAPSHOT_SUFFIX))) == 1
        raft.close()

    run(test)


def test_a_voter_without_a_quorum_never_writes(tmp_path: Path) -> None:
    async def test() -> None:
        listener = RecordingListener()
        raft = manager(tmp_path, listener, voters=3)
        await raft.start()
        await asyncio.sleep(0.1)
        assert not raft.is_leader
        with pytest.raises(KafkaError) as error:
            raft.append([topic(1)])
        assert error.value.code == ErrorCode.NOT_CONTROLLER
        with pytest.raises(KafkaError):
            await raft.wait_committed(0)
        quorum = await raft.handle(
            ApiKey.DESCRIBE_QUORUM,
            1,
            dq_req.DescribeQuorumRequest(
                topics=[dq_req.TopicData("__cluster_metadata", [dq_req.PartitionData(0)])]
            ),
        )
        assert quorum.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        raft.close()

    run(test)


def vote(
    candidate: int, epoch: int, cluster_id: str = "cluster", topic: str = "__cluster_metadata"
) -> Any:
    return v_req.VoteRequest(
        cluster_id=cluster_id,
        voter_id=1,
        topics=[
            v_req.TopicData(
                topic,
                [
                    v_req.PartitionData(
                        replica_epoch=epoch,
                        replica_id=candidate,
                        last_offset_epoch=0,
                        last_offset=0,
                    )
                ],
            )
        ],
    )


def test_inbound_votes_are_answered_and_bad_ones_refused(tmp_path: Path) -> None:
    async def test() -> None:
        raft = manager(tmp_path, RecordingListener(), voters=3)
        await raft.start()
        granted = await raft.handle(ApiKey.VOTE, 2, vote(2, 5))
        p = granted.topics[0].partitions[0]
        assert (granted.error_code, p.error_code, p.vote_granted, p.leader_epoch) == (0, 0, True, 5)
        again = await raft.handle(ApiKey.VOTE, 2, vote(3, 5))
        assert not again.topics[0].partitions[0].vote_granted, "one vote per epoch"
        stranger = await raft.handle(ApiKey.VOTE, 2, vote(2, 6, cluster_id="other"))
        assert stranger.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID and stranger.topics == []
        wrong = await raft.handle(ApiKey.VOTE, 2, vote(2, 6, topic="orders"))
        assert wrong.error_code == ErrorCode.INVALID_REQUEST
        raft.close()
        late = await raft.handle(ApiKey.VOTE, 2, vote(2, 7))
        assert late.error_code == ErrorCode.BROKER_NOT_AVAILABLE

        restarted = manager(tmp_path, RecordingListener(), voters=3)
        await restarted.start()
        other = await restarted.handle(ApiKey.VOTE, 2, vote(3, 5))
        assert not other.topics[0].partitions[0].vote_granted, "the vote survived the restart"
        restarted.close()

    run(test)
