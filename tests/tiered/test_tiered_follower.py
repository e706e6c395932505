"""KIP-405's follower path on a real two-node cluster: a replica added to a tiered
partition whose history is only in the remote tier does not fetch that history; it
starts after the remote tier, joins the ISR, and once it leads alone every record is
still read back from offset 0 (remote tier plus its local log)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from moldau.testing import cluster
from moldau.testing.cluster import ClusterProcess

TOPIC = "tiered-follow"


def moldau(c: ClusterProcess, command: str) -> str:
    args = [*shlex.split(command), "--bootstrap-server", c.bootstrap_servers]
    done = subprocess.run(
        [sys.executable, "-m", "moldau", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
    return done.stdout


def local_bases(c: ClusterProcess, node: int) -> list[int]:
    """Base offsets of the topic's segments on ``node``'s disk."""
    found = list(c.node(node).data_dir.rglob(f"{TOPIC}-0"))
    if not found:
        return []
    return sorted(int(p.name.split(".")[0]) for p in found[0].glob("*.log"))


@pytest.mark.slow
def test_an_added_replica_starts_after_the_remote_tier(tmp_path: Path) -> None:
    with cluster(
        nodes=2,
        remote_log_storage_system_enable="true",
        remote_log_storage_manager_class_name="file",
        rsm_config_dir=str(tmp_path / "remote"),
        remote_log_manager_task_interval_ms="200",
        log_retention_check_interval_ms="200",
        remote_log_metadata_topic_num_partitions="3",
    ) as c:
        c.create_topic(
            TOPIC,
            1,
            replication_factor=1,
            remote_storage_enable="true",
            segment_bytes="4000",
            local_retention_bytes="1",
            retention_ms="-1",
            file_delete_delay_ms="0",
        )
        (old,) = c.partition(TOPIC)["replicas"]
        new = next(n for n in c.nodes if n != old)
        values = [f"{i:05d}-".encode() + b"x" * 90 for i in range(400)]
        for i in range(0, 300, 10):  # many small batches: many closed segments to copy
            c.produce(TOPIC, *values[i : i + 10])
        # The history left the old replica's disk once copied.
        c.wait_until(lambda: (b := local_bases(c, old)) and b[0] > 0, timeout=60)

        moldau(
            c, f"reassign --topic {TOPIC} --partition 0 --replicas {old},{new} --wait --timeout 90"
        )
        c.wait_until(lambda: new in c.partition(TOPIC)["isr"], timeout=60)
        # The new replica did not fetch what the remote tier holds.
        assert local_bases(c, new)[0] > 0, local_bases(c, new)

        # The new replica alone: everything is still there, from offset 0.
        moldau(c, f"reassign --topic {TOPIC} --partition 0 --replicas {new} --wait --timeout 90")
        c.wait_until(lambda: c.partition(TOPIC)["leader"] == new, timeout=60)
        c.produce(TOPIC, *values[300:])
        assert [r.value for r in c.consume(TOPIC, 400)] == values
