"""Crash faults on a three-node cluster under a continuous idempotent acks=all workload
(replication factor 3, min.insync.replicas=2): kill -9 of a leader, of a follower, of two
nodes, of all three; SIGSTOP of a leader past replica.lag.time.max.ms; a rolling restart;
an ISR below min.insync.replicas. Every test ends with the checker over the whole history
(``Scenario.finish``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from moldau.testing import ClusterProcess
from tests.faults.nemesis import (
    LAG_TIME_S,
    leaders,
    new_leaders,
    output_since,
    states,
    timed,
    wait_full_isr,
)
from tests.faults.probe import ProduceProbe
from tests.faults.scenario import TOPIC, Scenario

pytestmark = pytest.mark.slow


def _restart(c: ClusterProcess, node_id: int) -> float:
    start = time.monotonic()
    c.start_node(node_id)
    return round(time.monotonic() - start, 2)


def _probe(c: ClusterProcess, node_id: int, s: Scenario) -> ProduceProbe:
    node = c.node(node_id)
    return ProduceProbe(node.host, node.port, TOPIC, s.workload.recorder)


def test_leader_kill9(fault_cluster: ClusterProcess, tmp_path: Path) -> None:
    """The node that is both the active controller and a partition leader dies: a new
    controller is elected, then new partition leaders from the ISR; the killed node comes
    back as a follower and truncates what it had beyond the new leaders' logs."""
    c = fault_cluster
    s = Scenario(c, tmp_path / "history")
    s.start()
    led_by = leaders(c, TOPIC)
    controller = c.controller()
    victim = controller if controller in led_by.values() else led_by[0]
    led = {p for p, leader in led_by.items() if leader == victim}
    t = time.monotonic()
    c.kill(victim)
    s.figures["victim_was_controller"] = victim == controller
    s.figures["new_leader_s"] = round(
        timed(lambda: new_leaders(c, TOPIC, led, victim), 30, "new leaders"), 2
    )
    s.figures["first_ack_after_kill_s"] = round(
        s.wait_acked_everywhere(30, "after the kill", partitions=led, since=t), 2
    )
    time.sleep(2)  # running on two replicas of three
    s.figures["restart_s"] = _restart(c, victim)
    s.finish()


def test_follower_kill9_and_catch_up(fault_cluster: ClusterProcess, tmp_path: Path) -> None:
    """Node 3 follows every partition of the topic: killed, it leaves the ISR and the
    leaders keep acknowledging on two replicas; restarted after the others wrote on, it
    catches up from its log end and rejoins the ISR."""
    c = fault_cluster
    assignment = [[1, 2, 3], [2, 1, 3], [1, 2, 3], [2, 1, 3]]
    s = Scenario(c, tmp_path / "history", assignment=assignment)
    s.start()
    t = time.monotonic()
    c.kill(3)
    s.figures["isr_shrunk_s"] = round(
        timed(lambda: all(3 not in st["isr"] for st in states(c, TOPIC).values()), 30, "shrink"),
        2,
    )
    s.figures["longest_ack_gap_s"] = round(s.longest_ack_gap(t, time.monotonic()), 2)
    time.sleep(3)  # the others write on without it
    behind = s.acks_between(t, time.monotonic())
    restarted = time.monotonic()
    s.figures["restart_s"] = _restart(c, 3)
    s.figures["records_to_catch_up"] = behind
    assert behind > 0
    s.finish()
    s.figures["caught_up_s"] = round(s.figures["isr_restored_s"] + time.monotonic() - restarted, 2)


def test_leader_paused_past_lag_time(fault_cluster: ClusterProcess, tmp_path: Path) -> None:
    """SIGSTOP of a partition leader (not the controller) for twice replica.lag.time.max.ms:
    the controller fences it and elects another leader. A produce request that reached it
    while paused is appended there on SIGCONT in its old epoch, never acknowledged; the
    node then learns it is a follower, truncates that divergent tail and catches up."""
    c = fault_cluster
    s = Scenario(c, tmp_path / "history")
    s.start()
    controller = c.controller()
    partition, victim = next(
        (p, n) for p, n in sorted(leaders(c, TOPIC).items()) if n != controller
    )
    probe = _probe(c, victim, s)
    probe.send(partition, "probe/0:0")  # connects before the pause
    assert probe.result(10) == "NONE"
    mark = c.node(victim).lines_seen
    t = time.monotonic()
    c.pause(victim)
    probe.send(partition, "probe/0:1", timeout_ms=3_000)  # waits in the socket buffer
    s.figures["new_leader_s"] = round(
        timed(lambda: new_leaders(c, TOPIC, {partition}, victim), 30, "a new leader"), 2
    )
    s.figures["first_ack_after_pause_s"] = round(
        s.wait_acked_everywhere(30, "after the pause", partitions={partition}, since=t), 2
    )
    time.sleep(max(0.0, 2 * LAG_TIME_S - (time.monotonic() - t)))
    c.resume(victim)
    s.figures["paused_s"] = round(time.monotonic() - t, 2)
    answer = probe.result(30)
    probe.close()
    s.figures["paused_leader_answered"] = answer
    assert answer != "NONE", "the deposed leader acknowledged a write it could not replicate"
    timed(
        lambda: any(
            f"{TOPIC}-{partition}: truncated" in line for line in output_since(c, victim, mark)
        ),
        30,
        "the deposed leader truncating its divergent tail",
    )
    s.finish()


