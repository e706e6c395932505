"""Deterministic simulation of the quorum controller; hypothesis picks seeds and shapes.

Every event is followed by the checks in `controller_harness.ControllerSimulation.check`
(fenced brokers lead nothing, leaders in their ISR, no leaderless partition with a live
ISR member, epochs never going back, silent brokers fenced within a session). After the
chaos every broker comes back and must be unfenced, and every partition led, within a
bound. `MOLDAU_SIM_EXAMPLES` scales the number of seeds, as for the Raft simulation.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.simulation.controller_harness import (
    SESSION_TIMEOUT_MS,
    ControllerSimulation,
    InvariantViolation,
    Scenario,
)

EXAMPLES = max(int(os.environ.get("MOLDAU_SIM_EXAMPLES", "2000")) // 10, 5)
HEAL_BOUND_MS = 3 * SESSION_TIMEOUT_MS

scenarios = st.builds(
    Scenario,
    seed=st.integers(0, 2**32 - 1),
    brokers=st.integers(1, 5),
    chaos_ms=st.integers(10_000, 90_000),
    unclean=st.booleans(),
    event_every_ms=st.sampled_from([100, 700, 3_000]),
)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(scenarios)
def test_controller_safe_under_chaos_and_live_once_healed(scenario: Scenario) -> None:
    sim = ControllerSimulation(scenario)
    try:
        sim.start()
        sim.chaos(scenario.chaos_ms)
        sim.heal()
        sim.run(sim.clock.now_ms() + HEAL_BOUND_MS)
        image = sim.image
        fenced = sorted(b.broker_id for b in image.brokers.values() if not b.alive)
        if fenced or len(image.brokers) != scenario.brokers:
            raise InvariantViolation(f"healed brokers not all serving: fenced {fenced}")
        leaderless = [
            f"{t.name}-{p.partition_id}"
            for t in image.topics.values()
            for p in t.partitions.values()
            if p.leader < 0
        ]
        if leaderless:
            raise InvariantViolation(f"leaderless once healed: {leaderless}")
        assert sim.events > 0
    finally:
        sim.close()


def test_same_seed_same_run() -> None:
    """Ids and schedule come from the seed: two runs end in the same metadata."""
    images = []
    for _ in range(2):
        sim = ControllerSimulation(Scenario(seed=7, brokers=4, chaos_ms=30_000))
        sim.start()
        sim.chaos(30_000)
        images.append((sim.image, sim.events))
        sim.close()
    assert images[0] == images[1]
    assert images[0][0].topics, "the run created topics"


def test_the_checks_catch_a_fenced_leader() -> None:
    """The invariants can fail: a leader fenced behind the controller's back."""
    from moldau.metadata.records import FenceBrokerRecord

    sim = ControllerSimulation(Scenario(seed=3, brokers=3))
    sim.start()
    sim.chaos(20_000)
    sim.heal()
    sim.run(sim.clock.now_ms() + HEAL_BOUND_MS)
    leader = next(p.leader for t in sim.image.topics.values() for p in t.partitions.values())
    broker = sim.image.brokers[leader]
    sim.quorum.handle_commit(
        [FenceBrokerRecord(id=leader, epoch=broker.epoch)], sim.image.offset + 1
    )
    try:
        sim.check()
    except InvariantViolation as e:
        assert "leads but is not alive" in str(e)
    else:
        raise AssertionError("a fenced leader went unnoticed")
    finally:
        sim.close()
