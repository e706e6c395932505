"""Deterministic simulation of the classic group coordinator; hypothesis picks seeds and
scenario shapes.

Consumers join, leave, crash, stall past their session, come back and commit while the
coordinator may fail over; every event is followed by `GroupSimulation.check`
(generations never go back, no partition owned twice in a generation, committed offsets
exactly the acknowledged ones). Then the schedule quiesces and the group must settle:
one Stable generation, every running consumer in it, every partition assigned once.

`MOLDAU_SIM_EXAMPLES` scales the number of seeds (default: the suite's budget).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.simulation.group_driver import churn
from tests.simulation.group_harness import (
    REBALANCE_TIMEOUT_MS,
    SESSION_TIMEOUT_MS,
    GroupSimulation,
    InvariantViolation,
)
from tests.simulation.test_raft_simulation import simulation_settings

EXAMPLES = int(os.environ.get("MOLDAU_SIM_EXAMPLES", "2000")) // 4
QUIESCE_MS = 4 * (SESSION_TIMEOUT_MS + REBALANCE_TIMEOUT_MS)


@dataclass(frozen=True)
class GroupScenario:
    seed: int
    consumers: int = 3
    partitions: int = 6
    chaos_ms: int = 60_000
    event_every_ms: int = 1_000
    failovers: bool = True


def run(scenario: GroupScenario) -> GroupSimulation:
    """Random events during ``chaos_ms``, then calm: raise if an invariant breaks or the
    group does not settle."""
    sim = GroupSimulation(scenario.seed, scenario.consumers, scenario.partitions)
    rng = sim.rng
    names = sorted(sim.consumers)

    def act(name: str, action: float) -> None:
        if not sim.consumers[name].up:
            if action < 0.5:
                sim.start(name)
        elif action < 0.05:
            sim.crash(name)
        elif action < 0.10:
            sim.leave(name)
        elif action < 0.20:
            sim.stall(name, rng.randint(0, 2 * SESSION_TIMEOUT_MS))
        elif action < 0.23 and scenario.failovers:
            sim.failover()
        else:
            sim.commit(name)

    churn(sim, names, sim.start, scenario.chaos_ms, 2 * scenario.event_every_ms, act)
    for name in names:
        if rng.random() < 0.7 and not sim.consumers[name].up:
            sim.start(name)
    sim.run_until(sim.now + QUIESCE_MS)
    sim.check_quiesced()
    return sim


scenarios = st.builds(
    GroupScenario,
    seed=st.integers(0, 2**32 - 1),
    consumers=st.integers(1, 5),
    partitions=st.integers(5, 8),
    chaos_ms=st.integers(5_000, 60_000),
    event_every_ms=st.sampled_from([100, 1_000, 5_000]),
    failovers=st.booleans(),
)


@simulation_settings(EXAMPLES)
@given(scenarios)
def test_classic_group_safe_under_churn_and_settles(scenario: GroupScenario) -> None:
    sim = run(scenario)
    assert sim.events > 0


def test_same_seed_same_run() -> None:
    """Ids and every choice come from the seed: two runs end in the same state."""
    runs = [run(GroupScenario(seed=7, chaos_ms=20_000)) for _ in range(2)]
    assert [sorted(r.coordinator.groups["sim-group"].members) for r in runs][0] == sorted(
        runs[1].coordinator.groups["sim-group"].members
    )
    assert runs[0].log == runs[1].log


def test_a_stuck_member_breaks_the_quiesce_check() -> None:
    """The liveness check can fail: a consumer that never syncs keeps the group unsettled."""
    sim = GroupSimulation(1, 2, 4)
    sim.start("c0")
    sim.run_until(sim.now + QUIESCE_MS)
    sim.check_quiesced()
    sim.consumers["c1"].up = True  # "up" but never joined
    with pytest.raises(InvariantViolation):
        sim.check_quiesced()
