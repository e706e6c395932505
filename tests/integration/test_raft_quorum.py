"""Three KRaft voters (and a broker-like observer) as real RaftManagers over loopback
sockets and real files: election, commit on every replica, failover without losing
committed records, catch-up after a restart, and catch-up from a snapshot (WE-25)."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from moldau.metadata.records import MetadataRecord, TopicRecord
from moldau.metadata.topics import METADATA_TOPIC
from moldau.protocol.client import NetworkClient
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages import describe_quorum_request as dq_req
from moldau.raft.config import MetadataLogConfig
from moldau.raft.driver import METADATA_DIR
from moldau.raft.file_log import SNAPSHOT_SUFFIX
from tests.integration.raft_helpers import Node, RaftCluster, raft_cluster

FAILOVER_LIMIT_S = 8.0  # election timeout 1 s, fetch timeout 2 s: Kafka's defaults


def topic(i: int) -> TopicRecord:
    return TopicRecord(name=f"topic-{i}", topic_id=(i + 1).to_bytes(16, "big"))


def run(test: Callable[[], Awaitable[None]], timeout_s: float = 60) -> None:
    asyncio.run(asyncio.wait_for(test(), timeout_s))


async def commit(node: Node, *records: MetadataRecord) -> int:
    offset = node.manager.append(list(records))
    await node.manager.wait_committed(offset)
    return offset


def names(node: Node) -> list[str]:
    return [r.name for r in node.listener.state() if isinstance(r, TopicRecord)]


async def all_have(cluster: RaftCluster, expected: list[str], timeout_s: float = 10) -> None:
    await cluster.wait_for(lambda: all(names(n) == expected for n in cluster.running()), timeout_s)


def test_elect_commit_fail_over_and_catch_up(tmp_path: Path) -> None:
    async def test() -> None:
        async with raft_cluster(tmp_path, 3, observers=1) as cluster:
            leader = await cluster.wait_for_leader()
            assert leader.node_id in cluster.voter_ids
            first_epoch = leader.manager.leader()[1]
            for i in range(20):
                await commit(leader, topic(i))
            expected = [f"topic-{i}" for i in range(20)]
            await all_have(cluster, expected)
            observer = cluster.nodes[4]
            assert observer.listener.leaders[-1] == (leader.node_id, first_epoch)
            commit_offsets = [offset for _, offset in leader.listener.commits]
            for node in cluster.running():
                assert [o for _, o in node.listener.commits] == commit_offsets

            cluster.stop_node(leader.node_id)
            started = time.monotonic()
            successor = await cluster.wait_for_leader(FAILOVER_LIMIT_S)
            elapsed = time.monotonic() - started
            epoch = successor.manager.leader()[1]
            assert successor.node_id != leader.node_id and epoch > first_epoch
            assert names(successor) == expected, "a new leader holds every committed record"
            print(f"failover: node {successor.node_id} leads epoch {epoch} after {elapsed:.2f}s")
            for i in range(20, 30):
                await commit(successor, topic(i))
            expected += [f"topic-{i}" for i in range(20, 30)]
            await all_have(cluster, expected)

            returning = await cluster.start_node(leader.node_id)
            await all_have(cluster, expected)
            assert returning.manager.leader() == (successor.node_id, epoch)
            assert not returning.manager.is_leader
            await commit(successor, topic(30))
            await all_have(cluster, [*expected, "topic-30"])

    run(test)


def test_a_leader_cut_off_from_its_quorum_answers_not_controller(tmp_path: Path) -> None:
    async def test() -> None:
        async with raft_cluster(tmp_path, 3, fetch_timeout_ms=1000) as cluster:
            leader = await cluster.wait_for_leader()
            await commit(leader, topic(0))
            for node in list(cluster.running()):
                if node is not leader:
                    cluster.stop_node(node.node_id)
            offset = leader.manager.append([topic(1)])
            with pytest.raises(KafkaError) as error:
                await asyncio.wait_for(leader.manager.wait_committed(offset), 10)
            assert error.value.code == ErrorCode.NOT_CONTROLLER
            assert not leader.manager.is_leader
            with pytest.raises(KafkaError):
                leader.manager.append([topic(2)])

    run(test)


def test_describe_quorum_over_the_wire(tmp_path: Path) -> None:
    async def test() -> None:
        async with raft_cluster(tmp_path, 3, observers=1) as cluster:
            leader = await cluster.wait_for_leader()
            await commit(leader, topic(0))
            await cluster.wait_for(
                lambda: all(n.manager.committed_offset >= 1 for n in cluster.running())
            )
            assert cluster.config is not None
            client = NetworkClient("describe")
            try:
                request = dq_req.DescribeQuorumRequest(
                    topics=[dq_req.TopicData(METADATA_TOPIC, [dq_req.PartitionData(0)])]
                )
                for node in cluster.running():
                    if node.node_id not in cluster.voter_ids:
                        continue
                    address = cluster.config.voters[node.node_id]
                    response = await client.send((address.host, address.port), request, 2)
                    p = response.topics[0].partitions[0]
                    if node is leader:
                        assert p.error_code == 0 and p.leader_id == leader.node_id
                        assert p.high_watermark == 2
                        assert sorted(v.replica_id for v in p.current_voters) == [1, 2, 3]
                        assert [o.replica_id for o in p.observers] == [4]
                    else:
                        assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            finally:
                client.close()

    run(test)


def test_restart_after_the_log_was_snapshotted_catches_up_from_the_snapshot(
    tmp_path: Path,
) -> None:
    """WE-25: the leader snapshotted and cut its log past where a stopped node was; the node
    (and a brand-new one) fetches the snapshot, loads it, then replicates normally."""
    small = MetadataLogConfig(segment_bytes=4096, max_record_bytes_between_snapshots=2048)

    async def test() -> None:
        async with raft_cluster(tmp_path, 3, observers=1, log_config=small) as cluster:
            leader = await cluster.wait_for_leader()
            await commit(leader, topic(0))
            await all_have(cluster, ["topic-0"])
            lagging = next(n for n in cluster.running() if n.node_id not in (leader.node_id, 4))
            stopped_at = lagging.manager.committed_offset
            cluster.stop_node(lagging.node_id)
            newcomer = cluster.stop_node(4)
            shutil.rmtree(newcomer.data_dir)
            for i in range(1, 150):
                await commit(leader, topic(i))
            expected = [f"topic-{i}" for i in range(150)]
            directory = leader.data_dir / METADATA_DIR
            await cluster.wait_for(lambda: len(list(directory.glob("*" + SNAPSHOT_SUFFIX))) == 2)
            assert not (directory / "00000000000000000000.log").exists(), "the log was cut"

            back = await cluster.start_node(lagging.node_id)
            new = await cluster.start_node(4)
            await all_have(cluster, expected)
            for node in (back, new):
                assert len(node.listener.snapshots) == 1, node.node_id
                image = node.listener.snapshots[0]
                last_offset = image.offset
                assert last_offset > stopped_at and len(image.topics) == last_offset, (
                    "the snapshot is past what the node had; one topic per offset after the "
                    "LeaderChange at 0"
                )
                assert node.manager.image.topics == leader.manager.image.topics
                stem = f"{last_offset + 1:020d}-"
                assert any(
                    p.name.startswith(stem)
                    for p in (node.data_dir / METADATA_DIR).glob("*.checkpoint")
                ), "the downloaded snapshot is kept under the leader's snapshot id"
            await commit(leader, topic(150))
            await all_have(cluster, [*expected, "topic-150"])

    run(test)
