"""Deterministic simulation of the quorum controller: the real `ControllerApis` (cluster,
replication and topic control behind a `QuorumController`), simulated brokers, a virtual
clock and one seed.

Brokers register, heartbeat (their metadata offset lagging a little), pause (missed
heartbeats, as a SIGSTOP), crash and restart as a new incarnation, shut down in a
controlled way; a client creates topics and asks for elections; leaders propose ISR
changes with AlterPartition (sometimes with stale epochs); the active controller fails
over (a new one gives every broker a fresh session) and fences expired sessions on its
timer. Everything random comes from the seed, ids included (`SeededIds`).

Checked on the committed metadata after every event, raising `InvariantViolation`:
- a fenced or shutting-down broker leads nothing;
- every leader is in its partition's ISR; an ISR is non-empty and within the replicas;
- no partition is without a leader while a member of its ISR is alive;
- leader and partition epochs never go back, and a new leader comes with a new epoch;
- broker epochs only grow;
- a broker that stopped heartbeating is fenced within a session and one session check.
"""

from __future__ import annotations

import asyncio
import heapq
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from moldau.clock import ManualClock
from moldau.controller.apis import ControllerApis
from moldau.controller.cluster_control import ClusterControl
from moldau.controller.context import ControllerContext
from moldau.controller.quorum_controller import QuorumController
from moldau.controller.replication_control import ReplicationControl
from moldau.controller.topic_control import TopicControl
from moldau.ids import SeededIds
from moldau.metadata.image import NO_LEADER, MetadataImage
from moldau.metadata.records import MetadataRecord
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    PartitionData,
    TopicData,
)
from moldau.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from moldau.protocol.messages.broker_registration_request import (
    BrokerRegistrationRequest,
    Listener,
)
from moldau.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from moldau.protocol.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions

CLUSTER_ID = "simulated-cluster"
SESSION_TIMEOUT_MS = 9_000
HEARTBEAT_INTERVAL_MS = 2_000
SESSION_CHECK_MS = 1_000  # as ControllerServer's SESSION_CHECK_INTERVAL_MS


class InvariantViolation(AssertionError):
    pass


class MemoryMetadataLog:
    """A metadata log that commits what is appended once the writer waits for it."""

    def __init__(self) -> None:
        self.quorum: QuorumController | None = None
        self.end = 0
        self._pending: list[tuple[Sequence[MetadataRecord], int]] = []

    def append(self, records: Sequence[MetadataRecord]) -> int:
        self.end += len(records)
        self._pending.append((list(records), self.end - 1))
        return self.end - 1

    async def wait_committed(self, offset: int) -> None:
        assert self.quorum is not None
        while self._pending and self._pending[0][1] <= offset:
            records, last = self._pending.pop(0)
            self.quorum.handle_commit(records, last)


@dataclass
class SimBroker:
    broker_id: int
    running: bool = False
    paused_until: int = 0
    incarnation: bytes = b""
    epoch: int = -1
    shutting_down: bool = False
    last_accepted_ms: int | None = None  # the controller's last contact with it
    seen_offset: int = -1  # the metadata this broker has caught up to


@dataclass
class Scenario:
    seed: int
    brokers: int = 3
    chaos_ms: int = 60_000
    unclean: bool = False
    event_every_ms: int = 700


@dataclass(order=True)
class _Event:
    at: int
    seq: int
    action: Callable[[], None] = field(compare=False)


