"""The KRaft quorum on its own: failover time, commit latency, and metadata snapshots of a
large cluster.

Three voters run as `RaftManager`s in this one process and event loop, behind loopback
listeners, on real files (`tests/integration/raft_helpers.py`): every figure includes the
other replicas' work on the same core, so it is an upper bound for separate processes.

- failover: stop the leader (connections drop, no resignation) and time until another
  voter leads and has committed a write; repeated `--failovers` times, restarting the old
  leader in between.
- commit latency: one record appended and waited for at a time (what `QuorumController`
  does), `--commits` times.
- snapshot: a cluster image of `--topics` x `--partitions` (RF 3 over 3 brokers) is
  committed and snapshotted (encoded in a worker thread, written, fsynced); measured are
  that time, the file size, a brand-new node's fetch and load through FetchSnapshot, and
  the load (decode and replay) alone.
- cluster: three real combined nodes (``moldau.testing.cluster``, one process each):
  ``--cluster-topics`` topics of ``--partitions`` partitions with replication factor 3
  created through CreateTopics of 10 topics each, the next one once every node's own
  Metadata lists the last with leaders (a request that fails is sent again and counted,
  and so are the new quorum epochs meanwhile); the
  latency of one-topic CreateTopics (as a script creating topics one by one sees it); and
  kill -9 of the active controller to the next CreateTopics that succeeds, repeated
  ``--failovers`` times.

    python -m benchmarks.raft_quorum [--quick] [--sections commit,failover,snapshot,cluster]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.harness import write_result
from moldau.metadata.records import (
    BrokerEndpoint,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from moldau.raft.driver import METADATA_DIR, SnapshotData, decode_snapshot
from moldau.raft.file_log import SNAPSHOT_SUFFIX, snapshot_file_stem
from moldau.testing import ClusterProcess, cluster
from tests.integration.raft_helpers import Node, RaftCluster, raft_cluster

TOPICS_PER_REQUEST = 10  # 100 partitions, 300 replicas: logs a node creates at once


def topic(i: int) -> TopicRecord:
    return TopicRecord(name=f"topic-{i}", topic_id=(i + 1).to_bytes(16, "big"))


async def commit(node: Node, records: list[MetadataRecord]) -> int:
    offset = node.manager.append(records)
    await node.manager.wait_committed(offset)
    return offset


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "min": round(ordered[0], 2),
        "median": round(statistics.median(ordered), 2),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 2),
        "max": round(ordered[-1], 2),
    }


async def failovers(cluster: RaftCluster, count: int) -> dict[str, Any]:
    times_ms, next_topic = [], 0
    for _ in range(count):
        leader = await cluster.wait_for_leader()
        await commit(leader, [topic(next_topic)])
        next_topic += 1
        cluster.stop_node(leader.node_id)
        started = time.perf_counter()
        successor = await cluster.wait_for_leader(30)
        await commit(successor, [topic(next_topic)])
        next_topic += 1
        times_ms.append((time.perf_counter() - started) * 1000)
        back = await cluster.start_node(leader.node_id)
        target = successor.manager.committed_offset
        await cluster.wait_for(
            lambda back=back, target=target: back.manager.committed_offset >= target
        )
    return {"stop_to_committed_write_ms": summary(times_ms)}


async def commit_latency(cluster: RaftCluster, count: int) -> dict[str, Any]:
    leader = await cluster.wait_for_leader()
    latencies = []
    for i in range(count):
        started = time.perf_counter()
        await commit(leader, [topic(100_000 + i)])
        latencies.append((time.perf_counter() - started) * 1000)
    return {"append_to_committed_ms": summary(latencies)}


def cluster_records(topics: int, partitions: int) -> list[list[MetadataRecord]]:
    """Batches of a cluster's metadata: 3 brokers, then one batch per 100 topics."""
    brokers: list[MetadataRecord] = [
        RegisterBrokerRecord(
            broker_id=b,
            end_points=[BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092 + b)],
            rack=f"r{b}",
            fenced=False,
        )
        for b in range(3)
    ]
    batches, batch = [brokers], []
    for t in range(topics):
        record = topic(t)
        batch.append(record)
        for p in range(partitions):
            replicas = [(t + p + i) % 3 for i in range(3)]
            batch.append(
                PartitionRecord(
                    partition_id=p,
                    topic_id=record.topic_id,
                    replicas=replicas,
                    isr=replicas,
                    leader=replicas[0],
                    leader_epoch=0,
                    partition_epoch=0,
                )
            )
        if len(batch) >= 100 * (partitions + 1) or t == topics - 1:
            batches.append(batch)
            batch = []
    return batches


