"""KRaft as a pure state machine (Kafka's KafkaRaftClient without threads, sockets or clocks).

A `RaftClient` is one replica of `__cluster_metadata-0`. The driver feeds it events --
`tick`, inbound requests and responses, appends by the local state machine, snapshots --
with the current time, and carries out the returned `Effects`: send the outbound messages,
hand `apply` to the state machine in order, act on `leader_change`, and call `tick` again
at `deadline_ms`. The log and the election store are written during the call; the driver
flushes the log before sending the effects.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from moldau.protocol.errors import ErrorCode
from moldau.raft.config import QuorumConfig
from moldau.raft.log import (
    LeaderChange,
    LogAppendInfo,
    OffsetAndEpoch,
    RaftLog,
    ValidKind,
    truncation_offset,
    validate_offset_and_epoch,
)
from moldau.raft.messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    QuorumInfo,
    RaftRequest,
    RaftResponse,
    VoteRequest,
    VoteResponse,
)
from moldau.raft.requests import RequestManager
from moldau.raft.state import (
    Candidate,
    EpochState,
    Follower,
    Leader,
    Prospective,
    RaftInvariantError,
    Resigned,
    Unattached,
    VoteTally,
)
from moldau.raft.store import ElectionState, QuorumStateStore

FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 8 * 1024 * 1024
RETRY_BACKOFF_BASE_MS = 100


class NotLeaderError(Exception):
    """An append, snapshot or DescribeQuorum needs the leader of that epoch."""


@dataclass(frozen=True, slots=True)
class LeaderAndEpoch:
    leader_id: int | None
    epoch: int


@dataclass(frozen=True, slots=True)
class Outbound:
    """A request (new `correlation_id`) or a response (the request's `correlation_id`)."""

    destination: int
    correlation_id: int
    message: RaftRequest | RaftResponse


@dataclass(frozen=True, slots=True)
class LoadSnapshot:
    """Replace the state machine with this snapshot before applying what follows."""

    snapshot_id: OffsetAndEpoch


@dataclass(frozen=True, slots=True)
class Committed:
    """Records at offsets [base_offset, end_offset) are committed, as `RaftLog.read` returns them."""

    base_offset: int
    end_offset: int
    records: object


@dataclass(slots=True)
class Effects:
    """What one event asks of the driver, to be done in this order.

    Flush the log; send `outbound`; feed `apply` to the state machine; report
    `leader_change` (for the local leader only once its state machine has caught up to the
    epoch start); call `tick` at `deadline_ms` (None: nothing is timed, wait for events).
    `appended` answers `append` with the offsets the records got.
    """

    outbound: list[Outbound] = field(default_factory=list)
    apply: list[LoadSnapshot | Committed] = field(default_factory=list)
    leader_change: LeaderAndEpoch | None = None
    appended: LogAppendInfo | None = None
    deadline_ms: int | None = None


@dataclass(slots=True)
class _ParkedFetch:
    source: int
    correlation_id: int
    request: FetchRequest
    deadline_ms: int


class RaftClient:
    """One KRaft replica: a voter if `node_id` is in `config.voters`, else an observer."""

    def __init__(
        self,
        node_id: int,
        config: QuorumConfig,
        log: RaftLog,
        store: QuorumStateStore,
        rng: random.Random,
        now_ms: int,
        cluster_id: str | None = None,
        fetch_max_wait_ms: int = FETCH_MAX_WAIT_MS,
        fetch_max_bytes: int = FETCH_MAX_BYTES,
    ) -> None:
        if not config.voters:
            raise ValueError("controller.quorum.voters is empty")
        self.node_id = node_id
        self.cluster_id = cluster_id
        self._config = config
        self._voters = config.voter_ids
        self._log = log
        self._store = store
        self._rng = rng
        self._fetch_max_wait_ms = fetch_max_wait_ms
        self._fetch_max_bytes = fetch_max_bytes
        self._requests = RequestManager(config.request_timeout_ms, config.retry_backoff_ms)
        self._correlation_id = 0
        self._parked: list[_ParkedFetch] = []
        # Per fetching replica, (epoch, high watermark) of the last answer it got: a fetch
        # that would park is answered at once when the replica has not heard the current
        # high watermark yet (else it learns a commit only when its long poll expires).
        self._hw_told: dict[int, tuple[int, int]] = {}
        # (leader id, when) of the last answer a leader gave this replica as its follower.
        self.leader_contact: tuple[int, int] | None = None
        self._next_offset = -1
        self._fired: LeaderAndEpoch | None = None
        self._effects = Effects()
        self._wake: int | None = None
        self._now = now_ms
        self._persisted: ElectionState | None = None
        self._state: EpochState = self._initial_state(now_ms)
        self._persist()
        if self.is_voter and len(self._voters) == 1 and not isinstance(self._state, Leader):
            self._to_prospective(now_ms)

    # ------------------------------------------------------------------ views

    @property
    def is_voter(self) -> bool:
        return self.node_id in self._voters

    @property
    def state(self) -> EpochState:
        return self._state

    @property
    def epoch(self) -> int:
        return self._state.epoch

    @property
    def leader_id(self) -> int | None:
        state = self._state
        if isinstance(state, Follower | Prospective):
            return state.leader_id
        if isinstance(state, Leader | Resigned):
            return state.local_id
        return None

    @property
    def high_watermark(self) -> int | None:
        return self._state.high_watermark

    def describe_quorum(self, now_ms: int) -> QuorumInfo:
        """DescribeQuorum's answer; only the leader knows the replicas' progress."""
        if not isinstance(self._state, Leader):
            raise NotLeaderError(f"node {self.node_id} is not the leader")
        return self._state.describe(now_ms)

    # ------------------------------------------------------------------ events

    def tick(self, now_ms: int) -> Effects:
        self._begin()
        return self._finish(now_ms)

    def handle_request(
        self, source: int, correlation_id: int, request: RaftRequest, now_ms: int
    ) -> Effects:
        self._begin()
        response: RaftResponse | None
        if isinstance(request, FetchRequest):
            response = self._handle_fetch_request(source, correlation_id, request, now_ms)
        elif isinstance(request, VoteRequest):
            response = self._handle_vote_request(request, now_ms)
        elif isinstance(request, BeginQuorumEpochRequest):
            response = self._handle_begin_quorum_epoch_request(request, now_ms)
        elif isinstance(request, EndQuorumEpochRequest):
            response = self._handle_end_quorum_epoch_request(request, now_ms)
        else:
            response = self._handle_fetch_snapshot_request(request, now_ms)
        if response is not None:
            self._send(source, correlation_id, response)
        return self._finish(now_ms)

    def handle_response(
        self, source: int, correlation_id: int, response: RaftResponse, now_ms: int
    ) -> Effects:
        self._begin()
        if self._requests.is_expected(source, correlation_id):
            if isinstance(response, FetchResponse):
                ok = self._handle_fetch_response(response, now_ms)
            elif isinstance(response, VoteResponse):
                ok = self._handle_vote_response(source, response, now_ms)
            elif isinstance(response, BeginQuorumEpochResponse):
                ok = (
                    self._handle_common_response(
                        response.error_code, response.leader_id, response.leader_epoch, now_ms
                    )
                    is not False
                )
            elif isinstance(response, EndQuorumEpochResponse):
                ok = self._handle_end_quorum_epoch_response(source, response, now_ms)
            else:
                ok = self._handle_fetch_snapshot_response(response, now_ms)
            if self._requests.is_expected(source, correlation_id):
                self._requests.on_result(source, ok, now_ms)
        return self._finish(now_ms)

    def request_failed(self, destination: int, correlation_id: int, now_ms: int) -> Effects:
        """The transport could not deliver a request or lost its connection."""
        self._begin()
        if self._requests.is_expected(destination, correlation_id):
            self._requests.on_result(destination, False, now_ms)
        return self._finish(now_ms)

    def append(self, epoch: int, records: Sequence[bytes], now_ms: int) -> Effects:
        """Append the state machine's records as leader of `epoch`; `Effects.appended` has the offsets."""
        state = self._state
        if not isinstance(state, Leader) or state.epoch != epoch:
            raise NotLeaderError(f"node {self.node_id} is not the leader of epoch {epoch}")
        if not records:
            raise ValueError("nothing to append")
        self._begin()
        self._effects.appended = self._log.append_as_leader(records, epoch)
        self._on_leader_append(state, now_ms)
        return self._finish(now_ms)

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes, now_ms: int) -> Effects:
        """Store the state machine's image at a committed, applied offset.

        The log is cut at the previous snapshot, not this one: a lagging replica that is
        still downloading the previous snapshot can finish and continue from the log.
        """
        self._begin()
        log = self._log
        hw = self.high_watermark
        if not data:
            raise ValueError("a snapshot cannot be empty")
        if hw is None or snapshot_id.offset > hw or snapshot_id.offset > self._next_offset:
            raise ValueError(f"snapshot {snapshot_id} is past the applied committed offset")
        previous = log.latest_snapshot_id()
        if snapshot_id.offset <= max(log.log_start_offset, previous.offset if previous else 0):
            return self._finish(now_ms)
        valid = validate_offset_and_epoch(log, snapshot_id.offset, snapshot_id.epoch)
        if valid.kind is not ValidKind.VALID:
            raise ValueError(f"snapshot {snapshot_id} does not match the log")
        writer = log.create_new_snapshot(snapshot_id)
        if writer is not None:
            writer.append(data)
            writer.freeze()
        if previous is not None and previous.offset > log.log_start_offset:
            log.delete_before_snapshot(previous)
        return self._finish(now_ms)

    def resign(self, epoch: int, now_ms: int) -> Effects:
        """Graceful step-down (controlled shutdown): EndQuorumEpoch to the other voters."""
        self._begin()
        state = self._state
        if isinstance(state, Leader) and state.epoch == epoch:
            self._to_resigned(state, now_ms)
        return self._finish(now_ms)

    # ------------------------------------------------------------------ step plumbing

    def _begin(self) -> None:
        self._effects = Effects()
        self._wake = None

    def _finish(self, now_ms: int) -> Effects:
        self._now = now_ms
        self._poll(now_ms)
        self._update_listener()
        self._maybe_fire_leader_change()
        effects = self._effects
        effects.deadline_ms = self._wake
        self._effects = Effects()
        return effects

    def _wake_at(self, when_ms: int) -> None:
        """Ask for a tick at `when_ms`; a time already reached was handled by this poll."""
        if when_ms > self._now and (self._wake is None or when_ms < self._wake):
            self._wake = when_ms

    def _send(
        self, destination: int, correlation_id: int, message: RaftRequest | RaftResponse
    ) -> None:
        self._effects.outbound.append(Outbound(destination, correlation_id, message))

    def _send_request(self, destination: int, request: RaftRequest, now_ms: int) -> None:
        self._correlation_id += 1
        self._requests.on_sent(destination, self._correlation_id, now_ms)
        self._send(destination, self._correlation_id, request)

    def _election_timeout(self) -> int:
        timeout = self._config.election_timeout_ms
        return timeout + self._rng.randrange(timeout)

    def _election_backoff(self, retries: int) -> int:
        """Binary exponential backoff after a lost election, to break gridlock."""
        spread = self._rng.randrange(2 << min(20, max(retries, 1) - 1))
        return min(RETRY_BACKOFF_BASE_MS * spread, self._config.election_backoff_max_ms)

    # ------------------------------------------------------------------ transitions

    def _initial_state(self, now_ms: int) -> EpochState:
        """Resume the persisted election (Kafka's QuorumState.initialize)."""
        election = self._store.read() or ElectionState(0)
        log_epoch = self._log.last_fetched_epoch
        deadline = now_ms + self._election_timeout()
        if election.epoch < log_epoch:
            return Unattached(log_epoch, None, deadline)
        if election.leader_id == self.node_id:
            # A leader restarts resigned in its epoch: it cannot vote again in that epoch, and
            # records it may have lost unflushed keep their (offset, epoch) unique.
            return Resigned(
                election.epoch, self.node_id, deadline, set(self._voters - {self.node_id}), ()
            )
        if election.voted_id == self.node_id and self.is_voter:
            tally = VoteTally(self._voters, {self.node_id})
            return Candidate(election.epoch, self.node_id, tally, deadline, 1)
        if election.leader_id is not None:
            return Follower(
                election.epoch,
                election.leader_id,
                election.voted_id,
                now_ms + self._config.fetch_timeout_ms,
            )
        return Unattached(election.epoch, election.voted_id, deadline)

    def _persist(self) -> None:
        election = self._state.election()
        if election != self._persisted:
            self._store.write(election)
            self._persisted = election

    def _transition(self, new_state: EpochState) -> None:
        old = self._state
        if isinstance(old, Leader) and self._parked:
            parked, self._parked = self._parked, []
            for fetch in parked:
                self._send(
                    fetch.source,
                    fetch.correlation_id,
                    self._fetch_error(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                )
        self._state = new_state
        self._persist()
        self._requests.reset_all()

    def _voted_id_in(self, epoch: int) -> int | None:
        state = self._state
        if state.epoch != epoch:
            return None
        if isinstance(state, Unattached | Prospective | Follower):
            return state.voted_id
        if isinstance(state, Candidate):
            return self.node_id
        return None

    def _to_unattached(self, epoch: int, now_ms: int) -> None:
        state = self._state
        if isinstance(state, Unattached | Prospective | Candidate):
            deadline = state.election_deadline_ms
        else:
            deadline = now_ms + self._election_timeout()
        self._transition(Unattached(epoch, None, deadline, state.high_watermark))

    def _to_follower(self, epoch: int, leader_id: int, now_ms: int) -> None:
        if leader_id == self.node_id:
            raise RaftInvariantError(
                f"node {self.node_id} told it leads epoch {epoch} without an election"
            )
        voted = self._voted_id_in(epoch)
        self._transition(
            Follower(
                epoch, leader_id, voted, now_ms + self._config.fetch_timeout_ms, self.high_watermark
            )
        )

    def _to_prospective(self, now_ms: int) -> None:
        state = self._state
        leader_id = state.leader_id if isinstance(state, Follower) else None
        voted = (
            self.node_id
            if isinstance(state, Candidate | Resigned)
            else self._voted_id_in(state.epoch)
        )
        retries = state.retries + 1 if isinstance(state, Candidate) else 1
        tally = VoteTally(self._voters, {self.node_id})
        self._transition(
            Prospective(
                state.epoch,
                leader_id,
                voted,
                tally,
                now_ms + self._election_timeout(),
                retries,
                state.high_watermark,
            )
        )
        if tally.is_granted:
            self._to_candidate(now_ms)

    def _prospective_lost(self, state: Prospective, now_ms: int) -> None:
        """Pre-vote lost or timed out: back to the known leader, else wait unattached."""
        if state.leader_id is not None:
            self._transition(
                Follower(
                    state.epoch,
                    state.leader_id,
                    state.voted_id,
                    now_ms + self._config.fetch_timeout_ms,
                    state.high_watermark,
                )
            )
        else:
            self._transition(
                Unattached(
                    state.epoch,
                    state.voted_id,
                    now_ms + self._election_timeout(),
                    state.high_watermark,
                )
            )

    def _to_candidate(self, now_ms: int) -> None:
        state = self._state
        assert isinstance(state, Prospective)
        tally = VoteTally(self._voters, {self.node_id})
        self._transition(
            Candidate(
                state.epoch + 1,
                self.node_id,
                tally,
                now_ms + self._election_timeout(),
                state.retries,
                state.high_watermark,
            )
        )
        if tally.is_granted:
            self._to_leader(now_ms)

    def _to_leader(self, now_ms: int) -> None:
        state = self._state
        assert isinstance(state, Candidate) and state.tally.is_granted
        log = self._log
        # The leader forgets its old high watermark: it is known again once a majority holds
        # a record of the new epoch, which keeps the global high watermark monotonic.
        leader = Leader.start(
            state.epoch,
            self.node_id,
            log.log_end_offset,
            self._voters,
            frozenset(state.tally.granted),
            self._config.fetch_timeout_ms,
            now_ms,
        )
        self._transition(leader)
        log.append_leader_change(
            LeaderChange(
                self.node_id, tuple(sorted(self._voters)), tuple(sorted(state.tally.granted))
            ),
            leader.epoch,
        )
        self._on_leader_append(leader, now_ms)

    def _to_resigned(self, state: Leader, now_ms: int) -> None:
        self._transition(
            Resigned(
                state.epoch,
                self.node_id,
                now_ms + self._election_timeout(),
                set(self._voters - {self.node_id}),
                state.voters_by_descending_fetch_offset(),
            )
        )

    def _has_leader(self) -> bool:
        return self.leader_id is not None

    def _maybe_transition(self, leader_id: int | None, epoch: int, now_ms: int) -> bool:
        """React to a (leader, epoch) learned from a peer; True if our state changed."""
        if leader_id == self.node_id:
            # Peers may still report our own (resigned or forgotten) leadership of this
            # epoch; that is plausible only if we voted for ourselves in it.
            if epoch == self.epoch and (
                isinstance(self._state, Leader | Resigned)
                or self._voted_id_in(epoch) == self.node_id
            ):
                return False
            raise RaftInvariantError(
                f"node {self.node_id} is named leader of epoch {epoch} without having run in it"
            )
        if (
            epoch == self.epoch
            and leader_id is not None
            and self.leader_id not in (None, leader_id)
        ):
            raise RaftInvariantError(
                f"node {self.node_id}: leader {leader_id} claimed for epoch {epoch}, "
                f"but the leader is {self.leader_id}"
            )
        if epoch > self.epoch:
            if leader_id is None:
                self._to_unattached(epoch, now_ms)
            else:
                self._to_follower(epoch, leader_id, now_ms)
            return True
        if epoch == self.epoch and leader_id is not None and not self._has_leader():
            self._to_follower(epoch, leader_id, now_ms)
            return True
        return False

    # ------------------------------------------------------------------ poll

    def _poll(self, now_ms: int) -> None:
        """Run the current state's timers and send what it needs sent."""
        for _ in range(8):  # each pass may transition once; stop when a pass is stable
            state = self._state
            if isinstance(state, Leader):
                self._poll_leader(state, now_ms)
            elif isinstance(state, Candidate):
                self._poll_candidate(state, now_ms)
            elif isinstance(state, Prospective):
                self._poll_prospective(state, now_ms)
            elif isinstance(state, Follower):
                self._poll_follower(state, now_ms)
            elif isinstance(state, Unattached):
                self._poll_unattached(state, now_ms)
            else:
                self._poll_resigned(state, now_ms)
            if state is self._state:
                return
            self._wake = None

    def _poll_leader(self, state: Leader, now_ms: int) -> None:
        if state.check_quorum_expired(now_ms):
            self._to_resigned(state, now_ms)
            return
        if len(self._voters) > 1:
            self._wake_at(state.check_quorum_deadline_ms)
        due = [fetch for fetch in self._parked if fetch.deadline_ms <= now_ms]
        if due:
            self._complete_parked(state, due, now_ms)
        for fetch in self._parked:
            self._wake_at(fetch.deadline_ms)
        if now_ms >= state.begin_quorum_deadline_ms:
            for voter in sorted(self._voters - {self.node_id}):
                if self._requests.is_ready(voter, now_ms):
                    self._send_request(
                        voter,
                        BeginQuorumEpochRequest(self.cluster_id, voter, self.node_id, state.epoch),
                        now_ms,
                    )
            state.begin_quorum_deadline_ms = now_ms + state.begin_quorum_interval_ms
        if len(self._voters) > 1:
            self._wake_at(state.begin_quorum_deadline_ms)

    def _send_vote_requests(
        self, tally: VoteTally, epoch: int, pre_vote: bool, now_ms: int
    ) -> None:
        if tally.is_rejected:
            return
        last = OffsetAndEpoch(self._log.log_end_offset, self._log.last_fetched_epoch)
        for voter in tally.unrecorded():
            if self._requests.is_ready(voter, now_ms):
                request = VoteRequest(
                    self.cluster_id, voter, epoch, self.node_id, last.epoch, last.offset, pre_vote
                )
                self._send_request(voter, request, now_ms)
            self._wake_at(self._requests.next_ready_ms(voter))

    def _poll_candidate(self, state: Candidate, now_ms: int) -> None:
        if state.backoff_until_ms is None and now_ms >= state.election_deadline_ms:
            state.backoff_until_ms = now_ms + self._election_backoff(state.retries)
        if state.backoff_until_ms is not None:
            if now_ms >= state.backoff_until_ms:
                self._to_prospective(now_ms)
            else:
                self._wake_at(state.backoff_until_ms)
        else:
            self._send_vote_requests(state.tally, state.epoch, False, now_ms)
            self._wake_at(state.election_deadline_ms)

    def _poll_prospective(self, state: Prospective, now_ms: int) -> None:
        if now_ms >= state.election_deadline_ms:
            self._prospective_lost(state, now_ms)
        else:
            self._send_vote_requests(state.tally, state.epoch, True, now_ms)
            self._wake_at(state.election_deadline_ms)

    def _poll_follower(self, state: Follower, now_ms: int) -> None:
        if not self.is_voter:
            self._poll_observer_follower(state, now_ms)
        elif now_ms >= state.fetch_deadline_ms:
            self._to_prospective(now_ms)
        else:
            self._maybe_fetch(state, state.leader_id, now_ms)
            self._wake_at(state.fetch_deadline_ms)

    def _poll_observer_follower(self, state: Follower, now_ms: int) -> None:
        leader = state.leader_id
        if now_ms >= state.fetch_deadline_ms or self._requests.has_timed_out(leader, now_ms):
            self._fetch_from_any_voter(now_ms)
        elif not self._requests.has_inflight(now_ms):
            self._maybe_fetch(state, leader, now_ms)
        else:
            self._wake_at(self._requests.next_ready_ms(leader))
        if now_ms < state.fetch_deadline_ms:
            self._wake_at(state.fetch_deadline_ms)

    def _poll_unattached(self, state: Unattached, now_ms: int) -> None:
        if not self.is_voter:
            self._fetch_from_any_voter(now_ms)
        elif now_ms >= state.election_deadline_ms:
            self._to_prospective(now_ms)
        else:
            self._wake_at(state.election_deadline_ms)

    def _poll_resigned(self, state: Resigned, now_ms: int) -> None:
        request = EndQuorumEpochRequest(
            self.cluster_id, self.node_id, state.epoch, state.preferred_successors
        )
        for voter in sorted(state.unacked_voters):
            if self._requests.is_ready(voter, now_ms):
                self._send_request(voter, request, now_ms)
            self._wake_at(self._requests.next_ready_ms(voter))
        if now_ms >= state.election_deadline_ms:
            self._to_prospective(now_ms)
        else:
            self._wake_at(state.election_deadline_ms)

    def _fetch_from_any_voter(self, now_ms: int) -> None:
        """An observer without a reachable leader asks a random voter who leads."""
        if not self._requests.has_inflight(now_ms):
            ready = [v for v in sorted(self._voters) if self._requests.is_ready(v, now_ms)]
            if ready:
                self._send_request(self._rng.choice(ready), self._fetch_request(), now_ms)
        for voter in self._voters:
            self._wake_at(self._requests.next_ready_ms(voter))

    def _maybe_fetch(self, state: Follower, leader: int, now_ms: int) -> None:
        if self._requests.is_ready(leader, now_ms):
            writer = state.fetching_snapshot
            request: RaftRequest
            if writer is not None:
                request = FetchSnapshotRequest(
                    self.cluster_id,
                    self.node_id,
                    self._fetch_max_bytes,
                    state.epoch,
                    writer.snapshot_id,
                    writer.size,
                )
            else:
                request = self._fetch_request()
            self._send_request(leader, request, now_ms)
        self._wake_at(self._requests.next_ready_ms(leader))

    def _fetch_request(self) -> FetchRequest:
        log = self._log
        return FetchRequest(
            self.cluster_id,
            self.node_id,
            self._fetch_max_wait_ms,
            self._fetch_max_bytes,
            self.epoch,
            log.log_end_offset,
            log.last_fetched_epoch,
            log.log_start_offset,
        )

    # ------------------------------------------------------------------ request validation

    def _valid_cluster_id(self, cluster_id: str | None) -> bool:
        return cluster_id is None or self.cluster_id is None or cluster_id == self.cluster_id

    def _leader_or_sentinel(self) -> int:
        leader = self.leader_id
        return NO_LEADER if leader is None else leader

    def _validate_voter_only(self, remote_id: int, epoch: int) -> ErrorCode | None:
        if epoch < self.epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if remote_id < 0:
            return ErrorCode.INVALID_REQUEST
        if remote_id not in self._voters or not self.is_voter:
            return ErrorCode.INCONSISTENT_VOTER_SET
        return None

    def _validate_leader_only(self, epoch: int) -> ErrorCode | None:
        if epoch < self.epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if epoch > self.epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        if not isinstance(self._state, Leader):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return None

    # ------------------------------------------------------------------ Vote

    def _vote_response(self, error: ErrorCode, granted: bool) -> VoteResponse:
        return VoteResponse(error, self._leader_or_sentinel(), self.epoch, granted)

    def _handle_vote_request(self, request: VoteRequest, now_ms: int) -> VoteResponse:
        if not self._valid_cluster_id(request.cluster_id):
            return self._vote_response(ErrorCode.INCONSISTENT_CLUSTER_ID, False)
        last_epoch, last_offset, epoch = (
            request.last_offset_epoch,
            request.last_offset,
            request.replica_epoch,
        )
        if (
            last_offset < 0
            or last_epoch < 0
            or last_epoch > epoch
            or (last_epoch == epoch and not request.pre_vote)
        ):
            return self._vote_response(ErrorCode.INVALID_REQUEST, False)
        error = self._validate_voter_only(request.replica_id, epoch)
        if error is None and request.voter_id >= 0 and request.voter_id != self.node_id:
            error = ErrorCode.INCONSISTENT_VOTER_SET
        if error is not None:
            return self._vote_response(error, False)
        if epoch > self.epoch and not request.pre_vote:
            self._to_unattached(epoch, now_ms)
        up_to_date = OffsetAndEpoch(last_offset, last_epoch) >= OffsetAndEpoch(
            self._log.log_end_offset, self._log.last_fetched_epoch
        )
        granted = self._can_grant_vote(request.replica_id, up_to_date, request.pre_vote)
        state = self._state
        if granted and not request.pre_vote:
            if isinstance(state, Unattached) and state.voted_id is None:
                # Voting resets the election timer: the candidate is as likely to win as we are.
                self._transition(
                    Unattached(
                        epoch,
                        request.replica_id,
                        now_ms + self._election_timeout(),
                        state.high_watermark,
                    )
                )
            elif isinstance(state, Prospective) and state.voted_id is None:
                state.voted_id = request.replica_id
                self._persist()
        return self._vote_response(ErrorCode.NONE, granted)

    def _can_grant_vote(self, candidate: int, up_to_date: bool, pre_vote: bool) -> bool:
        state = self._state
        if isinstance(state, Unattached | Prospective):
            if pre_vote:
                return up_to_date
            if state.voted_id is not None:
                return state.voted_id == candidate
            leader = state.leader_id if isinstance(state, Prospective) else None
            return leader is None and up_to_date
        if isinstance(state, Follower):
            # A follower that hears from its leader refuses pre-votes: that is what keeps a
            # partitioned voter from disrupting a healthy quorum (KIP-996).
            return pre_vote and not state.has_fetched_from_leader and up_to_date
        if isinstance(state, Candidate):
            return pre_vote and up_to_date
        return False

    def _handle_vote_response(self, source: int, response: VoteResponse, now_ms: int) -> bool:
        handled = self._handle_common_response(
            response.error_code, response.leader_id, response.leader_epoch, now_ms
        )
        if handled is not None:
            return handled
        if response.error_code != ErrorCode.NONE:
            return False
        state = self._state
        if isinstance(state, Prospective):
            state.tally.record(source, response.vote_granted)
            if state.tally.is_granted:
                self._to_candidate(now_ms)
            elif state.tally.is_rejected:
                self._prospective_lost(state, now_ms)
        elif isinstance(state, Candidate):
            state.tally.record(source, response.vote_granted)
            if state.tally.is_granted:
                self._to_leader(now_ms)
            elif state.tally.is_rejected and state.backoff_until_ms is None:
                state.backoff_until_ms = now_ms + self._election_backoff(state.retries)
        return True

    def _handle_common_response(
        self, error_code: int, leader_id: int, epoch: int, now_ms: int
    ) -> bool | None:
        """Epoch and leader news every response carries (Kafka's maybeHandleCommonResponse).

        None: let the specific handler continue; otherwise handled, with success or not.
        """
        leader = None if leader_id < 0 else leader_id
        if epoch < self.epoch or error_code == ErrorCode.UNKNOWN_LEADER_EPOCH:
            return True
        if epoch > self.epoch or error_code in (
            ErrorCode.FENCED_LEADER_EPOCH,
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ):
            # Nothing new learned means the peer is not where we think the leader is: back off.
            return self._maybe_transition(leader, epoch, now_ms)
        if leader is not None and not self._has_leader():
            self._maybe_transition(leader, epoch, now_ms)
            return None if error_code == ErrorCode.NONE else True
        if error_code != ErrorCode.NONE:
            return False
        return None

    # ------------------------------------------------------------------ Begin/EndQuorumEpoch

    def _handle_begin_quorum_epoch_request(
        self, request: BeginQuorumEpochRequest, now_ms: int
    ) -> BeginQuorumEpochResponse:
        error = self._accept_epoch_notice(
            request.cluster_id, request.leader_id, request.leader_epoch, now_ms
        )
        return BeginQuorumEpochResponse(
            error or ErrorCode.NONE, self._leader_or_sentinel(), self.epoch
        )

    def _handle_end_quorum_epoch_request(
        self, request: EndQuorumEpochRequest, now_ms: int
    ) -> EndQuorumEpochResponse:
        error = self._accept_epoch_notice(
            request.cluster_id, request.leader_id, request.leader_epoch, now_ms
        )
        if error is None:
            state = self._state
            if isinstance(state, Follower) and state.leader_id == request.leader_id:
                backoff = self._end_epoch_backoff(request.preferred_successors)
                state.fetch_deadline_ms = now_ms + backoff
        return EndQuorumEpochResponse(
            error or ErrorCode.NONE, self._leader_or_sentinel(), self.epoch
        )

    def _accept_epoch_notice(
        self, cluster_id: str | None, leader_id: int, leader_epoch: int, now_ms: int
    ) -> ErrorCode | None:
        """Begin/EndQuorumEpoch: the leader of an epoch (a voter of this cluster) says so;
        accepted (None), this node learns that leader and epoch (`_maybe_transition`)."""
        if not self._valid_cluster_id(cluster_id):
            return ErrorCode.INCONSISTENT_CLUSTER_ID
        error = self._validate_voter_only(leader_id, leader_epoch)
        if error is None:
            self._maybe_transition(leader_id, leader_epoch, now_ms)
        return error

    def _end_epoch_backoff(self, successors: tuple[int, ...]) -> int:
        """The most caught-up successor stands first; the others wait exponentially longer."""
        maximum = self._config.election_backoff_max_ms
        position = successors.index(self.node_id) if self.node_id in successors else len(successors)
        if position == 0:
            return 0
        if position >= len(successors):
            return maximum
        base = maximum >> (len(successors) - 1)
        return min(maximum, base << (position - 1))

    def _handle_end_quorum_epoch_response(
        self, source: int, response: EndQuorumEpochResponse, now_ms: int
    ) -> bool:
        handled = self._handle_common_response(
            response.error_code, response.leader_id, response.leader_epoch, now_ms
        )
        if handled is not None:
            return handled
        if isinstance(self._state, Resigned):
            self._state.unacked_voters.discard(source)
        return True

    # ------------------------------------------------------------------ Fetch (leader side)

    def _fetch_error(self, error: ErrorCode) -> FetchResponse:
        return FetchResponse(
            error, self._leader_or_sentinel(), self.epoch, -1, self._log.log_start_offset, None
        )

    def _handle_fetch_request(
        self, source: int, correlation_id: int, request: FetchRequest, now_ms: int
    ) -> FetchResponse | None:
        if not self._valid_cluster_id(request.cluster_id):
            return self._fetch_error(ErrorCode.INCONSISTENT_CLUSTER_ID)
        if (
            request.max_wait_ms < 0
            or request.fetch_offset < 0
            or request.last_fetched_epoch < 0
            or request.last_fetched_epoch > request.current_leader_epoch
        ):
            return self._fetch_error(ErrorCode.INVALID_REQUEST)
        response = self._try_complete_fetch(request, now_ms)
        state = self._state
        if (
            response.error_code != ErrorCode.NONE
            or request.max_wait_ms == 0
            or not self._heard_high_watermark(request, response)
            or response.diverging_epoch is not None
            or response.snapshot_id is not None
            or request.fetch_offset < self._log.log_end_offset
            or not isinstance(state, Leader)
        ):
            self._told(request, response)
            return response
        # Nothing to send yet: hold the fetch until records arrive, the HW moves or it expires.
        self._parked.append(
            _ParkedFetch(source, correlation_id, request, now_ms + request.max_wait_ms)
        )
        return None

    def _try_complete_fetch(self, request: FetchRequest, now_ms: int) -> FetchResponse:
        error = self._validate_leader_only(request.current_leader_epoch)
        state = self._state
        if error is not None or not isinstance(state, Leader):
            return self._fetch_error(error or ErrorCode.NOT_LEADER_OR_FOLLOWER)
        log = self._log
        latest = log.latest_snapshot_id()
        if request.fetch_offset == 0 and latest is not None:
            kind, position = ValidKind.SNAPSHOT, latest
        else:
            valid = validate_offset_and_epoch(log, request.fetch_offset, request.last_fetched_epoch)
            kind, position = valid.kind, valid.offset_and_epoch
        records = None
        if kind is ValidKind.VALID:
            records = log.read(request.fetch_offset, min(request.max_bytes, self._fetch_max_bytes))
            replica = request.replica_id
            if (
                replica >= 0
                and replica != self.node_id
                and state.update_replica(replica, request.fetch_offset, now_ms)
            ):
                self._on_leader_high_watermark(state, now_ms)
        hw = state.high_watermark
        return FetchResponse(
            ErrorCode.NONE,
            self.node_id,
            state.epoch,
            -1 if hw is None else hw,
            log.log_start_offset,
            records,
            diverging_epoch=position if kind is ValidKind.DIVERGING else None,
            snapshot_id=position if kind is ValidKind.SNAPSHOT else None,
        )

    def _on_leader_append(self, state: Leader, now_ms: int) -> None:
        end = self._log.log_end_offset
        if state.update_local_end_offset(end):
            self._on_leader_high_watermark(state, now_ms)
        else:
            self._complete_parked(
                state, [f for f in self._parked if f.request.fetch_offset < end], now_ms
            )

    def _on_leader_high_watermark(self, state: Leader, now_ms: int) -> None:
        """Parked fetches answer at once, so followers learn the new high watermark."""
        self._complete_parked(state, list(self._parked), now_ms)

    def _complete_parked(self, state: Leader, fetches: list[_ParkedFetch], now_ms: int) -> None:
        if not fetches:
            return
        done = {id(fetch) for fetch in fetches}
        self._parked = [fetch for fetch in self._parked if id(fetch) not in done]
        for fetch in fetches:
            response = self._try_complete_fetch(fetch.request, now_ms)
            self._told(fetch.request, response)
            self._send(fetch.source, fetch.correlation_id, response)

    def _heard_high_watermark(self, request: FetchRequest, response: FetchResponse) -> bool:
        told = self._hw_told.get(request.replica_id)
        return request.replica_id < 0 or told == (response.leader_epoch, response.high_watermark)

    def _told(self, request: FetchRequest, response: FetchResponse) -> None:
        if request.replica_id >= 0 and response.error_code == ErrorCode.NONE:
            self._hw_told[request.replica_id] = (response.leader_epoch, response.high_watermark)

    # ------------------------------------------------------------------ Fetch (follower side)

    def _handle_fetch_response(self, response: FetchResponse, now_ms: int) -> bool:
        handled = self._handle_common_response(
            response.error_code, response.leader_id, response.leader_epoch, now_ms
        )
        if handled is not None:
            return handled
        state = self._state
        if not isinstance(state, Follower):
            return True
        if response.error_code != ErrorCode.NONE:
            return False
        log = self._log
        if response.diverging_epoch is not None:
            offset = truncation_offset(log, response.diverging_epoch)
            if state.high_watermark is not None and offset < state.high_watermark:
                raise RaftInvariantError(
                    f"node {self.node_id}: leader asks to truncate to {offset}, below the "
                    f"high watermark {state.high_watermark}"
                )
            log.truncate_to(offset)
        elif response.snapshot_id is not None:
            writer = log.create_new_snapshot(response.snapshot_id)
            if writer is None:
                self._install_snapshot(state)
            else:
                state.fetching_snapshot = writer
        else:
            if response.records is not None:
                log.append_as_follower(response.records)
            if response.high_watermark >= 0:
                state.update_high_watermark(
                    min(response.high_watermark, log.log_end_offset), self.node_id
                )
        self._heard_from_leader(state, now_ms)
        return True

    def _heard_from_leader(self, state: Follower, now_ms: int) -> None:
        state.fetch_deadline_ms = now_ms + self._config.fetch_timeout_ms
        state.has_fetched_from_leader = True
        self.leader_contact = (state.leader_id, now_ms)

    def _install_snapshot(self, state: Follower) -> None:
        """The downloaded snapshot is committed data: the log restarts there unless it holds it."""
        log = self._log
        latest = log.latest_snapshot_id()
        assert latest is not None
        log.truncate_to_latest_snapshot()
        state.snapshot_installed(latest.offset)

    # ------------------------------------------------------------------ FetchSnapshot

    def _handle_fetch_snapshot_request(
        self, request: FetchSnapshotRequest, now_ms: int
    ) -> FetchSnapshotResponse:
        def reply(error: ErrorCode) -> FetchSnapshotResponse:
            return FetchSnapshotResponse(
                error, self._leader_or_sentinel(), self.epoch, None, -1, -1, b""
            )

        if not self._valid_cluster_id(request.cluster_id):
            return reply(ErrorCode.INCONSISTENT_CLUSTER_ID)
        error = self._validate_leader_only(request.current_leader_epoch)
        state = self._state
        if error is not None or not isinstance(state, Leader):
            return reply(error or ErrorCode.NOT_LEADER_OR_FOLLOWER)
        snapshot = self._log.read_snapshot(request.snapshot_id)
        if snapshot is None:
            return reply(ErrorCode.SNAPSHOT_NOT_FOUND)
        if not 0 <= request.position < snapshot.size:
            return reply(ErrorCode.POSITION_OUT_OF_RANGE)
        chunk = snapshot.slice(
            request.position, max(1, min(request.max_bytes, self._fetch_max_bytes))
        )
        state.update_check_quorum(request.replica_id, now_ms)
        return FetchSnapshotResponse(
            ErrorCode.NONE,
            self.node_id,
            state.epoch,
            request.snapshot_id,
            snapshot.size,
            request.position,
            chunk,
        )

    def _handle_fetch_snapshot_response(self, response: FetchSnapshotResponse, now_ms: int) -> bool:
        handled = self._handle_common_response(
            response.error_code, response.leader_id, response.leader_epoch, now_ms
        )
        if handled is not None:
            return handled
        state = self._state
        writer = state.fetching_snapshot if isinstance(state, Follower) else None
        if not isinstance(state, Follower) or writer is None:
            return True
        if response.error_code == ErrorCode.SNAPSHOT_NOT_FOUND:
            # The leader replaced the snapshot meanwhile: start over with a Fetch.
            state.fetching_snapshot = None
            state.fetch_deadline_ms = now_ms + self._config.fetch_timeout_ms
            return True
        if (
            response.error_code != ErrorCode.NONE
            or response.snapshot_id != writer.snapshot_id
            or response.position != writer.size
        ):
            state.fetching_snapshot = None
            return False
        writer.append(response.unaligned_records)
        if writer.size >= response.size:
            writer.freeze()
            state.fetching_snapshot = None
            self._install_snapshot(state)
        self._heard_from_leader(state, now_ms)
        return True

    # ------------------------------------------------------------------ state machine feed

    def _update_listener(self) -> None:
        """Hand committed data to the state machine: the snapshot first if it is behind."""
        hw = self.high_watermark
        if hw is None:
            return
        log = self._log
        if self._next_offset < hw and (
            self._next_offset < 0 or self._next_offset < log.log_start_offset
        ):
            snapshot = log.latest_snapshot_id()
            if snapshot is not None:
                self._effects.apply.append(LoadSnapshot(snapshot))
                self._next_offset = snapshot.offset
            elif self._next_offset < 0:
                self._next_offset = 0
            else:
                raise RaftInvariantError(
                    f"node {self.node_id}: committed offset {self._next_offset} is gone and no snapshot covers it"
                )
        if self._next_offset < hw:
            records = log.read(self._next_offset, sys.maxsize, hw)
            self._effects.apply.append(Committed(self._next_offset, hw, records))
            self._next_offset = hw

    def _maybe_fire_leader_change(self) -> None:
        state = self._state
        leader, fired = self.leader_id, self._fired
        if fired is not None and fired.leader_id == leader and fired.epoch == state.epoch:
            return
        # The new leader's state machine hears of its leadership only once it has applied
        # everything before the epoch, including the LeaderChange record.
        if isinstance(state, Resigned) or (
            isinstance(state, Leader) and self._next_offset <= state.epoch_start_offset
        ):
            return
        self._fired = LeaderAndEpoch(leader, state.epoch)
        self._effects.leader_change = self._fired