def test_rolling_restart(fault_cluster: ClusterProcess, tmp_path: Path) -> None:
    """Each node in turn: SIGTERM (controlled shutdown moves its leaderships away first),
    start again, wait until every replica is back in sync."""
    c = fault_cluster
    s = Scenario(c, tmp_path / "history")
    s.start()
    for node_id in (1, 2, 3):
        t = time.monotonic()
        c.stop(node_id)
        s.figures[f"node{node_id}_shutdown_s"] = round(time.monotonic() - t, 2)
        s.figures[f"node{node_id}_restart_s"] = _restart(c, node_id)
        wait_full_isr(c, TOPIC, 60)
        s.figures[f"node{node_id}_longest_ack_gap_s"] = round(
            s.longest_ack_gap(t, time.monotonic()), 2
        )
    s.finish()


def test_two_of_three_killed(fault_cluster: ClusterProcess, tmp_path: Path) -> None:
    """kill -9 of one node, then of a second: the survivor holds the only live replica of
    every partition and the controller quorum has lost its majority (every node is a
    voter), so the ISR cannot shrink and no acks=all write may be acknowledged: they time
    out. One node back: service resumes once it is in sync again. Nothing acknowledged is
    lost. Raw probes record what the survivor answers."""
    c = fault_cluster
    s = Scenario(c, tmp_path / "history")
    s.start()
    first, second, survivor = 1, 2, 3
    c.kill(first)
    timed(lambda: all(first not in st["isr"] for st in states(c, TOPIC).values()), 30, "shrink")
    s.wait_acked_everywhere(30, "on two replicas")
    # Asked now: without a quorum, describing the cluster (DescribeQuorum) may time out.
    led = next(p for p, n in sorted(leaders(c, TOPIC).items()) if n == survivor)
    c.kill(second)
    killed = time.monotonic()
    probe = _probe(c, survivor, s)
    answers = [probe.produce(led, f"probe/{led}:{i}", 1_000) for i in range(4)]
    probe.close()
    s.figures["survivor_answers"] = answers
    back = time.monotonic()
    acked_alone = s.acks_between(killed + 1.0, back)
    assert acked_alone == 0, f"{acked_alone} records acknowledged with one replica alive"
    assert "NONE" not in answers
    s.figures["outage_s"] = round(back - killed, 2)
    s.figures["restart_s"] = _restart(c, first)
    s.figures["first_ack_after_return_s"] = round(
        s.wait_acked_everywhere(60, "one node back", since=back), 2
    )
    _restart(c, second)
    s.finish()


def test_whole_cluster_kill9(fault_cluster: ClusterProcess, tmp_path: Path) -> None:
    """kill -9 of all three nodes at once under load (no controlled shutdown, no
    checkpoints), then all three start again: they recover their logs, elect a
    controller and leaders, and every acknowledged record is still there."""
    c = fault_cluster
    s = Scenario(c, tmp_path / "history")
    s.start()
    for node_id in (1, 2, 3):
        c.kill(node_id)
    down = time.monotonic()
    time.sleep(1)
    c.start()
    s.figures["restart_all_s"] = round(time.monotonic() - down - 1, 2)
    s.figures["first_ack_after_restart_s"] = round(
        s.wait_acked_everywhere(60, "after the restart", since=down), 2
    )
    s.finish()


def test_isr_below_min_insync_replicas(fault_cluster: ClusterProcess, tmp_path: Path) -> None:
    """min.insync.replicas=3 (topic config) and a follower killed: once the ISR shrinks to
    two, the leader refuses acks=all writes with NOT_ENOUGH_REPLICAS (appending nothing,
    so the producers' retries land once). The follower back, the ISR grows and the
    retried records are acknowledged."""
    c = fault_cluster
    assignment = [[1, 2, 3], [2, 1, 3]]
    s = Scenario(
        c,
        tmp_path / "history",
        partitions=2,
        assignment=assignment,
        topic_configs={"min.insync.replicas": "3"},
    )
    s.start()
    c.kill(3)
    timed(lambda: all(3 not in st["isr"] for st in states(c, TOPIC).values()), 30, "shrink")
    probe = _probe(c, 1, s)
    answers = [probe.produce(0, f"probe/0:{i}", 2_000) for i in range(3)]
    probe.close()
    s.figures["leader_answers"] = answers
    assert answers == ["NOT_ENOUGH_REPLICAS"] * 3, answers
    refused = time.monotonic()
    time.sleep(1)
    assert s.acks_between(refused, time.monotonic()) == 0, "acks=all acknowledged on 2 of 3"
    s.figures["restart_s"] = _restart(c, 3)
    s.finish()
