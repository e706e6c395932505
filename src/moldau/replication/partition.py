"""A partition's replication state on one broker: the only place the high watermark moves.

Pure: the replica manager hands in log end offsets and the time, and acts on what comes
back (wake waiters, send an AlterPartition). As in Kafka's ``Partition``:

- the leader tracks each follower's log end offset and when it last caught up;
- the high watermark is the smallest log end offset over the *maximal* ISR (the committed
  ISR plus replicas an in-flight AlterPartition is adding, so an expansion can never let
  the HW pass a replica that may already count as in sync) and over caught-up replicas
  that are about to join (ISR-eligible ones: not fenced, not shutting down); it never
  moves backwards;
- ISR changes are proposed, not applied: the controller commits them (partition epoch
  checked) and the metadata update makes them real. One proposal is in flight at a time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from moldau.metadata.image import PartitionImage
from moldau.protocol.errors import ErrorCode

UNKNOWN_OFFSET = -1


class Role(Enum):
    NONE = "none"  # not a replica here (or deleted)
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows about one follower (Kafka's ``Replica``)."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0

    def is_caught_up(self, leader_leo: int, now_ms: int, lag_max_ms: int) -> bool:
        return (
            self.log_end_offset == leader_leo or now_ms - self.last_caught_up_time_ms <= lag_max_ms
        )


@dataclass(frozen=True, slots=True)
class IsrProposal:
    """An ISR change to send with AlterPartition; ``partition_epoch`` fences stale ones."""

    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]


class Partition:
    """One partition's replication state; every field is read-only from outside."""

    __slots__ = (
        "_topic",
        "_partition",
        "_local_id",
        "_replica_lag_time_max_ms",
        "_role",
        "_leader",
        "_leader_epoch",
        "_partition_epoch",
        "_replicas",
        "_isr",
        "_high_watermark",
        "_leader_epoch_start_offset",
        "_pending",
        "_remote",
        "_ineligible",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        local_id: int,
        replica_lag_time_max_ms: int = 30_000,
        *,
        high_watermark: int = 0,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._local_id = local_id
        self._replica_lag_time_max_ms = replica_lag_time_max_ms
        self._role = Role.NONE
        self._leader = -1
        self._leader_epoch = -1
        self._partition_epoch = -1
        self._replicas: tuple[int, ...] = ()
        self._isr: tuple[int, ...] = ()
        self._high_watermark = high_watermark
        self._leader_epoch_start_offset = UNKNOWN_OFFSET
        self._pending: IsrProposal | None = None
        self._remote: dict[int, ReplicaState] = {}
        self._ineligible: frozenset[int] = frozenset()  # fenced or shutting down

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def partition(self) -> int:
        return self._partition

    @property
    def local_id(self) -> int:
        return self._local_id

    @property
    def role(self) -> Role:
        return self._role

    @property
    def leader(self) -> int:
        return self._leader

    @property
    def leader_epoch(self) -> int:
        return self._leader_epoch

    @property
    def partition_epoch(self) -> int:
        return self._partition_epoch

    @property
    def replicas(self) -> tuple[int, ...]:
        return self._replicas

    @property
    def isr(self) -> tuple[int, ...]:
        return self._isr

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def leader_epoch_start_offset(self) -> int:
        return self._leader_epoch_start_offset

    @property
    def pending(self) -> IsrProposal | None:
        """The ISR change in flight, if any."""
        return self._pending

    @property
    def remote(self) -> Mapping[int, ReplicaState]:
        """The leader's view of each follower (empty on a follower)."""
        return self._remote

    # -- leadership ----------------------------------------------------------------
    def make_leader(self, reg: PartitionImage, local_leo: int, now_ms: int) -> bool:
        """Become (or stay) leader. Returns True if this is a new leader epoch here.

        Followers start unknown in a new epoch; ISR members count as caught up now, so
        they are not shrunk before they had a chance to fetch (Kafka does the same).
        In the same epoch, a follower the new ISR leaves out stops counting as caught up
        until it fetches at the leader's end again: it may never fetch again (its log dir
        failed, it is shutting down), and the HW must not wait for it as a replica about
        to join for replica.lag.time.max.ms (Kafka's leader excludes such replicas the
        same way, as not ISR-eligible).
        """
        new_epoch = self._role is not Role.LEADER or reg.leader_epoch != self._leader_epoch
        if not new_epoch:
            for r in set(self._isr) - set(reg.isr):
                left = self._remote.get(r)
                if left is not None:
                    left.last_caught_up_time_ms = 0
                    left.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
        self._apply(reg)
        self._role = Role.LEADER
        if new_epoch:
            self._leader_epoch_start_offset = local_leo
            self._remote = {
                r: ReplicaState(r, last_caught_up_time_ms=now_ms if r in reg.isr else 0)
                for r in reg.replicas
                if r != self._local_id
            }
        else:
            self._remote = {
                r: self._remote.get(r) or ReplicaState(r)
                for r in reg.replicas
                if r != self._local_id
            }
        self._high_watermark = min(self._high_watermark, local_leo)
        self.maybe_increment_high_watermark(local_leo, now_ms)
        return new_epoch

    def make_follower(self, reg: PartitionImage, local_leo: int) -> bool:
        """Follow ``reg.leader``. Returns True if the leader or its epoch changed (the
        fetcher must then restart, reconciling the log against the new leader)."""
        changed = (
            self._role is not Role.FOLLOWER
            or reg.leader != self._leader
            or reg.leader_epoch != self._leader_epoch
        )
        self._apply(reg)
        self._role = Role.FOLLOWER
        self._remote = {}
        self._leader_epoch_start_offset = UNKNOWN_OFFSET
        self._high_watermark = min(self._high_watermark, local_leo)
        return changed

    def _apply(self, reg: PartitionImage) -> None:
        self._leader = reg.leader
        self._leader_epoch = reg.leader_epoch
        self._replicas = reg.replicas
        self._isr = reg.isr
        if reg.partition_epoch != self._partition_epoch:
            self._pending = None  # the controller decided; any proposal was answered
        self._partition_epoch = reg.partition_epoch

    def set_ineligible(self, brokers: frozenset[int], leader_leo: int, now_ms: int) -> bool:
        """The brokers that may not join an ISR now (fenced or in controlled shutdown, as
        the metadata says; Kafka's isReplicaIsrEligible). A caught-up follower among them
        does not hold back the HW: a broker shutting down may fetch at the leader's end
        once more after the controller took it out of the ISR, and never again. Returns
        True if the HW moved."""
        self._ineligible = brokers
        return self.maybe_increment_high_watermark(leader_leo, now_ms)

    @property
    def is_leader(self) -> bool:
        return self._role is Role.LEADER

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR to count for the HW: committed ISR plus additions in flight."""
        if self._pending is None:
            return self._isr
        return tuple(dict.fromkeys((*self._isr, *self._pending.new_isr)))

    # -- leader side ---------------------------------------------------------------
    def maybe_increment_high_watermark(self, leader_leo: int, now_ms: int) -> bool:
        """Move the HW up to the smallest LEO over the maximal ISR (and over caught-up
        replicas that will join it). Returns True if it moved."""
        if self._role is not Role.LEADER:
            return False
        new_hw = leader_leo
        in_sync = self.maximal_isr
        for replica in self._remote.values():
            if replica.log_end_offset >= new_hw:
                continue
            joining = replica.broker_id not in self._ineligible and replica.is_caught_up(
                leader_leo, now_ms, self._replica_lag_time_max_ms
            )
            if replica.broker_id in in_sync or joining:
                new_hw = replica.log_end_offset
        if new_hw > self._high_watermark:
            self._high_watermark = new_hw
            return True
        return False

    def update_follower_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        log_start_offset: int,
        leader_leo: int,
        now_ms: int,
    ) -> bool:
        """A follower fetched from ``fetch_offset`` (its LEO). Returns True if the HW moved.

        Kafka's rule for "caught up": the follower reached the leader's LEO as of this
        fetch, or as of its previous fetch (then it was caught up at that time)."""
        replica = self._remote.get(replica_id)
        if replica is None:
            return False
        if fetch_offset >= leader_leo:
            replica.last_caught_up_time_ms = max(replica.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= replica.last_fetch_leader_log_end_offset >= 0:
            replica.last_caught_up_time_ms = max(
                replica.last_caught_up_time_ms, replica.last_fetch_time_ms
            )
        replica.log_end_offset = fetch_offset
        replica.log_start_offset = log_start_offset
        replica.last_fetch_leader_log_end_offset = leader_leo
        replica.last_fetch_time_ms = now_ms
        return self.maybe_increment_high_watermark(leader_leo, now_ms)

    def is_known_replica(self, replica_id: int) -> bool:
        return replica_id in self._remote

    def isr_expansion(self, replica_id: int) -> IsrProposal | None:
        """A follower that reached the HW (and this epoch's start) joins the ISR, if it
        is eligible (the controller would refuse it)."""
        replica = self._remote.get(replica_id)
        if (
            self._role is not Role.LEADER
            or self._pending is not None
            or replica is None
            or replica_id in self._isr
            or replica_id in self._ineligible
            or replica.log_end_offset < self._high_watermark
            or replica.log_end_offset < self._leader_epoch_start_offset
        ):
            return None
        return self._propose((*self._isr, replica_id))

    def isr_shrink(self, leader_leo: int, now_ms: int) -> IsrProposal | None:
        """Drop ISR members that have not caught up for ``replica.lag.time.max.ms``."""
        if self._role is not Role.LEADER or self._pending is not None:
            return None
        lagging = {
            r
            for r in self._isr
            if r != self._local_id
            and r in self._remote
            and not self._remote[r].is_caught_up(leader_leo, now_ms, self._replica_lag_time_max_ms)
        }
        if not lagging:
            return None
        return self._propose(tuple(r for r in self._isr if r not in lagging))

    def _propose(self, new_isr: tuple[int, ...]) -> IsrProposal:
        self._pending = IsrProposal(self._leader_epoch, self._partition_epoch, new_isr)
        return self._pending

    def isr_change_failed(self) -> None:
        """The controller refused or never answered: propose again later."""
        self._pending = None

    def check_min_isr(self, min_insync_replicas: int) -> ErrorCode | None:
        """acks=all needs at least min.insync.replicas in the committed ISR (Kafka counts
        the committed ISR, not the maximal one, here)."""
        if len(self._isr) < min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return None

    # -- follower side -------------------------------------------------------------
    def follower_update_high_watermark(self, leader_hw: int, local_leo: int) -> bool:
        """A follower's HW is the leader's, capped by what it has itself."""
        new_hw = min(leader_hw, local_leo)
        if new_hw > self._high_watermark:
            self._high_watermark = new_hw
            return True
        return False

    def truncated(self, log_start_offset: int, log_end_offset: int) -> None:
        """The local log was truncated: bound the HW by the log's new range.

        Kafka's ``updateHighWatermark`` on truncation: the HW is kept within
        [log start, log end], so it moves back with a diverged tail and forward when the
        log restarts at the leader's log start offset (a full truncation)."""
        self._high_watermark = max(log_start_offset, min(self._high_watermark, log_end_offset))
