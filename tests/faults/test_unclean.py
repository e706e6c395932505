"""Unclean leader election (``unclean.leader.election.enable``, a topic config, off by
default). Replicas on nodes 1 and 2, min.insync.replicas=1: node 2 is paused until it
leaves the ISR and node 1 acknowledges writes alone; then node 1 dies and node 2 comes
back, out of sync.

- Off: no leader is elected (the partition stays offline, ISR [1]) and nothing is lost:
  node 1 restarted leads again and node 2 catches up from it.
- On: node 2 is elected with what it has and takes writes; the writes node 1
  acknowledged alone are lost, as documented, and node 1 restarted truncates them and
  follows: the replicas converge. An idempotent producer that wrote them sees the gap in
  its sequence numbers (OUT_OF_ORDER_SEQUENCE_NUMBER, fatal in librdkafka: it must be
  recreated).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from moldau.testing import ClusterProcess
from tests.faults.nemesis import states, timed
from tests.faults.probe import ProduceProbe
from tests.faults.scenario import TOPIC, Scenario

pytestmark = pytest.mark.slow

ASSIGNMENT = [[1, 2], [1, 2]]


def _scenario(c: ClusterProcess, tmp_path: Path, unclean: bool) -> Scenario:
    configs = {"min.insync.replicas": "1"}
    if unclean:
        configs["unclean.leader.election.enable"] = "true"
    s = Scenario(
        c, tmp_path / "history", partitions=2, assignment=ASSIGNMENT, topic_configs=configs
    )
    s.start()
    c.pause(2)
    timed(lambda: all(st["isr"] == [1] for st in states(c, TOPIC).values()), 30, "ISR [1]")
    alone = time.monotonic()
    s.wait_acked_everywhere(30, "acknowledged by node 1 alone", since=alone)
    time.sleep(1)
    c.kill(1)
    c.resume(2)
    return s


def _offline(c: ClusterProcess) -> bool:
    return all(st["leader"] == -1 and st["isr"] == [1] for st in states(c, TOPIC).values())


def test_unclean_election_off_loses_nothing(fault_cluster: ClusterProcess, tmp_path: Path) -> None:
    c = fault_cluster
    s = _scenario(c, tmp_path, unclean=False)
    timed(lambda: _offline(c), 30, "the partitions offline (node 1 fenced)")
    offline = time.monotonic()
    time.sleep(3)
    assert _offline(c), "an out-of-sync replica was elected with unclean elections off"
    assert s.acks_between(offline, time.monotonic()) == 0
    c.start_node(1)
    timed(lambda: all(st["leader"] == 1 for st in states(c, TOPIC).values()), 30, "node 1 leads")
    s.finish()


def test_unclean_election_on_loses_what_the_old_leader_acknowledged_alone(
    fault_cluster: ClusterProcess, tmp_path: Path
) -> None:
    c = fault_cluster
    s = _scenario(c, tmp_path, unclean=True)
    timed(
        lambda: all(st["leader"] == 2 for st in states(c, TOPIC).values()),
        30,
        "node 2 elected uncleanly",
    )
    node = c.node(2)
    probe = ProduceProbe(node.host, node.port, TOPIC, s.workload.recorder)
    answers = [probe.produce(p, f"probe/{p}:0", 5_000) for p in (0, 1)]
    probe.close()
    assert answers == ["NONE", "NONE"], f"node 2 does not take writes: {answers}"
    c.start_node(1)
    report = s.finish(
        tolerate=frozenset(
            {"lost", "phantom", "unconsumed", "poll_nonmonotonic", "poll_skip", "moved"}
        ),
        producers_may_die=True,
    )
    assert report.lost, "node 1 acknowledged records alone; an unclean election must lose them"