async def snapshots(root: Path, topics: int, partitions: int) -> dict[str, Any]:
    # Four replicas' images of a large cluster share this interpreter: its garbage
    # collector pauses the loop for up to a second or two on this machine, so the timeouts
    # are raised to keep one leader throughout.
    async with raft_cluster(
        root, 3, observers=1, election_timeout_ms=5_000, fetch_timeout_ms=10_000
    ) as cluster:
        newcomer = cluster.stop_node(4)
        leader = await cluster.wait_for_leader()
        for batch in cluster_records(topics, partitions):
            await commit(leader, batch)
        image = leader.manager.image
        started = time.perf_counter()
        snapshot_id = await leader.manager.create_snapshot()
        create_s = time.perf_counter() - started
        assert snapshot_id is not None
        path = leader.data_dir / METADATA_DIR / (snapshot_file_stem(snapshot_id) + SNAPSHOT_SUFFIX)
        started = time.perf_counter()
        node = await cluster.start_node(newcomer.node_id)
        await cluster.wait_for(lambda: node.listener.snapshots, 300)
        catch_up_s = time.perf_counter() - started
        assert node.manager.image.topics == image.topics
        assert leader.manager.leader()[0] == leader.node_id, "the leader stayed in place"
        data = path.read_bytes()
    # Loading on its own (decode and replay), with nothing else running.
    started = time.perf_counter()
    decoded = decode_snapshot(SnapshotData(snapshot_id, data))
    load_s = time.perf_counter() - started
    assert decoded.image.topics == image.topics
    return {
        "partitions": topics * partitions,
        "topics": topics,
        "snapshot_bytes": len(data),
        "create_snapshot_s": round(create_s, 2),
        "load_s": round(load_s, 2),
        "new_node_fetch_and_load_s": round(catch_up_s, 2),
    }


def create_topics(admin: AdminClient, names: list[str], partitions: int) -> None:
    new = [NewTopic(n, partitions, replication_factor=3) for n in names]
    for future in admin.create_topics(new, operation_timeout=120, request_timeout=180).values():
        future.result(300)


def create_retrying(admin: AdminClient, names: list[str], partitions: int) -> int:
    """Create ``names`` as a script would: a request that fails (it died with the
    controller, or every broker is fenced for a while) is sent again for the topics still
    missing, for up to two minutes. Returns the retries."""
    retries, deadline = 0, time.monotonic() + 120
    while True:
        try:
            create_topics(admin, names, partitions)
            return retries
        except KafkaException as e:
            if e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                existing = set(admin.list_topics(timeout=30).topics)
                names = [n for n in names if n not in existing]
                if not names:
                    return retries
            retries += 1
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def on_every_node(nodes: list[AdminClient], topic: str, partitions: int) -> int:
    """Wait until each node's own metadata lists ``topic`` with a leader per partition.
    Returns how many Metadata requests timed out (10 s) meanwhile: a node stalled."""
    stalls = 0
    for node in nodes:
        deadline = time.monotonic() + 300
        while True:
            try:
                found = node.list_topics(topic, timeout=10).topics.get(topic)
            except KafkaException:
                stalls += 1
                found = None
            leaders = [] if found is None or found.error else found.partitions.values()
            if len(leaders) == partitions and all(p.leader >= 0 for p in leaders):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} not on every node")
            time.sleep(0.02)
    return stalls


