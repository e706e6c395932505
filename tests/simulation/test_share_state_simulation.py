"""Seeded simulation of durable share-partition state (see share_state_harness): the
share-group service writes acquisitions, acknowledgements, releases and lock expiries to
the share coordinator's shard while leaders and coordinators restart; acknowledged records
are never delivered again, delivery counts and start offsets never go back, a replay
equals the state before it, and in the end every record is acknowledged or archived.

A failing seed replays alone: ``MOLDAU_SIM_SEED=<seed> python3 -m pytest -q
tests/simulation/test_share_state_simulation.py``."""

from __future__ import annotations

import asyncio

import pytest

from tests.simulation.seeds import replay_hint, seeds
from tests.simulation.share_state_harness import InvariantViolation, ShareStateSimulation

SEEDS = seeds(40)
STEPS = 300


def run(seed: int) -> ShareStateSimulation:
    sim = ShareStateSimulation(seed)

    async def main() -> None:
        for _ in range(STEPS):
            await sim.step()
        await sim.drain()
        sim.check_settled()

    with replay_hint(seed, "tests/simulation/test_share_state_simulation.py", InvariantViolation):
        asyncio.run(main())
    return sim


@pytest.mark.parametrize("seed", SEEDS)
def test_share_state_survives_restarts(seed: int) -> None:
    sim = run(seed)
    assert sim.log_end > 0 and sim.acknowledged and sim.writes > 0


def test_runs_restart_both_sides_and_snapshot() -> None:
    """The schedule does restart leaders and coordinators, over snapshots and updates."""
    sims = [run(seed) for seed in range(6)]
    assert all(s.restarts["leader"] and s.restarts["coordinator"] for s in sims)
    assert {s.records_per_snapshot for s in sims} - {500}


def test_same_seed_same_run() -> None:
    a, b = run(3), run(3)
    assert (a.log, a.deliveries) == (b.log, b.deliveries)


def test_the_check_catches_a_start_offset_going_back() -> None:
    sim = ShareStateSimulation(1)
    sim.log_end = 10
    asyncio.run(sim.fetch("c0"))
    asyncio.run(sim.acknowledge("c0"))
    sim.durable_start = 10**6
    with pytest.raises(InvariantViolation):
        sim.check()
