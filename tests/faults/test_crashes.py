"""Crash faults on a three-node cluster under a continuous idempotent acks=all workload
(replication factor 3, min.insync.replicas=2): kill -9 of a leader, of a follower, of two
nodes; SIGSTOP of a leader past replica.lag.time.max.ms; a rolling restart. Every test
ends with the checker over the whole history (``Scenario.finish``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.faults.cluster import FAST, FaultCluster
from tests.faults.probe import ProduceProbe
from tests.faults.scenario import TOPIC, Scenario

pytestmark = pytest.mark.slow

LAG_TIME_S = int(FAST["replica.lag.time.max.ms"]) / 1000


def _new_leaders(fc: FaultCluster, partitions: set[int], old: int) -> bool:
    states = fc.describe(TOPIC)
    return all(states[p].leader not in (old, -1) for p in partitions)


def test_leader_kill9(fault_cluster: FaultCluster, tmp_path: Path) -> None:
    """The node that is both the active controller and a partition leader dies: a new
    controller is elected, then new partition leaders from the ISR; the killed node comes
    back as a follower and truncates what it had beyond the new leaders' logs."""
    fc = fault_cluster
    s = Scenario(fc, tmp_path / "history")
    s.start()
    leaders = fc.leaders(TOPIC)
    controller = fc.controller()
    victim = controller if controller in leaders.values() else leaders[0]
    led = {p for p, leader in leaders.items() if leader == victim}
    t = time.monotonic()
    fc.kill(victim)
    s.figures["victim_was_controller"] = victim == controller
    s.figures["new_leader_s"] = round(
        fc.wait_for(lambda: _new_leaders(fc, led, victim), 30, "new leaders"), 2
    )
    s.figures["first_ack_after_kill_s"] = round(
        s.wait_acked_everywhere(30, "after the kill", partitions=led, since=t), 2
    )
    time.sleep(3)  # running on two replicas of three
    s.figures["restart_s"] = round(fc.restart(victim), 2)
    s.finish()


def test_follower_kill9_and_catch_up(fault_cluster: FaultCluster, tmp_path: Path) -> None:
    """Node 3 follows every partition of the topic: killed, it leaves the ISR and the
    leaders keep acknowledging on two replicas; restarted after the others wrote on, it
    catches up from its log end and rejoins the ISR."""
    fc = fault_cluster
    assignment = [[1, 2, 3], [2, 1, 3], [1, 2, 3], [2, 1, 3]]
    s = Scenario(fc, tmp_path / "history", assignment=assignment)
    s.start()
    t = time.monotonic()
    fc.kill(3)
    s.figures["isr_shrunk_s"] = round(
        fc.wait_for(
            lambda: all(3 not in st.isr for st in fc.describe(TOPIC).values()), 30, "ISR shrink"
        ),
        2,
    )
    s.figures["longest_ack_gap_s"] = round(s.longest_ack_gap(t, time.monotonic()), 2)
    time.sleep(8)  # the others write on without it
    behind = s.acks_between(t, time.monotonic())
    restarted = time.monotonic()
    s.figures["restart_s"] = round(fc.restart(3), 2)
    s.figures["caught_up_s"] = round(time.monotonic() - restarted + fc.wait_full_isr(TOPIC, 60), 2)
    s.figures["records_to_catch_up"] = behind
    assert behind > 0
    s.finish()