class ControllerSimulation:
    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.rng = random.Random(scenario.seed)
        self.ids = SeededIds(scenario.seed)
        self.clock = ManualClock()
        self.loop = asyncio.new_event_loop()
        self.log = MemoryMetadataLog()
        self.quorum = QuorumController(self.log, MetadataImage())
        self.log.quorum = self.quorum
        self.topics = TopicControl(
            0, {}, 1, default_replication_factor=min(3, scenario.brokers), ids=self.ids
        )
        self.apis = self._new_controller()
        self.brokers = {b: SimBroker(b) for b in range(1, scenario.brokers + 1)}
        self._queue: list[_Event] = []
        self._seq = 0
        self.events = 0
        self._epochs: dict[tuple[bytes, int], tuple[int, int, int]] = {}
        self._broker_epochs: dict[int, int] = {}

    # -- the controller ----------------------------------------------------------------
    def _new_controller(self) -> ControllerApis:
        """A newly elected active controller: its broker sessions start now."""
        cluster = ClusterControl(
            CLUSTER_ID, ReplicationControl(self.scenario.unclean), SESSION_TIMEOUT_MS
        )
        cluster.activate(self.quorum.committed, self.clock.now_ms())
        self.activated_ms = self.clock.now_ms()
        return ControllerApis(ControllerContext(self.quorum, self.topics, cluster, self.clock))

    def call(self, api_key: int, version: int, request: Any) -> Any:
        return self.loop.run_until_complete(self.apis.handle(api_key, version, request))

    @property
    def image(self) -> MetadataImage:
        return self.quorum.committed

    # -- the schedule ------------------------------------------------------------------
    def at(self, when: int, action: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, _Event(when, self._seq, action))

    def run(self, until_ms: int) -> None:
        while self._queue and self._queue[0].at <= until_ms:
            event = heapq.heappop(self._queue)
            self.clock.advance(event.at - self.clock.now_ms())
            event.action()
            self.events += 1
            self.check()
        self.clock.advance(max(0, until_ms - self.clock.now_ms()))

    def start(self) -> None:
        for broker_id in self.brokers:
            self.at(self.rng.randrange(0, 500), lambda b=broker_id: self.boot(b))
        self.at(SESSION_CHECK_MS, self.session_check)

    def session_check(self) -> None:
        self.loop.run_until_complete(self.apis.expire_broker_sessions())
        self.at(self.clock.now_ms() + SESSION_CHECK_MS, self.session_check)

    # -- brokers -----------------------------------------------------------------------
    def boot(self, broker_id: int) -> None:
        """A new incarnation of the broker registers and starts heartbeating."""
        broker = self.brokers[broker_id]
        broker.running, broker.shutting_down, broker.epoch = True, False, -1
        broker.incarnation = self.ids.uuid4().bytes
        self.register(broker)

    def register(self, broker: SimBroker) -> None:
        if not broker.running:
            return
        response = self.call(
            ApiKey.BROKER_REGISTRATION,
            4,
            BrokerRegistrationRequest(
                broker_id=broker.broker_id,
                cluster_id=CLUSTER_ID,
                incarnation_id=broker.incarnation,
                listeners=[Listener(name="PLAINTEXT", host="sim", port=9000 + broker.broker_id)],
                previous_broker_epoch=broker.epoch,
            ),
        )
        incarnation = broker.incarnation
        if response.error_code == ErrorCode.NONE:
            broker.epoch = response.broker_epoch
            broker.last_accepted_ms = self.clock.now_ms()
            self.at(self.clock.now_ms(), lambda: self.heartbeat(broker, incarnation))
        else:  # e.g. the old incarnation's session has not expired yet
            self.at(self.clock.now_ms() + 1_000, lambda: self.register(broker))

    def heartbeat(self, broker: SimBroker, incarnation: bytes) -> None:
        if not broker.running or broker.incarnation != incarnation:
            return  # a crashed or replaced incarnation's timer
        now = self.clock.now_ms()
        if now < broker.paused_until:
            self.at(broker.paused_until, lambda: self.heartbeat(broker, incarnation))
            return
        # Brokers replay the log a little behind the controller.
        if self.rng.random() < 0.7:
            broker.seen_offset = self.image.offset
        response = self.call(
            ApiKey.BROKER_HEARTBEAT,
            1,
            BrokerHeartbeatRequest(
                broker_id=broker.broker_id,
                broker_epoch=broker.epoch,
                current_metadata_offset=broker.seen_offset,
                want_fence=False,
                want_shut_down=broker.shutting_down,
            ),
        )
        if response.error_code in (
            ErrorCode.STALE_BROKER_EPOCH,
            ErrorCode.BROKER_ID_NOT_REGISTERED,
        ):
            broker.epoch = -1
            self.register(broker)
            return
        broker.last_accepted_ms = now
        if response.should_shut_down:
            broker.running = False
            self.at(now + self.rng.randrange(500, 5_000), lambda: self.boot(broker.broker_id))
            return
        fenced = response.is_fenced
        interval = 250 if fenced or broker.shutting_down else HEARTBEAT_INTERVAL_MS
        self.at(now + interval, lambda: self.heartbeat(broker, incarnation))

    def crash(self, broker: SimBroker) -> None:
        """kill -9: no more heartbeats; a new incarnation boots later."""
        broker.running = False
        self.at(
            self.clock.now_ms() + self.rng.randrange(0, 15_000), lambda: self.boot(broker.broker_id)
        )

    # -- the chaos ---------------------------------------------------------------------
    def chaos(self, until_ms: int) -> None:
        actions = [
            (3, self.create_topic),
            (6, self.propose_isr_change),
            (2, self.elect),
            (1, self.random_crash),
            (1, self.random_pause),
            (1, self.random_shutdown),
            (1, self.fail_over),
        ]
        weights = [w for w, _ in actions]
        when = self.clock.now_ms()
        while when < until_ms:
            when += self.rng.randrange(1, 2 * self.scenario.event_every_ms)
            _, action = self.rng.choices(actions, weights)[0]
            self.at(when, action)
        self.run(until_ms)

    def running_brokers(self) -> list[SimBroker]:
        return [b for b in self.brokers.values() if b.running]

    def random_crash(self) -> None:
        if live := self.running_brokers():
            self.crash(self.rng.choice(live))

    def random_pause(self) -> None:
        if live := self.running_brokers():
            broker = self.rng.choice(live)
            broker.paused_until = self.clock.now_ms() + self.rng.randrange(1_000, 15_000)

    def random_shutdown(self) -> None:
        if live := [b for b in self.running_brokers() if b.epoch >= 0]:
            self.rng.choice(live).shutting_down = True

    def fail_over(self) -> None:
        self.apis = self._new_controller()

    def create_topic(self) -> None:
        name = f"t{self.rng.randrange(0, 20)}"
        topic = CreatableTopic(
            name=name,
            num_partitions=self.rng.randrange(1, 4),
            replication_factor=self.rng.randrange(1, len(self.brokers) + 1),
        )
        self.call(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(topics=[topic]))

    def _random_partition(self) -> tuple[str, Any] | None:
        parts = [(t.name, p) for t in self.image.topics.values() for p in t.partitions.values()]
        return self.rng.choice(parts) if parts else None

    def propose_isr_change(self) -> None:
        """The leader of a partition shrinks or grows its ISR, now and then with an epoch
        it should no longer hold."""
        picked = self._random_partition()
        if picked is None:
            return
        name, part = picked
        if part.leader == NO_LEADER:
            return
        isr = set(part.isr)
        if self.rng.random() < 0.5 and len(isr) > 1:
            isr.discard(self.rng.choice(sorted(isr - {part.leader})))
        else:
            isr.add(self.rng.choice(part.replicas))
        stale = self.rng.random() < 0.1
        leader = self.brokers[part.leader]
        request = AlterPartitionRequest(
            broker_id=part.leader,
            broker_epoch=leader.epoch,
            topics=[
                TopicData(
                    topic_name=name,
                    partitions=[
                        PartitionData(
                            partition_index=part.partition_id,
                            leader_epoch=part.leader_epoch - stale,
                            new_isr=sorted(isr),
                            partition_epoch=part.partition_epoch,
                        )
                    ],
                )
            ],
        )
        self.call(ApiKey.ALTER_PARTITION, 1, request)

    def elect(self) -> None:
        picked = self._random_partition()
        if picked is None:
            return
        name, part = picked
        request = ElectLeadersRequest(
            election_type=self.rng.choice([0, 1]),
            topic_partitions=[TopicPartitions(topic=name, partitions=[part.partition_id])],
        )
        self.call(ApiKey.ELECT_LEADERS, 1, request)

    # -- the invariants ----------------------------------------------------------------
    def check(self) -> None:
        image = self.image
        alive = {b.broker_id for b in image.brokers.values() if b.alive}
        for topic in image.topics.values():
            for part in topic.partitions.values():
                where = f"{topic.name}-{part.partition_id} at {self.clock.now_ms()} ms"
                self._check_partition(where, topic.topic_id, part, alive)
        for broker in image.brokers.values():
            last = self._broker_epochs.get(broker.broker_id, -1)
            if broker.epoch < last:
                raise InvariantViolation(f"broker {broker.broker_id}'s epoch went back")
            self._broker_epochs[broker.broker_id] = broker.epoch
            sim = self.brokers[broker.broker_id]
            if broker.fenced or sim.last_accepted_ms is None:
                continue
            # A new active controller gives every broker a fresh session.
            silent = self.clock.now_ms() - max(sim.last_accepted_ms, self.activated_ms)
            if silent > SESSION_TIMEOUT_MS + SESSION_CHECK_MS:
                raise InvariantViolation(
                    f"broker {broker.broker_id} silent for {silent} ms and still unfenced"
                )

    def _check_partition(self, where: str, topic_id: bytes, part: Any, alive: set[int]) -> None:
        if part.leader != NO_LEADER and part.leader not in alive:
            raise InvariantViolation(f"{where}: broker {part.leader} leads but is not alive")
        if part.leader != NO_LEADER and part.leader not in part.isr:
            raise InvariantViolation(f"{where}: leader {part.leader} not in ISR {part.isr}")
        if not part.isr or not set(part.isr) <= set(part.replicas):
            raise InvariantViolation(f"{where}: ISR {part.isr} of replicas {part.replicas}")
        if part.leader == NO_LEADER and alive & set(part.isr):
            raise InvariantViolation(f"{where}: no leader, though ISR {part.isr} is alive")
        key = (topic_id, part.partition_id)
        seen = self._epochs.get(key)
        if seen is not None:
            leader, leader_epoch, partition_epoch = seen
            if part.leader_epoch < leader_epoch or part.partition_epoch < partition_epoch:
                raise InvariantViolation(f"{where}: an epoch went back")
            if part.leader != leader and part.leader_epoch == leader_epoch:
                raise InvariantViolation(f"{where}: a new leader without a new epoch")
        self._epochs[key] = (part.leader, part.leader_epoch, part.partition_epoch)

    # -- healing -----------------------------------------------------------------------
    def heal(self) -> None:
        """Every broker back, none paused or shutting down."""
        for broker in self.brokers.values():
            broker.paused_until = 0
            if not broker.running:
                self.at(self.clock.now_ms(), lambda b=broker.broker_id: self.boot(b))
            broker.shutting_down = False

    def close(self) -> None:
        self.loop.close()
