"""Network partitions between a leader and the rest of the cluster (network namespaces,
see ``tests/faults/netns.py``; skipped with the reason where they cannot be created).

The cut-off leader keeps its clients (they reach every node) but not its followers nor
the controller quorum's majority: it must not acknowledge anything, the majority side
must elect new leaders and go on, and after the heal the old leader must become a
follower and truncate the tail it appended alone. Once as the active controller too."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.cluster import FAST, FaultCluster
from tests.faults.netns import NamespacedCluster, Topology, unavailable
from tests.faults.probe import ProduceProbe
from tests.faults.scenario import TOPIC, Scenario

pytestmark = pytest.mark.slow

LAG_TIME_S = int(FAST["replica.lag.time.max.ms"]) / 1000


@pytest.fixture
def netns_cluster(tmp_path: Path) -> Iterator[tuple[FaultCluster, Topology]]:
    why = unavailable()
    if why is not None:
        pytest.skip(f"network partitions need network namespaces: {why}")
    topology = Topology(3)
    topology.create()
    fc = FaultCluster(NamespacedCluster(topology, tmp_path / "cluster", overrides=dict(FAST)))
    try:
        fc.start()
        yield fc, topology
    finally:
        fc.stop()
        fc.dump_logs(tmp_path)
        topology.destroy()


@pytest.mark.parametrize("victim_role", ["controller", "not-controller"])
def test_leader_cut_off(
    netns_cluster: tuple[FaultCluster, Topology], tmp_path: Path, victim_role: str
) -> None:
    fc, topology = netns_cluster
    s = Scenario(fc, tmp_path / "history")
    s.start()
    leaders = fc.leaders(TOPIC)
    controller = fc.controller()
    if victim_role == "controller":
        assert controller in leaders.values(), "the controller leads no partition"
        victim = controller
    else:
        victim = next(n for n in leaders.values() if n != controller)
    led = {p for p, n in leaders.items() if n == victim}
    other = next(n for n in (1, 2, 3) if n != victim)
    node = fc.node(victim)
    before = len(node.output)
    t = time.monotonic()
    topology.isolate(victim)
    s.figures["new_leader_s"] = round(
        fc.wait_for(
            lambda: all(
                st.leader not in (victim, -1)
                for p, st in fc.describe(TOPIC, via=other).items()
                if p in led
            ),
            30,
            "the majority side electing new leaders",
        ),
        2,
    )
    s.figures["first_ack_after_cut_s"] = round(
        s.wait_acked_everywhere(30, "after the cut", partitions=led, since=t), 2
    )
    # The cut-off node still believes it leads: a write it takes stays unacknowledged.
    probe = ProduceProbe(node.host, node.client_port, TOPIC, s.workload.recorder)
    answer = probe.produce(min(led), f"probe/{min(led)}:0", 2_000)
    probe.close()
    s.figures["cut_off_leader_answered"] = answer
    assert answer != "NONE", "a leader cut off from its followers acknowledged a write"
    time.sleep(max(0.0, 2 * LAG_TIME_S - (time.monotonic() - t)))
    topology.heal()
    s.figures["cut_s"] = round(time.monotonic() - t, 2)
    healed = time.monotonic()
    fc.wait_for(
        lambda: any(
            f"{TOPIC}-{p}: truncated" in line for line in node.output[before:] for p in led
        ),
        60,
        "the old leader truncating the tail it wrote alone",
    )
    s.figures["truncated_after_heal_s"] = round(time.monotonic() - healed, 2)
    s.finish()
