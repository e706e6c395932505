"""Deterministic simulation of the KRaft core; hypothesis picks seeds and scenario shapes.

Every event is followed by the safety checks in `harness.Simulation.check` (one leader per
epoch, log matching, leader completeness, committed records never lost or changed, high
watermark monotonic per node and held by a majority, epochs never going back). After the
chaos the network heals and every node must apply a new record within a bound.

`MOLDAU_SIM_EXAMPLES` scales the number of seeds (default: the suite's budget).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.simulation.harness import InvariantViolation, NetworkParams, Simulation
from tests.simulation.scenarios import LIVENESS_BOUND_MS, Scenario, require_progress, run

EXAMPLES = int(os.environ.get("MOLDAU_SIM_EXAMPLES", "2000"))


def simulation_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )


scenarios = st.builds(
    Scenario,
    seed=st.integers(0, 2**32 - 1),
    voters=st.integers(1, 5),
    observers=st.integers(0, 2),
    chaos_ms=st.integers(1_000, 5_000),
    max_delay_ms=st.integers(1, 40),
    drop_rate=st.sampled_from([0.0, 0.02, 0.1, 0.25]),
    duplicate_rate=st.sampled_from([0.0, 0.05, 0.2]),
    crash_every_ms=st.sampled_from([0, 150, 400, 1500]),
    partition_every_ms=st.sampled_from([0, 300, 1500]),
    append_every_ms=st.integers(30, 400),
    snapshot_every=st.sampled_from([0, 8, 30]),
    fetch_max_bytes=st.sampled_from([256, 1024, 1 << 20]),
    request_timeout_ms=st.sampled_from([2000, 300]),
)


@simulation_settings(EXAMPLES)
@given(scenarios)
def test_safe_under_chaos_and_live_once_healed(scenario: Scenario) -> None:
    sim = run(scenario)
    for node in sim.nodes.values():
        # Every state machine is the committed sequence up to where it has applied.
        assert 0 < node.sm.next_offset <= len(sim.history.committed)
        assert node.sm.digest == sim.history.digests[node.sm.next_offset]


@simulation_settings(max(EXAMPLES // 5, 10))
@given(
    seed=st.integers(0, 2**32 - 1),
    voters=st.sampled_from([1, 3, 5]),
    observers=st.integers(0, 1),
    max_delay_ms=st.integers(1, 30),
    drop_rate=st.sampled_from([0.0, 0.05]),
    duplicate_rate=st.sampled_from([0.0, 0.1]),
    snapshot_every=st.integers(3, 12),
    fetch_max_bytes=st.sampled_from([256, 512, 1 << 20]),
)
def test_far_behind_replica_catches_up_through_fetch_snapshot(
    seed: int,
    voters: int,
    observers: int,
    max_delay_ms: int,
    drop_rate: float,
    duplicate_rate: float,
    snapshot_every: int,
    fetch_max_bytes: int,
) -> None:
    if voters == 1 and observers == 0:
        observers = 1
    sim = Simulation(
        seed,
        voters,
        observers,
        NetworkParams(1, max_delay_ms, drop_rate, duplicate_rate),
        snapshot_every=snapshot_every,
        fetch_max_bytes=fetch_max_bytes,
    )
    for node_id in sim.nodes:
        sim.start(node_id)
    assert sim.run(
        LIVENESS_BOUND_MS, lambda: bool(sim.leaders()) and len(sim.history.committed) > 0
    )
    leader = sim.leaders()[0]
    lagger = next(n for n in sorted(sim.nodes, reverse=True) if n != leader.node_id)
    sim.crash(lagger)
    lagging_end = sim.nodes[lagger].log.log_end_offset

    def leader_cut_past_lagger() -> bool:
        return any(n.log.log_start_offset > lagging_end for n in sim.leaders())

    deadline = sim.now + LIVENESS_BOUND_MS
    while not leader_cut_past_lagger():
        if sim.now > deadline:
            raise InvariantViolation("the leader never snapshotted past the stopped replica")
        sim.client_append()
        sim.run(sim.now + 50)
    sim.start(lagger)
    # Clients slow down, so a snapshot outlives its download even when chunks get lost.
    require_progress(sim, LIVENESS_BOUND_MS, append_every_ms=1000)
    node = sim.nodes[lagger]
    assert node.fetch_snapshot_chunks >= 1, "it caught up through FetchSnapshot"
    assert node.sm.snapshot_loads >= 1
    assert node.log.log_start_offset > lagging_end
    sim.check_logs_match()
