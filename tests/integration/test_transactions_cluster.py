"""Transactions on a 3-node KRaft cluster: markers reach the partition leaders on other
nodes (WriteTxnMarkers), and killing the transaction coordinator's node mid-transaction
or right after a commit loses no committed transaction and leaves none hanging."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from moldau.cli.transactions import TransactionsAdmin
from moldau.coordinator.group.partitioning import partition_for_group
from moldau.metadata.topics import TRANSACTION_STATE_TOPIC
from moldau.testing import ClusterProcess
from moldau.testing.process import TEST_DEFAULTS
from tests.integration.txn_helpers import (
    DEADLINE_S,
    by_partition,
    end_offsets,
    read_confluent,
    send_txn,
    txn_producer,
    values,
)

PARTITIONS = 6
TXN_PARTITIONS = 5


def start_cluster(tmp_path: Path, **configs: str) -> ClusterProcess:
    return ClusterProcess(
        3,
        configs={
            **TEST_DEFAULTS,
            "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
            **configs,
        },
        data_dir=tmp_path / "cluster",
    )


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcess]:
    with start_cluster(tmp_path) as running:
        yield running


async def admin(bs: str, tid: str, topic: str) -> tuple[list[Any], dict[str, Any], list[Any]]:
    client = TransactionsAdmin(bs)
    try:
        return (
            await client.list_all([], [], -1),
            await client.describe(tid),
            await client.producers(topic, 3),
        )
    finally:
        client.close()


def coordinator_of(cluster: ClusterProcess, transactional_id: str) -> int:
    return cluster.leader(
        TRANSACTION_STATE_TOPIC, partition_for_group(transactional_id, TXN_PARTITIONS)
    )


def wait_nothing_hangs(bs: str, topic: str) -> None:
    deadline = time.monotonic() + 2 * DEADLINE_S
    while end_offsets(bs, topic, PARTITIONS, "read_committed") != end_offsets(
        bs, topic, PARTITIONS, "read_uncommitted"
    ):
        assert time.monotonic() < deadline, "a transaction hangs (LSO below the HW)"
        time.sleep(0.5)


@pytest.mark.slow
def test_coordinator_node_killed_mid_transaction(cluster: ClusterProcess, topic: str) -> None:
    bs = cluster.bootstrap_servers
    cluster.create_topic(topic, PARTITIONS, replication_factor=3, min_insync_replicas=2)
    assert len({cluster.leader(topic, p) for p in range(PARTITIONS)}) > 1  # markers travel
    tid = f"{topic}-id"
    producer = txn_producer(bs, tid)  # 60 s: longer than the failover
    committed = values(PARTITIONS, "first", 12)
    send_txn(producer, topic, committed, commit=True)

    # A transaction open when its coordinator dies: the producer commits it through the
    # coordinator that takes the partition over.
    producer.begin_transaction()
    for p, v in values(PARTITIONS, "second", 12):
        producer.produce(topic, value=v, partition=p)
    producer.flush(DEADLINE_S)
    first = coordinator_of(cluster, tid)
    cluster.kill(first)
    producer.commit_transaction(2 * DEADLINE_S)
    committed += values(PARTITIONS, "second", 12)

    # A commit whose markers are still going out when the coordinator dies: the new
    # coordinator resumes PrepareCommit from the log.
    cluster.start_node(first)  # two of three nodes keep the quorum after the next kill
    survivor = coordinator_of(cluster, tid)
    send_txn(producer, topic, values(PARTITIONS, "third", 12), commit=True)
    committed += values(PARTITIONS, "third", 12)
    cluster.kill(survivor)
    wait_nothing_hangs(bs, topic)
    assert read_confluent(bs, topic, PARTITIONS, "read_committed") == by_partition(
        PARTITIONS, committed
    )

    # An open transaction whose producer is gone is aborted by the new coordinator.
    lost = txn_producer(bs, f"{topic}-lost", **{"transaction.timeout.ms": 5000})
    acked: list[bytes] = []
    lost.begin_transaction()
    for p, v in values(PARTITIONS, "lost", 6):
        lost.produce(
            topic, value=v, partition=p, on_delivery=lambda e, m: e or acked.append(m.value())
        )
    lost.flush(DEADLINE_S)
    # A loaded machine may be slower than the timeout: the coordinator then aborts (and
    # fences) before some records are written, and only the acknowledged ones are in logs.
    # Until those are below the HW, LSO and HW agree without the abort having happened:
    # wait for them, then check that nothing hangs and nothing shows.
    deadline = time.monotonic() + 2 * DEADLINE_S
    while True:
        wait_nothing_hangs(bs, topic)
        uncommitted = read_confluent(bs, topic, PARTITIONS, "read_uncommitted")
        if sum(map(len, uncommitted.values())) >= len(committed) + len(acked):
            break
        assert time.monotonic() < deadline, (acked, uncommitted)
        time.sleep(0.5)
    assert sum(map(len, uncommitted.values())) == len(committed) + len(acked)
    wait_nothing_hangs(bs, topic)
    assert read_confluent(bs, topic, PARTITIONS, "read_committed") == by_partition(
        PARTITIONS, committed
    )


def test_offsets_in_transactions_on_a_cluster(cluster: ClusterProcess, topic: str) -> None:
    """TxnOffsetCommit reaches the group coordinator (maybe on another node than the
    transaction coordinator) and the offsets become visible with the commit; the admin
    requests find the transaction on its coordinator's node."""
    bs = cluster.bootstrap_servers
    cluster.create_topic(topic, PARTITIONS, replication_factor=3)
    group = f"{topic}-group"
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group})
    tid = f"{topic}-id"
    producer = txn_producer(bs, tid)
    try:
        producer.begin_transaction()
        for p, v in values(PARTITIONS, "x", 6):
            producer.produce(topic, value=v, partition=p)
        offsets = [TopicPartition(topic, p, 10 + p) for p in range(PARTITIONS)]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
        producer.flush(DEADLINE_S)
        listed, described, producers = asyncio.run(admin(bs, tid, topic))
        coordinator = coordinator_of(cluster, tid)
        assert [(t["coordinator"], t["state"]) for t in listed if t["transactional_id"] == tid] == [
            (coordinator, "Ongoing")
        ]
        assert described["coordinator"] == coordinator and described["state"] == "Ongoing"
        assert len(described["partitions"]) == PARTITIONS + 1  # and __consumer_offsets
        (entry,) = producers
        assert entry["producer_id"] == described["producer_id"]
        producer.commit_transaction(DEADLINE_S)
        # read_committed consumers wait for stable offsets (require_stable)
        reader = Consumer(
            {"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed"}
        )
        try:
            got = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 30)
        finally:
            reader.close()
        assert [(tp.partition, tp.offset) for tp in got] == [(p, 10 + p) for p in range(PARTITIONS)]
    finally:
        consumer.close()


