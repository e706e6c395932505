"""Deterministic simulation of a share group on one partition: the pure
:class:`ShareGroupService` (membership and the share-partition), simulated share
consumers, a growing log, a virtual clock, one seed.

Everything random comes from the seed: when records are produced, when consumers join,
fetch, take long to process (acknowledging after their lock expired), release or reject
records, leave (closing their share session) or crash (stop heartbeating: the session
timeout removes them and their records go back).

Checked after every event, raising `InvariantViolation` at the first breach:
- no record is acknowledged (accepted or rejected) twice;
- a record is never held by two consumers at once: an acquisition only hands out records
  no live lock covers;
- delivery counts only grow, by one per delivery, never past the limit;
- the in-flight window stays within ``max_record_locks``.
And at the end (production stopped, healthy consumers left running): every record was
delivered until it was acknowledged, rejected or archived after its last delivery.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from moldau.clock import ManualClock
from moldau.coordinator.share.group import Heartbeat, HeartbeatResult
from moldau.coordinator.share.partition import AcknowledgeType, Acquired, RecordState
from moldau.coordinator.share.service import TICK_MS, ShareGroupService, ShareSettings
from moldau.ids import SeededIds
from moldau.protocol.errors import ErrorCode

GROUP, TOPIC, PARTITION = "sim", "t", 0
SETTINGS = ShareSettings(
    record_lock_duration_ms=3_000,
    delivery_count_limit=4,
    max_record_locks=40,
    session_timeout_ms=6_000,
    heartbeat_interval_ms=1_000,
)


class InvariantViolation(AssertionError):
    pass


T = TypeVar("T")


def at_once(coro: Coroutine[Any, Any, T]) -> T:
    """The result of a service coroutine that never waits (a service without a state
    store), without an event loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    raise AssertionError("the coroutine waited")


@dataclass
class SimConsumer:
    name: str
    up: bool = False
    incarnation: int = 0
    member_id: str = ""
    epoch: int = 0
    held: list[tuple[int, int]] = field(default_factory=list)  # ranges being processed


