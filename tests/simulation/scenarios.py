"""Scenarios for the simulation: a chaos phase, then a healed network that must make progress."""

from __future__ import annotations

from dataclasses import dataclass

from moldau.raft import QuorumConfig, VoterAddress
from moldau.raft.memory_log import LogEntry
from tests.simulation.harness import InvariantViolation, NetworkParams, SimNode, Simulation

LIVENESS_BOUND_MS = 30_000


@dataclass(frozen=True)
class Scenario:
    seed: int
    voters: int = 3
    observers: int = 0
    chaos_ms: int = 6_000
    max_delay_ms: int = 10
    drop_rate: float = 0.0
    duplicate_rate: float = 0.0
    crash_every_ms: int = 0
    partition_every_ms: int = 0
    append_every_ms: int = 100
    snapshot_every: int = 0
    fetch_max_bytes: int = 8 * 1024 * 1024
    request_timeout_ms: int = 2000


def build(scenario: Scenario) -> Simulation:
    voters = {v: VoterAddress("sim", 9000 + v) for v in range(1, scenario.voters + 1)}
    return Simulation(
        scenario.seed,
        scenario.voters,
        scenario.observers,
        NetworkParams(1, scenario.max_delay_ms, scenario.drop_rate, scenario.duplicate_rate),
        snapshot_every=scenario.snapshot_every,
        fetch_max_bytes=scenario.fetch_max_bytes,
        config=QuorumConfig(voters=voters, request_timeout_ms=scenario.request_timeout_ms),
    )


def run(scenario: Scenario) -> Simulation:
    """Chaos until `chaos_ms`, then heal everything; raise if safety or liveness fails."""
    sim = build(scenario)
    rng = sim.rng
    for node_id in sim.nodes:
        sim.start(node_id)
    healed = False

    def append_loop() -> None:
        sim.client_append()
        sim.at(sim.now + rng.randint(1, 2 * scenario.append_every_ms), append_loop)

    def crash_loop() -> None:
        if healed:
            return
        victim = rng.choice(sorted(sim.nodes))
        leaders = sim.leaders()
        if leaders and rng.random() < 0.3:
            # Controlled shutdown: the leader resigns, then stops a little later.
            victim = leaders[0].node_id
            sim.resign(victim)
            sim.at(sim.now + rng.randint(0, 300), lambda: stop(victim))
        else:
            stop(victim)
        sim.at(sim.now + rng.randint(1, 2 * scenario.crash_every_ms), crash_loop)

    def stop(node_id: int) -> None:
        if sim.nodes[node_id].client is not None and not healed:
            sim.crash(node_id)
            sim.at(sim.now + rng.randint(10, 3 * scenario.crash_every_ms), lambda: restart(node_id))

    def restart(node_id: int) -> None:
        if sim.nodes[node_id].client is None and not healed:
            sim.start(node_id)

    def partition_loop() -> None:
        if healed:
            return
        if sim.blocked:
            sim.heal()
        elif rng.random() < 0.5:
            size = rng.randint(1, max(1, len(sim.nodes) // 2))
            sim.partition(set(rng.sample(sorted(sim.nodes), size)))
        else:  # some one-way links fail, the rest work
            links = [(a, b) for a in sim.nodes for b in sim.nodes if a != b]
            sim.blocked = {link for link in links if rng.random() < 0.3}
        sim.at(sim.now + rng.randint(1, 2 * scenario.partition_every_ms), partition_loop)

    sim.at(rng.randint(0, scenario.append_every_ms), append_loop)
    if scenario.crash_every_ms:
        sim.at(rng.randint(1, 2 * scenario.crash_every_ms), crash_loop)
    if scenario.partition_every_ms:
        sim.at(rng.randint(1, 2 * scenario.partition_every_ms), partition_loop)
    sim.run(scenario.chaos_ms)

    healed = True
    sim.heal()
    sim.network = NetworkParams(1, scenario.max_delay_ms)
    for node_id, node in sim.nodes.items():
        if node.client is None:
            sim.start(node_id)
    require_progress(sim, LIVENESS_BOUND_MS)
    sim.check_logs_match()
    return sim


def require_progress(sim: Simulation, bound_ms: int, append_every_ms: int = 100) -> None:
    """From now on a record must be appended, committed and applied by every node in time."""
    committed_before = len(sim.history.committed)
    first_fresh = sim.appended + 1
    applied_by: set[int] = set()

    def on_apply(node: SimNode, entry: LogEntry) -> None:
        value = entry.value
        if isinstance(value, bytes) and int(value.split(b"-")[1]) >= first_fresh:
            applied_by.add(node.node_id)

    sim.on_apply = on_apply
    start = sim.now
    while sim.now < start + bound_ms:
        sim.client_append()
        if sim.run(sim.now + append_every_ms, lambda: len(applied_by) == len(sim.nodes)):
            sim.on_apply = None
            assert len(sim.history.committed) > committed_before
            return
    leaders = [(n.node_id, n.client.epoch) for n in sim.leaders() if n.client]
    raise InvariantViolation(
        f"no progress within {bound_ms} ms of healing: leaders {leaders}, "
        f"applied by {sorted(applied_by)}, states "
        + ", ".join(
            f"{n.node_id}:{n.client.state.name}@{n.client.epoch}" for n in sim.running() if n.client
        )
    )