@pytest.mark.slow
def test_new_coordinator_resumes_a_prepared_commit(tmp_path: Path, topic: str) -> None:
    """The leader of one partition is paused (SIGSTOP) so the COMMIT marker cannot reach
    it; the commit is decided (PrepareCommit, once the paused node leaves the ISR) and the
    coordinator's node is killed before it could finish. The node that takes
    ``__transaction_state`` over finds PrepareCommit and sends the markers itself."""
    with start_cluster(tmp_path, **{"replica.lag.time.max.ms": "2000"}) as cluster:
        bs = cluster.bootstrap_servers
        cluster.create_topic(topic, PARTITIONS, replication_factor=3, min_insync_replicas=2)
        tid = f"{topic}-id"
        producer = txn_producer(bs, tid)
        coordinator = coordinator_of(cluster, tid)
        blocked = next(
            leader
            for leader in (cluster.leader(topic, p) for p in range(PARTITIONS))
            if leader != coordinator
        )
        producer.begin_transaction()
        records = values(PARTITIONS, "resumed", 12)
        for p, v in records:
            producer.produce(topic, value=v, partition=p)
        producer.flush(DEADLINE_S)
        cluster.pause(blocked)
        try:
            producer.commit_transaction(2 * DEADLINE_S)
            cluster.kill(coordinator)
        finally:
            cluster.resume(blocked)
        wait_nothing_hangs(bs, topic)
        assert read_confluent(bs, topic, PARTITIONS, "read_committed") == by_partition(
            PARTITIONS, records
        )
        successor = coordinator_of(cluster, tid)
        assert successor != coordinator
        resumed = [line for line in cluster.node(successor).output if "resuming COMMIT" in line]
        assert resumed and tid in resumed[0], "the new coordinator did not resume the commit"