def test_leader_paused_past_lag_time(fault_cluster: FaultCluster, tmp_path: Path) -> None:
    """SIGSTOP of a partition leader (not the controller) for twice replica.lag.time.max.ms:
    the controller fences it and elects another leader. A produce request that reached it
    while paused is appended there on SIGCONT in its old epoch, never acknowledged; the
    node then learns it is a follower, truncates that divergent tail and catches up."""
    fc = fault_cluster
    s = Scenario(fc, tmp_path / "history")
    s.start()
    leaders = fc.leaders(TOPIC)
    controller = fc.controller()
    partition, victim = next((p, n) for p, n in sorted(leaders.items()) if n != controller)
    node = fc.node(victim)
    probe = ProduceProbe(node.host, node.client_port, TOPIC, s.workload.recorder)
    probe.send(partition, "probe/0:0")  # connects before the pause
    assert probe.result(10) == "NONE"
    before = len(node.output)
    t = time.monotonic()
    fc.pause(victim)
    probe.send(partition, "probe/0:1", timeout_ms=3_000)  # waits in the socket buffer
    s.figures["new_leader_s"] = round(
        fc.wait_for(lambda: _new_leaders(fc, {partition}, victim), 30, "a new leader"), 2
    )
    s.figures["first_ack_after_pause_s"] = round(
        s.wait_acked_everywhere(30, "after the pause", partitions={partition}, since=t), 2
    )
    time.sleep(max(0.0, 2 * LAG_TIME_S - (time.monotonic() - t)))
    fc.resume(victim)
    s.figures["paused_s"] = round(time.monotonic() - t, 2)
    answer = probe.result(30)
    probe.close()
    s.figures["paused_leader_answered"] = answer
    assert answer != "NONE", "the deposed leader acknowledged a write it could not replicate"
    fc.wait_for(
        lambda: any(f"{TOPIC}-{partition}: truncated" in line for line in node.output[before:]),
        30,
        "the deposed leader truncating its divergent tail",
    )
    s.finish()


def test_rolling_restart(fault_cluster: FaultCluster, tmp_path: Path) -> None:
    """Each node in turn: SIGTERM (controlled shutdown moves its leaderships away first),
    start again, wait until every replica is back in sync."""
    fc = fault_cluster
    s = Scenario(fc, tmp_path / "history")
    s.start()
    for node_id in (1, 2, 3):
        t = time.monotonic()
        fc.stop_node(node_id)
        s.figures[f"node{node_id}_shutdown_s"] = round(time.monotonic() - t, 2)
        s.figures[f"node{node_id}_restart_s"] = round(fc.restart(node_id), 2)
        fc.wait_full_isr(TOPIC, 60)
        s.figures[f"node{node_id}_longest_ack_gap_s"] = round(
            s.longest_ack_gap(t, time.monotonic()), 2
        )
    s.finish()


def test_two_of_three_killed(fault_cluster: FaultCluster, tmp_path: Path) -> None:
    """kill -9 of one node, then of a second: the survivor holds the only live replica of
    every partition (and the controller quorum has lost its majority), so no acks=all
    write may be acknowledged. One node back: service resumes once it is in sync again.
    Nothing acknowledged is lost. Raw probes record what the survivor answers."""
    fc = fault_cluster
    s = Scenario(fc, tmp_path / "history")
    s.start()
    first, second, survivor = 1, 2, 3
    fc.kill(first)
    fc.wait_for(
        lambda: all(first not in st.isr for st in fc.describe(TOPIC).values()), 30, "ISR shrink"
    )
    s.wait_acked_everywhere(30, "on two replicas")
    fc.kill(second)
    killed = time.monotonic()
    node = fc.node(survivor)
    led = next(
        p for p, st in sorted(fc.describe(TOPIC, via=survivor).items()) if st.leader == survivor
    )
    probe = ProduceProbe(node.host, node.client_port, TOPIC, s.workload.recorder)
    answers = [probe.produce(led, f"probe/{led}:{i}", 1_000) for i in range(6)]
    probe.close()
    s.figures["survivor_answers"] = answers
    back = time.monotonic()
    acked_alone = s.acks_between(killed + 1.0, back)
    assert acked_alone == 0, f"{acked_alone} records acknowledged with one replica alive"
    assert "NONE" not in answers
    s.figures["outage_s"] = round(back - killed, 2)
    s.figures["restart_s"] = round(fc.restart(first), 2)
    s.figures["first_ack_after_return_s"] = round(
        s.wait_acked_everywhere(60, "one node back", since=back), 2
    )
    fc.restart(second)
    s.finish()
