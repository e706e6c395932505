"""A replica of a tiered partition that comes back after its peers copied and deleted the
segments it missed rejoins the ISR, with a log identical to the leader's where both hold
data: three nodes, RF 3, a shared ``file`` store; the replica is stopped cleanly, killed
(-9) as a follower, or killed (-9) as the leader; meanwhile the partition rolls, copies
and drops from the disks several segments past the replica's end, so it comes back through
KIP-405's follower path (OFFSET_MOVED_TO_TIERED_STORAGE, its state rebuilt from the remote
tier). Every acknowledged record is read back from offset 0."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from moldau.records.batch import scan_log_prefix
from moldau.storage.remote.metadata_records import REMOTE_LOG_METADATA_TOPIC
from moldau.testing.cluster import ClusterProcess
from tests.tiered.test_tiered_broker import TIERED, file_tier_configs, read_confluent, wait_for
from tests.tiered.test_tiered_s3 import produce_batches

pytestmark = pytest.mark.slow

REJOIN_TIMEOUT_S = 180.0  # generous: the machine is shared; the wait is on a condition
TIERED_CONFIGS = {k.replace(".", "_"): v for k, v in TIERED.items()}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    configs = file_tier_configs(tmp_path_factory.mktemp("remote"), 1)
    with ClusterProcess(3, configs=configs) as c:
        metadata_on_every_node(c)
        yield c


def metadata_on_every_node(c: ClusterProcess) -> None:
    """__remote_log_metadata waits for its 3 replicas (remote.log.metadata.topic.replication.factor)
    so that a kill leaves each of its partitions a leader."""
    c.wait_until(lambda: REMOTE_LOG_METADATA_TOPIC in c.describe()["topics"], timeout=60)
    for p in range(len(c.describe()["topics"][REMOTE_LOG_METADATA_TOPIC])):
        assert sorted(c.partition(REMOTE_LOG_METADATA_TOPIC, p)["replicas"]) == sorted(c.nodes)


def local_batches(c: ClusterProcess, node: int, topic: str) -> dict[int, bytes]:
    """The batches of ``topic-0`` on ``node``'s disk by base offset, as stored (leader
    epoch included). Segments deleted while being read are read again."""
    for _ in range(20):
        batches: dict[int, bytes] = {}
        try:
            for path in sorted(c.node(node).data_dir.rglob(f"{topic}-0/*.log")):
                data = path.read_bytes()
                for b in scan_log_prefix(data)[0]:
                    batches[b.base_offset] = data[b.position : b.position + b.size]
        except FileNotFoundError:
            continue
        return batches
    raise AssertionError(f"node {node}'s segments kept moving")


def local_start(c: ClusterProcess, node: int, topic: str) -> int:
    """The base offset of the first segment on ``node``'s disk (-1: none)."""
    bases = [int(p.name.split(".")[0]) for p in c.node(node).data_dir.rglob(f"{topic}-0/*.log")]
    return min(bases, default=-1)


def assert_same_local_log(c: ClusterProcess, topic: str, replica: int) -> None:
    """``replica`` reaches the leader's last batch (nothing is produced meanwhile) and
    holds, from where both logs have data, exactly the leader's batches."""
    leader = c.leader(topic)
    wait_for(
        lambda: (
            max(local_batches(c, replica, topic), default=-1)
            == max(local_batches(c, leader, topic), default=-2)
        ),
        f"replica {replica} to reach the leader's end",
    )
    mine, theirs = local_batches(c, replica, topic), local_batches(c, leader, topic)
    common = max(min(mine), min(theirs))
    assert {o: b for o, b in mine.items() if o >= common} == {
        o: b for o, b in theirs.items() if o >= common
    }, f"replica {replica} from {min(mine)}, leader {leader} from {min(theirs)}"


def away_and_back(c: ClusterProcess, topic: str, how: str) -> tuple[int, list[bytes]]:
    """Take a replica away (``how``) while 20 batches roll, are copied and leave the other
    disks; returns it (not started again) and what was acknowledged."""
    c.create_topic(topic, 1, replication_factor=3, min_insync_replicas="2", **TIERED_CONFIGS)
    acked = produce_batches(c, topic, "before", 5)
    leader = c.leader(topic)
    away = leader if how == "leader-killed" else next(n for n in c.nodes if n != leader)
    if how == "stopped":
        c.stop(away)
    else:
        c.kill(away)
    wait_for(lambda: c.leader(topic) not in (-1, away), "a leader")
    end_when_away = len(acked)
    acked += produce_batches(c, topic, "away", 20)
    wait_for(
        lambda: all(local_start(c, n, topic) > end_when_away for n in c.nodes if n != away),
        "the missed segments to leave the other disks",
    )
    return away, acked


@pytest.mark.parametrize("how", ["stopped", "killed", "leader-killed"])
def test_a_replica_that_missed_tiered_segments_rejoins_the_isr(
    cluster: ClusterProcess, how: str
) -> None:
    c, topic = cluster, f"rejoin-{how}"
    away, acked = away_and_back(c, topic, how)
    c.start_node(away)
    wait_for(lambda: away in c.partition(topic)["isr"], "the replica to rejoin", REJOIN_TIMEOUT_S)
    acked += produce_batches(c, topic, "after", 3)
    assert_same_local_log(c, topic, away)
    assert read_confluent(c, topic, "read_committed") == acked


def test_a_replica_rejoins_while_the_leader_keeps_copying(cluster: ClusterProcess) -> None:
    """Producers never stop: the leader rolls, copies and drops segments all along, so the
    restarted replica's view of the remote tier trails the leader's local log start."""
    c, topic = cluster, "rejoin-busy"
    away, acked = away_and_back(c, topic, "killed")
    stop = threading.Event()
    more: list[bytes] = []

    def produce() -> None:
        n = 0
        while not stop.is_set():
            more.extend(produce_batches(c, topic, f"busy{n}", 1))
            n += 1

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        c.start_node(away)
        wait_for(
            lambda: away in c.partition(topic)["isr"], "the replica to rejoin", REJOIN_TIMEOUT_S
        )
    finally:
        stop.set()
        producer.join(60)
    assert_same_local_log(c, topic, away)
    assert read_confluent(c, topic, "read_committed") == acked + more
