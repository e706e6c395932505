"""Network partitions between a leader and the rest of the cluster (network namespaces,
see ``tests/faults/netns.py``; skipped with the reason where they cannot be created).

The cut-off leader keeps its clients (they reach every node) but not its followers nor
the controller quorum's majority: it must not acknowledge anything, the majority side
must elect new leaders (whose epoch fences the old one) and go on, and after the heal the
old leader must become a follower and truncate the tail it appended alone. Once as the
active controller too."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from moldau.testing import ClusterProcess
from tests.faults.nemesis import LAG_TIME_S, leaders, new_leaders, output_since, timed
from tests.faults.netns import Topology
from tests.faults.probe import ProduceProbe
from tests.faults.scenario import TOPIC, Scenario

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("victim_role", ["controller", "not-controller"])
def test_leader_cut_off(
    netns_cluster: tuple[ClusterProcess, Topology], tmp_path: Path, victim_role: str
) -> None:
    c, topology = netns_cluster
    s = Scenario(c, tmp_path / "history")
    s.start()
    led_by = leaders(c, TOPIC)
    controller = c.controller()
    if victim_role == "controller":
        assert controller in led_by.values(), "the controller leads no partition"
        victim = controller
    else:
        victim = next(n for n in led_by.values() if n != controller)
    led = {p for p, n in led_by.items() if n == victim}
    other = next(n for n in (1, 2, 3) if n != victim)
    node = c.node(victim)
    mark = node.lines_seen
    t = time.monotonic()
    topology.isolate(victim)
    s.figures["new_leader_s"] = round(
        timed(
            lambda: new_leaders(c, TOPIC, led, victim, via=other),
            30,
            "the majority side electing new leaders",
        ),
        2,
    )
    s.figures["first_ack_after_cut_s"] = round(
        s.wait_acked_everywhere(30, "after the cut", partitions=led, since=t), 2
    )
    # The cut-off node may still believe it leads: a write it takes stays unacknowledged.
    probe = ProduceProbe(node.host, node.port, TOPIC, s.workload.recorder)
    answer = probe.produce(min(led), f"probe/{min(led)}:0", 2_000)
    probe.close()
    s.figures["cut_off_leader_answered"] = answer
    assert answer != "NONE", "a leader cut off from its followers acknowledged a write"
    time.sleep(max(0.0, 2 * LAG_TIME_S - (time.monotonic() - t)))
    topology.heal()
    s.figures["cut_s"] = round(time.monotonic() - t, 2)
    healed = time.monotonic()
    timed(
        lambda: any(
            f"{TOPIC}-{p}: truncated" in line for line in output_since(c, victim, mark) for p in led
        ),
        60,
        "the old leader truncating the tail it wrote alone",
    )
    s.figures["truncated_after_heal_s"] = round(time.monotonic() - healed, 2)
    s.finish()
