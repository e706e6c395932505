"""``moldau leader-election`` and ``moldau reassign`` as a user runs them (subprocesses)
against a real three-node cluster: the leaderships and replicas they change, and the data
still there afterwards."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from moldau.testing import ClusterProcess
from tests.cluster.conftest import NewCluster


def moldau(
    cluster: ClusterProcess, command: str, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    """``python -m moldau COMMAND --bootstrap-server <every node>``."""
    args = [*shlex.split(command), "--bootstrap-server", cluster.bootstrap_servers]
    result = subprocess.run(
        [sys.executable, "-m", "moldau", *args], capture_output=True, text=True, timeout=120
    )
    if ok:
        assert result.returncode == 0, f"{command}: {result.stdout}{result.stderr}"
    return result


def partitions(cluster: ClusterProcess, topic: str) -> dict[int, dict[str, Any]]:
    return {p["partition"]: p for p in cluster.describe()["topics"][topic]}


@pytest.mark.slow
def test_preferred_leader_election(new_cluster: NewCluster, topic: str) -> None:
    """A node stopped and started again is back in every ISR but leads nothing (the
    balancer is off); a preferred election of one partition, then of all, gives it back
    the partitions whose first replica it is."""
    cluster = new_cluster(auto_leader_rebalance_enable=False)
    cluster.create_topic(topic, partitions=6)
    preferred = {p: info["replicas"][0] for p, info in partitions(cluster, topic).items()}
    cluster.produce(topic, *[f"r{i}" for i in range(30)])
    node = next(n for n in cluster.nodes if n != cluster.controller())
    cluster.restart(node)  # controlled shutdown moves its leaderships away
    cluster.wait_until(lambda: all(node in p["isr"] for p in partitions(cluster, topic).values()))
    own = sorted(p for p, r in preferred.items() if r == node)
    assert own and all(cluster.leader(topic, p) != node for p in own)

    first, rest = own[0], own[1:]
    out = moldau(cluster, f"leader-election --preferred --topic {topic} --partition {first}")
    assert (
        f"Successfully completed leader election (PREFERRED) for partitions {topic}-{first}"
        in out.stdout
    )
    assert cluster.leader(topic, first) == node
    assert all(cluster.leader(topic, p) != node for p in rest)

    out = moldau(cluster, "leader-election --preferred --all --json")
    elected = json.loads(out.stdout)["elected"]
    assert {f"{topic}-{p}" for p in rest} <= set(elected), out.stdout
    assert {p: cluster.leader(topic, p) for p in preferred} == preferred

    out = moldau(cluster, f"leader-election --topic {topic}")  # every partition: nothing to do
    assert "Valid replica already elected for partitions" in out.stdout
    assert sorted(r.value for r in cluster.consume(topic, 30)) == sorted(
        f"r{i}".encode() for i in range(30)
    )


def test_leader_election_errors(shared_cluster: ClusterProcess, topic: str) -> None:
    cluster = shared_cluster
    bad = moldau(cluster, "leader-election --preferred --topic no-such-topic", ok=False)
    assert bad.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in bad.stderr, bad
    cluster.create_topic(topic, partitions=1)
    bad = moldau(cluster, f"leader-election --topic {topic} --partition 7", ok=False)
    assert bad.returncode == 1 and f"{topic}-7: UNKNOWN_TOPIC_OR_PARTITION" in bad.stderr, bad
    usage = moldau(cluster, "leader-election --preferred", ok=False)
    assert usage.returncode == 1 and "--topic" in usage.stderr and "--all" in usage.stderr


@pytest.mark.slow
def test_reassignment_catches_up_before_the_old_replica_leaves(
    new_cluster: NewCluster, topic: str
) -> None:
    """Move a partition to a node that is down: the reassignment waits (listed, the old
    replica still leads and serves) until the node is back and has caught up, then the old
    replica leaves and the new one leads, with every record."""
    cluster = new_cluster()
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    (old,) = partitions(cluster, topic)[0]["replicas"]
    new = next(n for n in cluster.nodes if n not in (old, cluster.controller()))
    values = [f"v{i}" for i in range(300)]
    cluster.produce(topic, *values[:200])
    cluster.stop(new)

    out = moldau(cluster, f"reassign --topic {topic} --partition 0 --replicas {new}")
    assert f"Reassignment started for partitions {topic}-0" in out.stdout
    listed = json.loads(moldau(cluster, "reassign --list --json").stdout)
    assert listed[topic]["0"] == {"replicas": [new, old], "adding": [new], "removing": [old]}
    assert cluster.partition(topic, 0)["leader"] == old
    cluster.produce(topic, *values[200:])  # the old replica still takes writes
    out = moldau(cluster, f"reassign --topic {topic} --partition 0 --cancel")
    assert f"Reassignment cancelled for partitions {topic}-0" in out.stdout
    assert cluster.partition(topic, 0)["replicas"] == [old]
    assert json.loads(moldau(cluster, "reassign --list --json").stdout) == {}
    moldau(cluster, f"reassign --topic {topic} --partition 0 --replicas {new}")

    cluster.start_node(new)
    out = moldau(
        cluster, f"reassign --topic {topic} --partition 0 --replicas {new} --wait --timeout 60"
    )
    assert f"Reassignment complete for partitions {topic}-0" in out.stdout
    part = cluster.wait_until(lambda: (p := cluster.partition(topic, 0))["replicas"] == [new] and p)
    assert part["leader"] == new and part["isr"] == [new], part
    assert "No partition reassignment is in progress" in moldau(cluster, "reassign --list").stdout
    assert [r.value for r in cluster.consume(topic, 300)] == [v.encode() for v in values]


def test_reassignment_to_more_replicas_and_errors(
    shared_cluster: ClusterProcess, topic: str, tmp_path: Path
) -> None:
    cluster = shared_cluster
    cluster.create_topic(topic, partitions=2, replication_factor=1)
    cluster.produce(topic, *[f"x{i}" for i in range(50)])
    plan = tmp_path / "plan.json"
    moves = [{"topic": topic, "partition": p, "replicas": [3, 1, 2]} for p in (0, 1)]
    plan.write_text(json.dumps({"version": 1, "partitions": moves}))
    out = moldau(cluster, f"reassign --reassignment-json-file {plan} --wait")
    assert f"Reassignment complete for partitions {topic}-0, {topic}-1" in out.stdout
    for p in partitions(cluster, topic).values():
        assert p["replicas"] == [3, 1, 2] and sorted(p["isr"]) == [1, 2, 3], p
    assert sorted(r.value for r in cluster.consume(topic, 50)) == sorted(
        f"x{i}".encode() for i in range(50)
    )
    bad = moldau(cluster, f"reassign --topic {topic} --partition 0 --replicas 1,1", ok=False)
    assert bad.returncode == 1 and "INVALID_REPLICA_ASSIGNMENT" in bad.stderr, bad
    bad = moldau(cluster, f"reassign --topic {topic} --partition 0 --replicas 9", ok=False)
    assert bad.returncode == 1 and "INVALID_REPLICA_ASSIGNMENT" in bad.stderr, bad
    bad = moldau(cluster, f"reassign --topic {topic} --partition 0 --cancel", ok=False)
    assert bad.returncode == 1 and "NO_REASSIGNMENT_IN_PROGRESS" in bad.stderr, bad
    usage = moldau(cluster, f"reassign --topic {topic} --partition 0", ok=False)
    assert usage.returncode == 1 and "either --replicas or --cancel" in usage.stderr, usage
    plan.write_text("{not json")
    bad = moldau(cluster, f"reassign --reassignment-json-file {plan}", ok=False)
    assert bad.returncode == 1 and "cannot read the reassignment plan" in bad.stderr, bad
