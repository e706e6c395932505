"""Crash faults on a three-node cluster under a continuous idempotent acks=all workload
(replication factor 3, min.insync.replicas=2): kill -9 of a leader, of a follower, of two
nodes; SIGSTOP of a leader past replica.lag.time.max.ms; a rolling restart. Every test
ends with the checker over the whole history (``Scenario.finish``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.faults.cluster import FaultCluster
from tests.faults.scenario import TOPIC, Scenario

pytestmark = pytest.mark.slow


def test_leader_kill9(fault_cluster: FaultCluster, tmp_path: Path) -> None:
    fc = fault_cluster
    s = Scenario(fc, tmp_path / "history")
    s.start()
    leaders = fc.leaders(TOPIC)
    victim = leaders[0]
    led = {p for p, leader in leaders.items() if leader == victim}
    t = time.monotonic()
    fc.kill(victim)
    s.figures["new_leader_s"] = round(
        fc.wait_for(
            lambda: all(
                st.leader not in (victim, -1) for p, st in fc.describe(TOPIC).items() if p in led
            ),
            30,
            "new leaders for the killed node's partitions",
        ),
        2,
    )
    s.figures["first_ack_after_kill_s"] = round(
        s.wait_acked_everywhere(30, "after the kill", partitions=led, since=t), 2
    )
    time.sleep(3)  # running on two replicas of three
    s.figures["restart_s"] = round(fc.restart(victim), 2)
    s.finish()