def real_cluster(topics: int, partitions: int, single: int, failovers: int) -> dict[str, Any]:
    """The figures measured so far; a phase that fails ends the run with its error noted
    (a cluster that stops answering is a result too)."""
    out: dict[str, Any] = {
        "topics": topics,
        "partitions_per_topic": partitions,
        "replication_factor": 3,
        "topics_per_request": TOPICS_PER_REQUEST,
    }
    with cluster(3) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        nodes = [AdminClient({"bootstrap.servers": c.node(n).bootstrap_servers}) for n in c.nodes]
        names = [f"bulk-{i}" for i in range(topics)]
        epoch = c.describe()["quorum"]["epoch"]
        started = time.perf_counter()
        retries = stalls = 0
        try:
            for i in range(0, topics, TOPICS_PER_REQUEST):
                batch = names[i : i + TOPICS_PER_REQUEST]
                retries += create_retrying(admin, batch, partitions)
                # The next request once every node applied this one: the pace the nodes
                # can keep, so none falls so far behind that it misses its heartbeats.
                stalls += on_every_node(nodes, batch[-1], partitions)
                out["topics_created"] = i + len(batch)
                out["create_on_every_node_s"] = round(time.perf_counter() - started, 2)
                out["create_requests_retried"] = retries
                out["metadata_requests_timed_out_10s"] = stalls
            out["quorum_epochs_during_create"] = c.describe()["quorum"]["epoch"] - epoch
            one_by_one: list[float] = []
            for i in range(single):
                begun = time.perf_counter()
                create_retrying(admin, [f"single-{i}"], partitions)
                one_by_one.append((time.perf_counter() - begun) * 1000)
            out["one_topic_create_ms"] = summary(one_by_one)
            kill_to_create = [
                kill_the_controller(c, admin, f"after-kill-{i}") for i in range(failovers)
            ]
            out["kill9_controller_to_created_topic_ms"] = summary(kill_to_create)
        except (KafkaException, TimeoutError, ConnectionError, AssertionError, RuntimeError) as e:
            out["failed"] = f"{type(e).__name__}: {e}"
    return out


def kill_the_controller(c: ClusterProcess, admin: AdminClient, name: str) -> float:
    """kill -9 of the active controller; ms until a CreateTopics succeeds. The node is
    started again and the cluster settles before the next round."""
    old = c.controller()
    assert old is not None
    c.kill(old)
    started = time.perf_counter()
    while True:
        try:
            create_topics(admin, [name], 1)
            break
        except KafkaException as e:  # created, but the answer was lost with the old controller
            if e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                break
            if time.perf_counter() - started > 60:
                raise
            time.sleep(0.01)
        except Exception:  # no controller yet, or the request died with the old one
            if time.perf_counter() - started > 60:
                raise
            time.sleep(0.01)
    elapsed = (time.perf_counter() - started) * 1000
    c.start_node(old)
    c.wait_until(lambda: name in c.describe(old)["topics"], 600)
    return elapsed


async def main(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    sections = set(args.sections.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if sections & {"commit", "failover"}:
            async with raft_cluster(root / "quorum", 3) as quorum:
                if "commit" in sections:
                    results["commit"] = await commit_latency(quorum, args.commits)
                if "failover" in sections:
                    results["failover"] = await failovers(quorum, args.failovers)
        if "snapshot" in sections:
            results["snapshot"] = await snapshots(root / "snapshot", args.topics, args.partitions)
    if "cluster" in sections:
        results["cluster"] = await asyncio.to_thread(
            real_cluster, args.cluster_topics, args.partitions, 50, args.failovers
        )
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--failovers", type=int, default=5)
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=10, help="per topic")
    parser.add_argument("--cluster-topics", type=int, default=1_000, help="created on 3 nodes")
    parser.add_argument("--sections", default="commit,failover,snapshot,cluster")
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    arguments = parser.parse_args()
    if arguments.quick:
        arguments.failovers, arguments.commits, arguments.topics = 1, 20, 100
        arguments.cluster_topics = 100
    outcome = asyncio.run(main(arguments))
    print(outcome)
    print(write_result("raft_quorum", arguments, outcome))
