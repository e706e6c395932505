"""Deterministic simulation of durable share-partition state across restarts: the real
:class:`ShareGroupService` (the share-partition leader and its persister logic) writing to
the pure :class:`ShareCoordinatorShard` (the share coordinator), whose ShareSnapshot and
ShareUpdate records go to a simulated ``__share_group_state`` log. Virtual clock, one seed.

Everything random comes from the seed: records produced, consumers acquiring, accepting,
releasing and rejecting records or leaving, acquisition locks expiring, writes that fail
(the persister gave up: the leader reads its state again), the snapshot threshold
(``records_per_snapshot``), share-partition leader restarts (a new leader epoch reads the
state back) and share coordinator restarts (a new shard replays the log, compacted or not,
as ``__share_group_state`` is).

Checked after every step, raising `InvariantViolation` at the first breach:
- a record whose acknowledgement (accept or reject) was answered without error is never
  delivered again;
- a delivery's count is above the durable count of that record, and durable delivery
  counts never go down;
- the durable start offset (and the leader's) never goes back;
- a coordinator restart changes nothing: the replayed state equals the state before;
And at the end (production stopped, faults off, consumers accepting): the start offset
reaches the log end, and every record not acknowledged was delivered up to the limit.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from moldau.clock import ManualClock
from moldau.coordinator.share.partition import AcknowledgeType
from moldau.coordinator.share.service import ShareGroupService, ShareSettings
from moldau.coordinator.share_state.shard import (
    ShareCoordinatorShard,
    ShareGroupOffset,
    ShareKey,
    ShareStateLoader,
    WriteState,
)
from moldau.ids import SeededIds
from moldau.protocol.errors import ErrorCode

GROUP, TOPIC, PARTITION = "sim-share", "t", 0
TOPIC_ID = b"\x05" * 16
KEY: ShareKey = (GROUP, TOPIC_ID, PARTITION)
SETTINGS = ShareSettings(record_lock_duration_ms=2_000, delivery_count_limit=4, max_record_locks=30)
CONSUMERS = ("c0", "c1", "c2")


class InvariantViolation(AssertionError):
    pass


@dataclass
class Store:
    """The share coordinator as the service's StateStore: answers at once; a write may
    fail before it is applied (the persister's retries ran out)."""

    sim: ShareStateSimulation

    async def read(self, key: ShareKey, leader_epoch: int) -> tuple[ErrorCode, ShareGroupOffset]:
        return self.sim.shard.read(key, leader_epoch)

    async def write(self, key: ShareKey, data: WriteState) -> ErrorCode:
        if self.sim.rng.random() < self.sim.write_failures:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error, effects = self.sim.shard.write(key, data)
        self.sim.log.extend((r.key, r.value) for r in effects.records)
        self.sim.writes += not error
        return error

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> ErrorCode:
        raise AssertionError("not simulated")

    async def delete(self, key: ShareKey) -> ErrorCode:
        raise AssertionError("not simulated")


@dataclass
class ShareStateSimulation:
    seed: int
    rng: random.Random = field(init=False)
    clock: ManualClock = field(default_factory=lambda: ManualClock(1_700_000_000_000))
    log: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    log_end: int = 0
    leader_epoch: int = 0
    write_failures: float = 0.05
    writes: int = 0
    restarts: dict[str, int] = field(default_factory=lambda: {"leader": 0, "coordinator": 0})
    held: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    acknowledged: set[int] = field(default_factory=set)
    deliveries: dict[int, int] = field(default_factory=dict)  # most deliveries seen
    durable_counts: dict[int, int] = field(default_factory=dict)
    durable_start: int = -1

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.records_per_snapshot = self.rng.choice([1, 2, 3, 5, 500])
        self.shard = ShareCoordinatorShard(self.records_per_snapshot)
        # the group coordinator initializes the state (start -1: the leader starts at
        # share.auto.offset.reset) before it assigns the share-partition to a member
        self.log.extend((r.key, r.value) for r in self.shard.initialize(KEY, 0, -1).records)
        self.store = Store(self)
        self.service = self._new_leader()
        self.held = {c: [] for c in CONSUMERS}

    def _new_leader(self) -> ShareGroupService:
        return ShareGroupService(
            SETTINGS,
            self.clock,
            SeededIds(self.seed),
            notify=lambda key: None,
            group_configs=lambda group: {"share.auto.offset.reset": "earliest"},
            store=self.store,
        )

    async def settle(self) -> None:
        """Let the service's background writes (lock expiry, a member leaving) finish."""
        while self.service._tasks:
            await asyncio.sleep(0)

    # -- steps -----------------------------------------------------------------------
    async def step(self) -> None:
        roll = self.rng.random()
        consumer = self.rng.choice(CONSUMERS)
        if roll < 0.15:
            self.log_end += self.rng.randint(1, 8)
        elif roll < 0.45:
            await self.fetch(consumer)
        elif roll < 0.75:
            await self.acknowledge(consumer)
        elif roll < 0.85:
            self.clock.advance(self.rng.randint(0, 3 * SETTINGS.record_lock_duration_ms // 2))
            self.service.tick()
        elif roll < 0.9:
            self.service.release_member(GROUP, consumer)
            self.held[consumer] = []
        elif roll < 0.95:
            self.restart_leader()
        else:
            self.restart_coordinator()
        await self.settle()
        self.check()

    async def fetch(self, consumer: str) -> None:
        error, sp = await self.service.share_partition(
            GROUP, TOPIC, PARTITION, 0, self.log_end, TOPIC_ID, self.leader_epoch
        )
        if error or sp is None:
            return  # the state could not be read or written: the client fetches again
        read_to = min(self.log_end, sp.fetch_offset() + self.rng.randint(1, 20)) - 1
        durable = self._durable_count()
        for a in sp.acquire(consumer, read_to, self.rng.randint(1, 15), self.clock.now_ms()):
            for offset in range(a.first_offset, a.last_offset + 1):
                if offset in self.acknowledged:
                    raise InvariantViolation(f"{offset} delivered again after it was acknowledged")
                if a.delivery_count <= durable(offset):
                    raise InvariantViolation(
                        f"{offset} delivered with count {a.delivery_count}, "
                        f"durable count {durable(offset)}"
                    )
                self.deliveries[offset] = max(self.deliveries.get(offset, 0), a.delivery_count)
            self.held[consumer].append((a.first_offset, a.last_offset))

    async def acknowledge(self, consumer: str, kind: AcknowledgeType | None = None) -> None:
        if not self.held[consumer]:
            return
        first, last = self.held[consumer].pop(self.rng.randrange(len(self.held[consumer])))
        if kind is None:
            kind = self.rng.choices(
                [AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT],
                [0.7, 0.2, 0.1],
            )[0]
        error = await self.service.acknowledge(
            GROUP, consumer, TOPIC, PARTITION, [(first, last, [int(kind)])], TOPIC_ID
        )
        if not error and kind is not AcknowledgeType.RELEASE:
            self.acknowledged.update(range(first, last + 1))

    def restart_leader(self) -> None:
        """The share-partition leader moves (a new leader epoch): what was in memory only
        (acquisitions, their locks) is gone; the new leader reads the durable state."""
        self.restarts["leader"] += 1
        self.leader_epoch += 1
        self.service = self._new_leader()
        self.held = {c: [] for c in CONSUMERS}

    def restart_coordinator(self) -> None:
        """The share coordinator moves: a new shard replays the log, maybe compacted
        (only the last record of each key stays)."""
        self.restarts["coordinator"] += 1
        records = self.log
        if self.rng.random() < 0.5:
            last = {key: i for i, (key, _) in enumerate(records)}
            records = [r for i, r in enumerate(records) if last[r[0]] == i]
        loader = ShareStateLoader(self.records_per_snapshot)
        for key, value in records:
            loader.replay(key, value)
        shard = loader.finish(self.clock.now_ms())
        before, after = _durable(self.shard, KEY), _durable(shard, KEY)
        if before != after:
            raise InvariantViolation(f"coordinator restart changed the state:\n{before}\n{after}")
        self.shard = shard

    # -- invariants ------------------------------------------------------------------
    def _durable_count(self):  # type: ignore[no-untyped-def]
        state = self.shard.states.get(KEY)
        batches = state.batches if state is not None else ()

        def count(offset: int) -> int:
            return next((b.delivery_count for b in batches if b.first <= offset <= b.last), 0)

        return count

    def check(self) -> None:
        state = self.shard.states.get(KEY)
        if state is None:
            return
        if state.start_offset < self.durable_start:
            raise InvariantViolation(
                f"durable start offset went back: {self.durable_start} -> {state.start_offset}"
            )
        self.durable_start = state.start_offset
        for b in state.batches:
            for offset in range(max(b.first, state.start_offset), b.last + 1):
                if b.delivery_count < self.durable_counts.get(offset, 0):
                    raise InvariantViolation(
                        f"{offset}: durable delivery count went down "
                        f"{self.durable_counts[offset]} -> {b.delivery_count}"
                    )
                self.durable_counts[offset] = b.delivery_count
        sp = self.service.partitions.get((GROUP, TOPIC, PARTITION))
        if sp is not None and sp.start_offset < self.durable_start:
            raise InvariantViolation(f"leader start {sp.start_offset} < {self.durable_start}")

    async def drain(self, max_steps: int = 5_000) -> None:
        """No more records or faults; consumers accept what they get until all is done."""
        self.write_failures = 0.0
        for _ in range(max_steps):
            state = self.shard.states.get(KEY)
            if state is not None and state.start_offset >= self.log_end:
                break
            consumer = self.rng.choice(CONSUMERS)
            await self.fetch(consumer)
            while self.held[consumer]:
                await self.acknowledge(consumer, AcknowledgeType.ACCEPT)
            self.clock.advance(SETTINGS.record_lock_duration_ms)
            self.service.tick()
            await self.settle()
            self.check()

    def check_settled(self) -> None:
        state = self.shard.states.get(KEY)
        if state is None or state.start_offset != self.log_end:
            raise InvariantViolation(
                f"start offset {state and state.start_offset} != log end {self.log_end}"
            )
        for offset in range(self.log_end):
            if offset not in self.acknowledged and (
                self.deliveries.get(offset, 0) < SETTINGS.delivery_count_limit
            ):
                raise InvariantViolation(f"{offset} archived after {self.deliveries.get(offset)}")


def _durable(shard: ShareCoordinatorShard, key: ShareKey) -> tuple[object, ...] | None:
    state = shard.states.get(key)
    if state is None:
        return None
    return (state.state_epoch, state.leader_epoch, state.start_offset, state.batches)
