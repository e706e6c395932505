"""The controller's view of brokers: registration, heartbeats, fencing, controlled shutdown.

As Kafka's ClusterControlManager and BrokerHeartbeatManager:

- BrokerRegistration records a broker (fenced) under a new broker epoch; another live
  broker with the same id (a different incarnation that still heartbeats) is refused with
  DUPLICATE_BROKER_REGISTRATION.
- BrokerHeartbeat every ``broker.heartbeat.interval.ms`` keeps the session; a fenced broker
  is unfenced once it reports metadata up to its own registration; one that misses
  heartbeats for ``broker.session.timeout.ms`` is fenced, and a fenced broker leads
  nothing and is in no ISR.
- A heartbeat that asks to shut down starts a controlled shutdown: the broker's
  leaderships move away, and once it leads nothing it is fenced and told it may stop (so
  its next incarnation registers without waiting for the old session to time out).

Liveness (when each broker last heartbeated) is the active controller's memory, not
metadata: a newly elected controller gives every broker a full session to check in before
it is fenced. That grace is not evidence that anyone is alive, though: until a broker
registers or heartbeats with this controller, a new incarnation of it is not refused as a
duplicate. This is what lets a single node restarted after kill -9 (its own controller,
its previous incarnation necessarily dead) register at once rather than wait out the old
session (Kafka's activation counts the grace as a live session, so a restarted combined
node there waits for it to time out); a broker that does talk to this controller is
protected as before. The one exception to the full grace is the previous quorum leader
(a combined node): the new controller heard from it last when it answered a Raft fetch, so
its session counts from then (a kill -9 of the active controller fences it one session
after the kill, as any other broker, instead of an election plus a session). Time in which the controller itself did not look (half a session or more between checks: its
event loop or queue stalled, which in a combined node also holds back the local broker's
heartbeats) does not count against brokers' sessions, so none is fenced for a silence the
controller caused (Kafka likewise counts a heartbeat that timed out in an overloaded
controller queue as contact); a broker that is really gone still expires after a session
of time in which the controller was looking.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from moldau.controller.replication_control import ReplicationControl
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    MetadataRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from moldau.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


@dataclass
class HeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False
    records: list[MetadataRecord] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Registration:
    broker_id: int
    incarnation_id: bytes
    cluster_id: str
    endpoints: tuple[tuple[str, str, int, int], ...]  # (listener, host, port, protocol)
    rack: str | None


class ClusterControl:
    def __init__(
        self,
        cluster_id: str,
        replication: ReplicationControl,
        session_timeout_ms: int = 9_000,
    ) -> None:
        self.cluster_id = cluster_id
        self.replication = replication
        self.session_timeout_ms = session_timeout_ms
        self._last_contact: dict[int, int] = {}
        self._last_check_ms: int | None = None
        # Sessions granted at activation that no request has confirmed yet.
        self._unconfirmed: set[int] = set()

    def activate(
        self, image: MetadataImage, now_ms: int, last_heard: Mapping[int, int] | None = None
    ) -> None:
        """A new active controller: every registered broker gets a fresh session, except
        those this node knows it last heard from at ``last_heard`` (node id -> ms): the
        previous quorum leader, silent since its last fetch answer, whose kill -9 is what
        made this node the controller. Its session runs from then, so a new controller
        fences it after one session from its death, not one session after its own
        election."""
        self._last_contact = dict.fromkeys(image.brokers, now_ms)
        for broker_id, heard_ms in (last_heard or {}).items():
            if broker_id in self._last_contact:
                self._last_contact[broker_id] = min(now_ms, heard_ms)
        self._unconfirmed = set(image.brokers)
        self._last_check_ms = now_ms

    def has_session(self, broker_id: int, now_ms: int) -> bool:
        last = self._last_contact.get(broker_id)
        return last is not None and now_ms - last <= self.session_timeout_ms

    def _touch(self, broker_id: int, now_ms: int) -> None:
        self._last_contact[broker_id] = now_ms
        self._unconfirmed.discard(broker_id)

    # -- registration --------------------------------------------------------------------
    def register(
        self, image: MetadataImage, reg: Registration, epoch: int, now_ms: int
    ) -> tuple[ErrorCode, str | None, list[MetadataRecord]]:
        """(error, message, records); ``epoch`` is the new broker epoch (the offset its
        registration gets in the metadata log, so epochs only grow)."""
        if reg.cluster_id != self.cluster_id:
            return (
                ErrorCode.INCONSISTENT_CLUSTER_ID,
                f"Expected cluster id {self.cluster_id}, got {reg.cluster_id}",
                [],
            )
        existing = image.brokers.get(reg.broker_id)
        if (
            existing is not None
            and existing.incarnation_id != reg.incarnation_id
            and not existing.fenced
            and reg.broker_id not in self._unconfirmed
            and self.has_session(reg.broker_id, now_ms)
        ):
            return (
                ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                f"Another broker is registered with broker id {reg.broker_id}",
                [],
            )
        self._touch(reg.broker_id, now_ms)
        record = RegisterBrokerRecord(
            broker_id=reg.broker_id,
            incarnation_id=reg.incarnation_id,
            broker_epoch=epoch,
            end_points=[
                BrokerEndpoint(name=n, host=h, port=p, security_protocol=s)
                for n, h, p, s in reg.endpoints
            ],
            rack=reg.rack,
            fenced=True,
        )
        records: list[MetadataRecord] = [record]
        if existing is not None and not existing.fenced:
            # A restart without controlled shutdown: what the old incarnation led moves.
            records += self.replication.broker_lost(image, reg.broker_id)
        return ErrorCode.NONE, None, records

    def unregister(
        self, image: MetadataImage, broker_id: int
    ) -> tuple[ErrorCode, list[MetadataRecord]]:
        broker = image.brokers.get(broker_id)
        if broker is None:
            return ErrorCode.BROKER_ID_NOT_REGISTERED, []
        self._last_contact.pop(broker_id, None)
        self._unconfirmed.discard(broker_id)
        records = self.replication.broker_lost(image, broker_id)
        records.append(UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=broker.epoch))
        return ErrorCode.NONE, records

    # -- heartbeats ----------------------------------------------------------------------
    def heartbeat(
        self,
        image: MetadataImage,
        broker_id: int,
        broker_epoch: int,
        metadata_offset: int,
        want_fence: bool,
        want_shut_down: bool,
        now_ms: int,
    ) -> HeartbeatResult:
        broker = image.brokers.get(broker_id)
        if broker is None:
            return HeartbeatResult(ErrorCode.BROKER_ID_NOT_REGISTERED)
        if broker.epoch != broker_epoch:
            return HeartbeatResult(ErrorCode.STALE_BROKER_EPOCH)
        self._touch(broker_id, now_ms)
        caught_up = metadata_offset >= broker.epoch
        result = HeartbeatResult(is_caught_up=caught_up, is_fenced=broker.fenced)
        if want_shut_down:
            if not broker.in_controlled_shutdown:
                result.records.append(
                    BrokerRegistrationChangeRecord(
                        broker_id=broker_id, broker_epoch=broker.epoch, in_controlled_shutdown=1
                    )
                )
                result.records += self.replication.broker_lost(image, broker_id)
            after = image.apply(result.records)
            result.should_shut_down = self.replication.leaders(after, broker_id) == 0
            if result.should_shut_down and not broker.fenced:
                # Kafka's SHUTDOWN_NOW fences the broker: its session ends here, so the
                # restarted process registers at once instead of after a session timeout.
                result.records += self._fence(after, broker_id)
                result.is_fenced = True
        elif broker.fenced and caught_up and not want_fence:
            result.records.append(UnfenceBrokerRecord(id=broker_id, epoch=broker.epoch))
            after = image.apply(result.records)
            result.records += self.replication.broker_back(after, broker_id)
            result.is_fenced = False
        elif not broker.fenced and want_fence:
            result.records += self._fence(image, broker_id)
            result.is_fenced = True
        return result

    def expire_sessions(self, image: MetadataImage, now_ms: int) -> list[MetadataRecord]:
        """Fence every unfenced broker whose session timed out."""
        last_check, self._last_check_ms = self._last_check_ms, now_ms
        if last_check is not None and now_ms - last_check > self.session_timeout_ms // 2:
            stalled = now_ms - last_check
            log.warning("the controller stalled for %d ms: not counted against sessions", stalled)
            self._last_contact = {
                b: min(now_ms, last + stalled) for b, last in self._last_contact.items()
            }
        records: list[MetadataRecord] = []
        for broker in image.brokers.values():
            if broker.fenced or self.has_session(broker.broker_id, now_ms):
                continue
            records += self._fence(image.apply(records), broker.broker_id)
        return records

    def _fence(self, image: MetadataImage, broker_id: int) -> list[MetadataRecord]:
        broker = image.brokers[broker_id]
        records: list[MetadataRecord] = [FenceBrokerRecord(id=broker_id, epoch=broker.epoch)]
        records += self.replication.broker_lost(image.apply(records), broker_id)
        return records

    def next_expiry_ms(self, image: MetadataImage) -> int | None:
        deadlines = [
            self._last_contact.get(b.broker_id, 0) + self.session_timeout_ms
            for b in image.brokers.values()
            if not b.fenced
        ]
        return min(deadlines) if deadlines else None
