"""The epoch states of a KRaft replica (Kafka's EpochState family) and their timers.

Unattached: knows the epoch, no leader (may have voted). Prospective: runs a pre-vote in
its current epoch (KIP-996). Candidate: bumped the epoch and voted for itself. Leader.
Follower: fetches from the leader. Resigned: a former leader of this epoch, stepping down.
All deadlines are absolute virtual-clock milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from moldau.raft.log import SnapshotWriter
from moldau.raft.messages import QuorumInfo, ReplicaState
from moldau.raft.store import ElectionState

CHECK_QUORUM_TIMEOUT_FACTOR = 1.5
OBSERVER_SESSION_TIMEOUT_MS = 300_000


class RaftInvariantError(AssertionError):
    """A peer's message or the local log contradicts Raft's guarantees; stop the replica."""


@dataclass(slots=True)
class VoteTally:
    """Votes (or pre-votes) collected for one election; the nominee counts itself."""

    voters: frozenset[int]
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def record(self, voter: int, granted: bool) -> None:
        if voter in self.voters and voter not in self.granted and voter not in self.rejected:
            (self.granted if granted else self.rejected).add(voter)

    def unrecorded(self) -> list[int]:
        return sorted(self.voters - self.granted - self.rejected)

    @property
    def is_granted(self) -> bool:
        return len(self.granted) >= self.majority

    @property
    def is_rejected(self) -> bool:
        return len(self.voters) - len(self.rejected) < self.majority


@dataclass(slots=True)
class Unattached:
    epoch: int
    voted_id: int | None
    election_deadline_ms: int
    high_watermark: int | None = None
    name = "Unattached"

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, None, self.voted_id)


@dataclass(slots=True)
class Prospective:
    epoch: int
    leader_id: int | None
    voted_id: int | None
    tally: VoteTally
    election_deadline_ms: int
    retries: int
    high_watermark: int | None = None
    name = "Prospective"

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_id)


@dataclass(slots=True)
class Candidate:
    epoch: int
    local_id: int
    tally: VoteTally
    election_deadline_ms: int
    retries: int
    high_watermark: int | None = None
    backoff_until_ms: int | None = None
    name = "Candidate"

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, None, self.local_id)


@dataclass(slots=True)
class Follower:
    epoch: int
    leader_id: int
    voted_id: int | None
    fetch_deadline_ms: int
    high_watermark: int | None = None
    has_fetched_from_leader: bool = False
    fetching_snapshot: SnapshotWriter | None = None
    name = "Follower"

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_id)

    def update_high_watermark(self, hw: int, local_id: int) -> None:
        """Take the leader's HW (capped by the local log end); it never moves back."""
        if self.high_watermark is not None and hw < self.high_watermark:
            raise RaftInvariantError(
                f"node {local_id}: high watermark would go back from {self.high_watermark} to {hw}"
            )
        self.high_watermark = hw

    def snapshot_installed(self, snapshot_end_offset: int) -> None:
        """A downloaded snapshot is committed data: the HW is at least its end."""
        if self.high_watermark is None or self.high_watermark < snapshot_end_offset:
            self.high_watermark = snapshot_end_offset


@dataclass(slots=True)
class Resigned:
    epoch: int
    local_id: int
    election_deadline_ms: int
    unacked_voters: set[int]
    preferred_successors: tuple[int, ...]
    high_watermark: int | None = None
    name = "Resigned"

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.local_id, None)


@dataclass(slots=True)
class ReplicaProgress:
    """What the leader knows of one replica's log (Kafka's LeaderState.ReplicaState)."""

    end_offset: int | None = None
    last_fetch_ms: int = -1
    last_fetch_leader_end_offset: int = -1
    last_caught_up_ms: int = -1

    def on_fetch(self, fetch_offset: int, leader_end_offset: int, now_ms: int) -> None:
        # A replica is caught up when it reaches the leader's end offset, or the end offset
        # the leader had at its previous fetch (then it was caught up as of that fetch).
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif 0 < self.last_fetch_leader_end_offset <= fetch_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.last_fetch_leader_end_offset = leader_end_offset
        self.last_fetch_ms = max(self.last_fetch_ms, now_ms)
        self.end_offset = fetch_offset

    def describe(self, replica_id: int) -> ReplicaState:
        return ReplicaState(
            replica_id,
            -1 if self.end_offset is None else self.end_offset,
            self.last_fetch_ms,
            self.last_caught_up_ms,
        )


