"""Seeded simulation of online upgrades and downgrades between classic and consumer
groups (see migration_harness): consumer-protocol, eager and cooperative classic members
join, leave, crash, stall past their session and come back as another kind while the
coordinator fails over; after every event no partition is owned twice, the group's type
fits its members, epochs never go back and a failover changes nothing; once calm, every
partition is owned by exactly one member of a Stable group.

A failing seed replays alone: ``MOLDAU_SIM_SEED=<seed> python3 -m pytest -q
tests/simulation/test_migration_simulation.py``."""

from __future__ import annotations

import pytest

from tests.simulation.group_driver import churn
from tests.simulation.migration_harness import (
    KINDS,
    REBALANCE_TIMEOUT_MS,
    SESSION_TIMEOUT_MS,
    InvariantViolation,
    MigrationSimulation,
)
from tests.simulation.seeds import replay_hint, seeds

SEEDS = seeds(20)
QUIESCE_MS = 3 * (SESSION_TIMEOUT_MS + REBALANCE_TIMEOUT_MS)


def run(
    seed: int, members: int = 4, partitions: int = 6, chaos_ms: int = 40_000
) -> MigrationSimulation:
    sim = MigrationSimulation(seed, members, partitions)
    rng = sim.rng
    names = sorted(sim.members)
    kinds = dict(zip(names, [rng.choice(KINDS[1:]) for _ in names], strict=True))

    def act(name: str, action: float) -> None:
        if not sim.members[name].up:
            if action < 0.6:
                sim.start(name, rng.choice(KINDS))
        elif action < 0.12:
            sim.crash(name)
        elif action < 0.3:
            sim.leave(name)
        elif action < 0.42:
            sim.stall(name, rng.choice([500, 3_000, SESSION_TIMEOUT_MS + 2_000]))
        elif action < 0.5:
            sim.failover()
        sim.check()

    with replay_hint(seed, "tests/simulation/test_migration_simulation.py", InvariantViolation):
        # The group starts classic.
        churn(sim, names, lambda name: sim.start(name, kinds[name]), chaos_ms, 1_500, act)
        if not any(m.up for m in sim.members.values()):
            sim.start(names[0], rng.choice(KINDS))
        sim.run_until(sim.now + QUIESCE_MS)
        sim.check_settled()
    return sim


@pytest.mark.parametrize("seed", SEEDS)
def test_migration_safe_under_churn_and_settles(seed: int) -> None:
    sim = run(seed)
    assert sim.events > 50  # the run did something


def test_runs_convert_both_ways() -> None:
    """The schedule does exercise both paths: a seed that never converted tests nothing."""
    totals = {"upgrade": 0, "downgrade": 0}
    for seed in range(10):
        for way, n in run(seed).conversions.items():
            totals[way] += n
    assert totals["upgrade"] > 0 and totals["downgrade"] > 0, totals


def test_same_seed_same_run() -> None:
    a, b = run(7), run(7)
    assert (a.events, a.log) == (b.events, b.log)


def test_the_check_catches_a_partition_owned_twice() -> None:
    sim = MigrationSimulation(1, 2, 4)
    sim.start("m0", "consumer")
    sim.start("m1", "eager")
    sim.members["m0"].owned = frozenset({0})
    sim.members["m1"].owned = frozenset({0})
    with pytest.raises(InvariantViolation):
        sim.check()
