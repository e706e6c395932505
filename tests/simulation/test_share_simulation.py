"""Seeded simulation of a share group (see share_harness): consumers joining, crashing,
leaving and acknowledging late on a virtual clock, invariants checked after every event."""

from __future__ import annotations

import pytest

from tests.simulation.share_harness import InvariantViolation, ShareSimulation

CHAOS_MS = 60_000
SETTLE_MS = 120_000


def run(seed: int, consumers: int) -> ShareSimulation:
    sim = ShareSimulation(seed, consumers)
    sim.start()
    sim.run_until(sim.now + CHAOS_MS)
    sim.producing = False
    sim.run_until(sim.now + SETTLE_MS)
    sim.check_settled()
    return sim


@pytest.mark.parametrize("seed", range(12))
def test_share_group_safe_under_churn_and_settles(seed: int) -> None:
    sim = run(seed, consumers=1 + seed % 5)
    assert sim.events > 0 and sim.log_end > 0
    assert sum(sim.acknowledged.values()) > 0


def test_same_seed_same_run() -> None:
    first, second = run(3, 3), run(3, 3)
    assert (first.deliveries, first.acknowledged) == (second.deliveries, second.acknowledged)


def test_the_settle_check_can_fail() -> None:
    """A consumer that never comes back leaves records unacknowledged: the check says so."""
    sim = ShareSimulation(1, 1)
    sim.start()
    sim.run_until(sim.now + 3_000)
    sim.consumers["c0"].up = False  # gone for good, without a word
    sim.producing = False
    sim.run_until(sim.now + 1_000)
    with pytest.raises(InvariantViolation):
        sim.check_settled()