@dataclass(slots=True)
class Leader:
    epoch: int
    local_id: int
    epoch_start_offset: int
    granting_voters: frozenset[int]
    voters: dict[int, ReplicaProgress]
    check_quorum_timeout_ms: int
    check_quorum_deadline_ms: int
    begin_quorum_interval_ms: int
    begin_quorum_deadline_ms: int
    observers: dict[int, ReplicaProgress] = field(default_factory=dict)
    fetched_voters: set[int] = field(default_factory=set)
    high_watermark: int | None = None
    name = "Leader"

    @classmethod
    def start(
        cls,
        epoch: int,
        local_id: int,
        epoch_start_offset: int,
        voters: frozenset[int],
        granting_voters: frozenset[int],
        fetch_timeout_ms: int,
        now_ms: int,
    ) -> Leader:
        check_quorum_ms = int(fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR)
        return cls(
            epoch=epoch,
            local_id=local_id,
            epoch_start_offset=epoch_start_offset,
            granting_voters=granting_voters,
            voters={voter: ReplicaProgress() for voter in voters},
            check_quorum_timeout_ms=check_quorum_ms,
            check_quorum_deadline_ms=now_ms + check_quorum_ms,
            begin_quorum_interval_ms=fetch_timeout_ms // 2,
            begin_quorum_deadline_ms=now_ms,
        )

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.local_id, None)

    def update_local_end_offset(self, end_offset: int) -> bool:
        """The leader's own log grew; True if the high watermark moved."""
        self.voters[self.local_id].end_offset = end_offset
        return self._maybe_update_high_watermark()

    def update_replica(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """A replica fetched at a valid offset; True if the high watermark moved."""
        leader_end = self.voters[self.local_id].end_offset
        progress = self.voters.get(replica_id)
        if progress is None:
            progress = self.observers.setdefault(replica_id, ReplicaProgress())
        progress.on_fetch(fetch_offset, -1 if leader_end is None else leader_end, now_ms)
        self.update_check_quorum(replica_id, now_ms)
        return replica_id in self.voters and self._maybe_update_high_watermark()

    def update_check_quorum(self, replica_id: int, now_ms: int) -> None:
        """Fetches from a majority within the window keep the leader in office."""
        if replica_id not in self.voters:
            return
        self.fetched_voters.add(replica_id)
        if len(self.fetched_voters) + 1 >= len(self.voters) // 2 + 1:
            self.fetched_voters.clear()
            self.check_quorum_deadline_ms = now_ms + self.check_quorum_timeout_ms

    def check_quorum_expired(self, now_ms: int) -> bool:
        return len(self.voters) > 1 and now_ms >= self.check_quorum_deadline_ms

    def _maybe_update_high_watermark(self) -> bool:
        # The majority-th largest end offset among voters, but only once it covers a record
        # of this epoch: committing an older epoch's record by counting replicas is unsafe.
        ends = sorted(
            (p.end_offset for p in self.voters.values() if p.end_offset is not None),
            reverse=True,
        )
        index = len(self.voters) // 2
        if index >= len(ends):
            return False
        candidate = ends[index]
        if candidate <= self.epoch_start_offset:
            return False
        if self.high_watermark is None or candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def voters_by_descending_fetch_offset(self) -> tuple[int, ...]:
        others = [(p.end_offset, v) for v, p in self.voters.items() if v != self.local_id]
        others.sort(key=lambda item: (-(item[0] if item[0] is not None else -1), item[1]))
        return tuple(voter for _, voter in others)

    def describe(self, now_ms: int) -> QuorumInfo:
        for observer in [
            o
            for o, p in self.observers.items()
            if now_ms - p.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS
        ]:
            del self.observers[observer]
        local = self.voters[self.local_id]
        voters = []
        for voter, progress in sorted(self.voters.items()):
            if voter == self.local_id:
                voters.append(
                    ReplicaState(
                        voter,
                        local.end_offset if local.end_offset is not None else -1,
                        now_ms,
                        now_ms,
                    )
                )
            else:
                voters.append(progress.describe(voter))
        return QuorumInfo(
            leader_id=self.local_id,
            leader_epoch=self.epoch,
            high_watermark=-1 if self.high_watermark is None else self.high_watermark,
            current_voters=tuple(voters),
            observers=tuple(p.describe(o) for o, p in sorted(self.observers.items())),
        )


EpochState = Unattached | Prospective | Candidate | Follower | Resigned | Leader
