"""Seeded simulation of KIP-848 consumer groups (see consumer_group_harness): members
join, leave, crash, stall past their session and come back, the topic grows and the
coordinator fails over; after every event no partition is owned twice and epochs never
go back; once calm, every partition is owned by exactly one member of a Stable group."""

from __future__ import annotations

import pytest

from tests.simulation.consumer_group_harness import (
    REBALANCE_TIMEOUT_MS,
    SESSION_TIMEOUT_MS,
    ConsumerGroupSimulation,
    InvariantViolation,
)
from tests.simulation.group_driver import churn
from tests.simulation.seeds import seeds

SEEDS = seeds(20)
QUIESCE_MS = 3 * (SESSION_TIMEOUT_MS + REBALANCE_TIMEOUT_MS)


def run(
    seed: int, members: int = 4, partitions: int = 6, chaos_ms: int = 40_000
) -> ConsumerGroupSimulation:
    sim = ConsumerGroupSimulation(seed, members, partitions)
    rng = sim.rng
    names = sorted(sim.members)

    def act(name: str, action: float) -> None:
        if not sim.members[name].up:
            if action < 0.6:
                sim.start(name)
        elif action < 0.15:
            sim.crash(name)
        elif action < 0.3:
            sim.leave(name)
        elif action < 0.45:
            sim.stall(name, rng.choice([500, 3_000, SESSION_TIMEOUT_MS + 2_000]))
        elif action < 0.5:
            sim.grow_topic()
        elif action < 0.55:
            sim.failover()

    churn(sim, names, sim.start, chaos_ms, 1_500, act)
    if not any(m.up for m in sim.members.values()):
        sim.start(names[0])
    sim.run_until(sim.now + QUIESCE_MS)
    sim.check_settled()
    return sim


@pytest.mark.parametrize("seed", SEEDS)
def test_consumer_group_safe_under_churn_and_settles(seed: int) -> None:
    sim = run(seed)
    assert sim.events > 50  # the run did something


def test_same_seed_same_run() -> None:
    a, b = run(7), run(7)
    assert (a.events, a.log) == (b.events, b.log)


def test_the_check_catches_a_partition_owned_twice() -> None:
    sim = ConsumerGroupSimulation(1, 2, 4)
    sim.start("m0")
    sim.start("m1")
    sim.members["m1"].owned = sim.members["m0"].owned | {0}
    with pytest.raises(InvariantViolation):
        sim.check()