class ShareSimulation:
    def __init__(self, seed: int, consumers: int) -> None:
        self.rng = random.Random(seed)
        self.clock = ManualClock(1_700_000_000_000)
        self.service = ShareGroupService(
            SETTINGS,
            self.clock,
            SeededIds(self.rng.getrandbits(64)),
            notify=lambda key: None,
            group_configs=lambda group: {"share.auto.offset.reset": "earliest"},
        )
        self.log_end = 0
        self.producing = True
        self.consumers = {f"c{i}": SimConsumer(f"c{i}") for i in range(consumers)}
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        # What the invariants compare against.
        self.acknowledged: dict[int, int] = {}  # offset -> accepted/rejected count
        self.deliveries: dict[int, int] = {}  # offset -> deliveries seen
        self.locks: dict[int, tuple[str, int]] = {}  # offset -> (member, deadline)
        self.events = 0

    @property
    def now(self) -> int:
        return self.clock.now_ms()

    # -- the event loop --------------------------------------------------------------
    def at(self, delay_ms: int, action: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (self.now + delay_ms, next(self._seq), action))

    def run_until(self, end_ms: int) -> None:
        while self._queue and self._queue[0][0] <= end_ms:
            when, _, action = heapq.heappop(self._queue)
            self.clock.advance(max(0, when - self.now))
            action()
            self.events += 1
            self.check()
        self.clock.advance(max(0, end_ms - self.now))

    def start(self) -> None:
        self.at(0, self._tick)
        self.at(0, self._produce)
        for name in self.consumers:
            self.at(self.rng.randrange(0, 2_000), lambda n=name: self._join(n))

    def _tick(self) -> None:
        """The service's timer; members whose session ran out lose their locks."""
        for group, member in self.service.coordinator.expire(self.now):
            self.service.release_member(group, member)
            self._forget(member)
        self.service.tick()
        self.at(TICK_MS, self._tick)

    def _produce(self) -> None:
        if self.producing:
            self.log_end += self.rng.randrange(1, 12)
            self.at(self.rng.randrange(50, 800), self._produce)

    # -- consumers -------------------------------------------------------------------
    def _alive(self, c: SimConsumer, incarnation: int) -> bool:
        return c.up and c.incarnation == incarnation

    def _join(self, name: str) -> None:
        c = self.consumers[name]
        c.up, c.incarnation, c.held = True, c.incarnation + 1, []
        r = self._heartbeat(Heartbeat(GROUP, "", 0, (TOPIC,)))
        c.member_id, c.epoch = r.member_id, r.member_epoch
        inc = c.incarnation
        self.at(SETTINGS.heartbeat_interval_ms, lambda: self._beat(c, inc))
        self.at(self.rng.randrange(10, 300), lambda: self._fetch(c, inc))

    def _heartbeat(self, hb: Heartbeat) -> HeartbeatResult:
        return at_once(self.service.heartbeat(hb, lambda topics: {TOPIC: (b"t-id", 1)}))

    def _beat(self, c: SimConsumer, inc: int) -> None:
        if not self._alive(c, inc):
            return
        r = self._heartbeat(Heartbeat(GROUP, c.member_id, c.epoch))
        if r.error == ErrorCode.NONE:
            c.epoch = r.member_epoch
        elif r.error in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            r = self._heartbeat(Heartbeat(GROUP, c.member_id, 0, (TOPIC,)))
            c.epoch = r.member_epoch
        self.at(SETTINGS.heartbeat_interval_ms, lambda: self._beat(c, inc))

    def _fetch(self, c: SimConsumer, inc: int) -> None:
        if not self._alive(c, inc):
            return
        _, sp = at_once(self.service.share_partition(GROUP, TOPIC, PARTITION, 0, self.log_end))
        assert sp is not None
        read_to = min(self.log_end, sp.fetch_offset() + self.rng.randrange(1, 30)) - 1
        taken = sp.acquire(c.member_id, read_to, self.rng.randrange(1, 25), self.now)
        for a in taken:
            for offset in range(a.first_offset, a.last_offset + 1):
                holder = self.locks.get(offset)
                if holder is not None and holder[1] > self.now:
                    raise InvariantViolation(f"{offset} acquired by {c.name} while locked")
                seen = self.deliveries.get(offset, 0) + 1
                if a.delivery_count != seen or seen > SETTINGS.delivery_count_limit:
                    raise InvariantViolation(f"{offset}: delivery {a.delivery_count}, seen {seen}")
                self.deliveries[offset] = seen
                self.locks[offset] = (c.member_id, self.now + SETTINGS.record_lock_duration_ms)
            c.held.append((a.first_offset, a.last_offset))
            # processing takes a while: sometimes longer than the lock
            self.at(self.rng.randrange(10, 4_000), lambda a=a: self._ack(c, inc, a))
        roll = self.rng.random()
        if roll < 0.01:
            self._crash(c)
        elif roll < 0.02:
            self._leave(c)
        else:
            self.at(self.rng.randrange(20, 500), lambda: self._fetch(c, inc))

    def _ack(self, c: SimConsumer, inc: int, a: Acquired) -> None:
        if not self._alive(c, inc):
            return
        kind = self.rng.choices(
            [AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT],
            [0.8, 0.15, 0.05],
        )[0]
        first, last = a.first_offset, a.last_offset
        error = at_once(
            self.service.acknowledge(
                GROUP, c.member_id, TOPIC, PARTITION, [(first, last, [int(kind)])]
            )
        )
        ours = all(self.locks.get(o, ("", 0))[0] == c.member_id for o in range(first, last + 1))
        live = ours and all(self.locks[o][1] > self.now for o in range(first, last + 1))
        if error == ErrorCode.NONE:
            if not ours:  # (past the deadline but before the timer fired is still ours)
                raise InvariantViolation(f"{c.name} acknowledged {first}..{last}, not its own")
            for o in range(first, last + 1):
                del self.locks[o]
                if kind != AcknowledgeType.RELEASE:
                    self.acknowledged[o] = self.acknowledged.get(o, 0) + 1
                    if self.acknowledged[o] > 1:
                        raise InvariantViolation(f"{o} acknowledged twice")
        elif error != ErrorCode.INVALID_RECORD_STATE or live:
            raise InvariantViolation(f"{c.name}: {error!r} acknowledging {first}..{last}")

    def _crash(self, c: SimConsumer) -> None:
        """Stops without a word: its session times out, its records go back."""
        c.up = False
        self.at(self.rng.randrange(1_000, 10_000), lambda: self._join(c.name))

    def _leave(self, c: SimConsumer) -> None:
        """Closes its share session (its records go back) and leaves the group."""
        c.up = False
        self.service.release_member(GROUP, c.member_id)
        self._heartbeat(Heartbeat(GROUP, c.member_id, -1))
        self._forget(c.member_id)
        self.at(self.rng.randrange(100, 3_000), lambda: self._join(c.name))

    def _forget(self, member_id: str) -> None:
        for o in [o for o, (m, _) in self.locks.items() if m == member_id]:
            del self.locks[o]

    # -- invariants ------------------------------------------------------------------
    def check(self) -> None:
        sp = self.service.partitions.get((GROUP, TOPIC, PARTITION))
        if sp is not None and sp.in_flight > SETTINGS.max_record_locks:
            raise InvariantViolation(f"{sp.in_flight} records in flight")

    def check_settled(self) -> None:
        """Every record acknowledged, rejected, or archived after its last delivery."""
        sp = self.service.partitions[(GROUP, TOPIC, PARTITION)]
        if sp.start_offset != self.log_end:
            raise InvariantViolation(f"SPSO {sp.start_offset} != log end {self.log_end}")
        for offset in range(self.log_end):
            done = self.acknowledged.get(offset, 0) == 1
            poisoned = self.deliveries.get(offset, 0) == SETTINGS.delivery_count_limit
            if not (done or poisoned):
                raise InvariantViolation(f"{offset} neither acknowledged nor archived")
        assert sp.count(RecordState.ACQUIRED) == 0
