"""A partition's replication state on one broker: the only place the high watermark moves.

Pure: the replica manager hands in log end offsets and the time, and acts on what comes
back (wake waiters, send an AlterPartition). As in Kafka's ``Partition``:

- the leader tracks each follower's log end offset and when it last caught up;
- the high watermark is the smallest log end offset over the *maximal* ISR (the committed
  ISR plus replicas an in-flight AlterPartition is adding, so an expansion can never let
  the HW pass a replica that may already count as in sync) and over caught-up replicas
  that are about to join; it never moves backwards;
- ISR changes are proposed, not applied: the controller commits them (partition epoch
  checked) and the metadata update makes them real. One proposal is in flight at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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


@dataclass(slots=True)
class Partition:
    topic: str
    partition: int
    local_id: int
    replica_lag_time_max_ms: int = 30_000
    role: Role = Role.NONE
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    high_watermark: int = 0
    leader_epoch_start_offset: int = UNKNOWN_OFFSET
    pending: IsrProposal | None = None
    remote: dict[int, ReplicaState] = field(default_factory=dict)

    # -- leadership ----------------------------------------------------------------
    def make_leader(self, reg: PartitionImage, local_leo: int, now_ms: int) -> bool:
        """Become (or stay) leader. Returns True if this is a new leader epoch here.

        Followers start unknown in a new epoch; ISR members count as caught up now, so
        they are not shrunk before they had a chance to fetch (Kafka does the same).
        """
        new_epoch = self.role is not Role.LEADER or reg.leader_epoch != self.leader_epoch
        self._apply(reg)
        self.role = Role.LEADER
        if new_epoch:
            self.leader_epoch_start_offset = local_leo
            self.remote = {
                r: ReplicaState(r, last_caught_up_time_ms=now_ms if r in reg.isr else 0)
                for r in reg.replicas
                if r != self.local_id
            }
        else:
            self.remote = {
                r: self.remote.get(r) or ReplicaState(r) for r in reg.replicas if r != self.local_id
            }
        self.high_watermark = min(self.high_watermark, local_leo)
        self.maybe_increment_high_watermark(local_leo, now_ms)
        return new_epoch

    def make_follower(self, reg: PartitionImage, local_leo: int) -> bool:
        """Follow ``reg.leader``. Returns True if the leader or its epoch changed (the
        fetcher must then restart, reconciling the log against the new leader)."""
        changed = (
            self.role is not Role.FOLLOWER
            or reg.leader != self.leader
            or reg.leader_epoch != self.leader_epoch
        )
        self._apply(reg)
        self.role = Role.FOLLOWER
        self.remote = {}
        self.leader_epoch_start_offset = UNKNOWN_OFFSET
        self.high_watermark = min(self.high_watermark, local_leo)
        return changed

    def _apply(self, reg: PartitionImage) -> None:
        self.leader = reg.leader
        self.leader_epoch = reg.leader_epoch
        self.replicas = reg.replicas
        self.isr = reg.isr
        if reg.partition_epoch != self.partition_epoch:
            self.pending = None  # the controller decided; any proposal was answered
        self.partition_epoch = reg.partition_epoch

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR to count for the HW: committed ISR plus additions in flight."""
        if self.pending is None:
            return self.isr
        return tuple(dict.fromkeys((*self.isr, *self.pending.new_isr)))

    # -- leader side ---------------------------------------------------------------
    def maybe_increment_high_watermark(self, leader_leo: int, now_ms: int) -> bool:
        """Move the HW up to the smallest LEO over the maximal ISR (and over caught-up
        replicas that will join it). Returns True if it moved."""
        if self.role is not Role.LEADER:
            return False
        new_hw = leader_leo
        in_sync = self.maximal_isr
        for replica in self.remote.values():
            if replica.log_end_offset >= new_hw:
                continue
            joining = replica.is_caught_up(leader_leo, now_ms, self.replica_lag_time_max_ms)
            if replica.broker_id in in_sync or joining:
                new_hw = replica.log_end_offset
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
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
        replica = self.remote.get(replica_id)
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
        return replica_id in self.remote

    def isr_expansion(self, replica_id: int) -> IsrProposal | None:
        """A follower that reached the HW (and this epoch's start) joins the ISR."""
        replica = self.remote.get(replica_id)
        if (
            self.role is not Role.LEADER
            or self.pending is not None
            or replica is None
            or replica_id in self.isr
            or replica.log_end_offset < self.high_watermark
            or replica.log_end_offset < self.leader_epoch_start_offset
        ):
            return None
        return self._propose((*self.isr, replica_id))

    def isr_shrink(self, leader_leo: int, now_ms: int) -> IsrProposal | None:
        """Drop ISR members that have not caught up for ``replica.lag.time.max.ms``."""
        if self.role is not Role.LEADER or self.pending is not None:
            return None
        lagging = {
            r
            for r in self.isr
            if r != self.local_id
            and r in self.remote
            and not self.remote[r].is_caught_up(leader_leo, now_ms, self.replica_lag_time_max_ms)
        }
        if not lagging:
            return None
        return self._propose(tuple(r for r in self.isr if r not in lagging))

    def _propose(self, new_isr: tuple[int, ...]) -> IsrProposal:
        self.pending = IsrProposal(self.leader_epoch, self.partition_epoch, new_isr)
        return self.pending

    def isr_change_failed(self) -> None:
        """The controller refused or never answered: propose again later."""
        self.pending = None

    def check_min_isr(self, min_insync_replicas: int) -> ErrorCode | None:
        """acks=all needs at least min.insync.replicas in the committed ISR (Kafka counts
        the committed ISR, not the maximal one, here)."""
        if len(self.isr) < min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return None

    # -- follower side -------------------------------------------------------------
    def follower_update_high_watermark(self, leader_hw: int, local_leo: int) -> bool:
        """A follower's HW is the leader's, capped by what it has itself."""
        new_hw = min(leader_hw, local_leo)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False
