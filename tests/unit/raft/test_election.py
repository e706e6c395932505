"""Elections step by step: pre-vote (KIP-996), vote, BeginQuorumEpoch, restarts, resignation."""

from __future__ import annotations

import pytest

from moldau.protocol.errors import ErrorCode
from moldau.raft import ElectionState, LeaderAndEpoch, LeaderChange
from moldau.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    FetchRequest,
    VoteRequest,
    VoteResponse,
)
from moldau.raft.state import Candidate, Follower, Leader, Prospective, Resigned, Unattached
from tests.unit.raft.quorum import Quorum


def vote_request(
    epoch: int, candidate: int, last_epoch: int, last_offset: int, pre_vote: bool = False
) -> VoteRequest:
    return VoteRequest("test", -1, epoch, candidate, last_epoch, last_offset, pre_vote)


def test_fresh_voter_waits_unattached_at_epoch_zero_within_election_timeout() -> None:
    q = Quorum(3)
    node = q[1]
    assert isinstance(node.client.state, Unattached)
    assert node.client.epoch == 0
    assert node.store.state == ElectionState(0)
    assert node.deadline is not None and 1000 <= node.deadline < 2000
    assert q.network == []


def test_election_timeout_starts_a_pre_vote_in_the_same_epoch() -> None:
    q = Quorum(3)
    q.expire(1)
    state = q[1].client.state
    assert isinstance(state, Prospective) and state.epoch == 0
    votes = q.pending(VoteRequest, source=1)
    assert sorted(m.destination for m in votes) == [2, 3]
    for m in votes:
        request = m.out.message
        assert isinstance(request, VoteRequest)
        assert (request.pre_vote, request.replica_epoch, request.replica_id) == (True, 0, 1)
    assert q[1].store.state == ElectionState(0)


def test_pre_vote_changes_nothing_at_the_voter() -> None:
    q = Quorum(3)
    q.expire(1)
    message = q.pending(VoteRequest, destination=2)[0]
    q.deliver(message)
    reply = q.pending(VoteResponse, source=2)[0].out.message
    assert isinstance(reply, VoteResponse) and reply.vote_granted
    assert q[2].store.state == ElectionState(0)
    assert isinstance(q[2].client.state, Unattached) and q[2].client.state.voted_id is None


def test_majority_of_pre_votes_makes_a_candidate_that_bumps_and_persists_its_epoch() -> None:
    q = Quorum(3)
    q.expire(1)
    q.deliver(q.take(lambda m: m.destination == 2)[0])
    q.deliver(q.take(lambda m: m.source == 2)[0])
    state = q[1].client.state
    assert isinstance(state, Candidate) and state.epoch == 1
    assert q[1].store.state == ElectionState(1, None, 1)
    standard = [m.out.message for m in q.pending(VoteRequest, source=1)]
    assert any(
        isinstance(r, VoteRequest) and not r.pre_vote and r.replica_epoch == 1 for r in standard
    )


def test_candidate_with_majority_leads_and_writes_leader_change_first() -> None:
    q = Quorum(3)
    leader = q.elect(1)
    state = leader.client.state
    assert isinstance(state, Leader) and state.epoch == 1 and state.epoch_start_offset == 0
    first = leader.log.entry(0)
    assert first is not None and first.epoch == 1
    assert isinstance(first.value, LeaderChange) and first.value.leader_id == 1
    assert first.value.voters == (1, 2, 3)
    assert leader.store.state == ElectionState(1, 1, None)
    for follower in (q[2], q[3]):
        assert isinstance(follower.client.state, Follower)
        assert follower.client.leader_id == 1 and follower.client.epoch == 1
        assert follower.store.state == ElectionState(1, 1, 1)


def test_new_leader_announces_itself_with_begin_quorum_epoch() -> None:
    q = Quorum(3)
    q.expire(1)
    # Win with node 2's votes only; node 3 hears of the leader from BeginQuorumEpoch.
    q.deliver_all(lambda m: 3 not in (m.source, m.destination))
    assert isinstance(q[1].client.state, Leader)
    begin = q.pending(BeginQuorumEpochRequest, source=1, destination=3)
    assert begin, q.network
    q.take(lambda m: m.destination == 3 and not isinstance(m.out.message, BeginQuorumEpochRequest))
    q.deliver(begin[0])
    assert isinstance(q[3].client.state, Follower) and q[3].client.leader_id == 1


def test_single_voter_leads_at_once_and_commits_its_leader_change() -> None:
    q = Quorum(1)
    node = q[1]
    assert isinstance(node.client.state, Leader) and node.client.epoch == 1
    assert node.client.high_watermark == 1
    assert node.leader_changes == [LeaderAndEpoch(1, 1)]
    q.append(1, b"a")
    assert node.client.high_watermark == 2 and node.data_values() == [b"a"]


def test_follower_that_hears_its_leader_rejects_pre_votes() -> None:
    q = Quorum(3)
    q.elect(1)
    q.replicate()
    assert isinstance(q[2].client.state, Follower) and q[2].client.state.has_fetched_from_leader
    q.deliver_all()
    effects = q[2].client.handle_request(3, 99, vote_request(1, 3, 1, 1, pre_vote=True), q.now)
    reply = effects.outbound[0].message
    assert isinstance(reply, VoteResponse) and not reply.vote_granted
    assert reply.leader_id == 1 and reply.leader_epoch == 1


def test_follower_that_never_fetched_grants_pre_votes() -> None:
    q = Quorum(3)
    q.elect(1)
    # Node 2 knows the leader (BeginQuorumEpoch) but no fetch has succeeded yet.
    q.drop_all()
    effects = q[2].client.handle_request(3, 99, vote_request(1, 3, 1, 1, pre_vote=True), q.now)
    reply = effects.outbound[0].message
    assert isinstance(reply, VoteResponse) and reply.vote_granted
    assert isinstance(q[2].client.state, Follower) and q[2].client.epoch == 1


def test_partitioned_voter_cannot_disrupt_a_healthy_quorum() -> None:
    q = Quorum(3)
    q.elect(1)
    q.replicate()
    # Node 3 can send but hears nothing back for 10 s: it keeps failing its pre-vote.
    q.run_for(10_000, lambda m: m.destination != 3)
    assert isinstance(q[3].client.state, Prospective | Follower)
    assert q[3].client.epoch == 1, "pre-votes never bump the epoch"
    assert isinstance(q[1].client.state, Leader) and q[1].client.epoch == 1
    assert q[2].client.epoch == 1 and q[2].client.leader_id == 1


def test_lost_pre_vote_returns_to_following_the_known_leader() -> None:
    q = Quorum(3)
    q.elect(1)
    q.replicate()
    # Node 2 stops hearing the leader while node 3 keeps fetching.
    while not isinstance(q[2].client.state, Prospective):
        q.run_for(5, lambda m: 2 not in (m.source, m.destination))
    prospective = q[2].client.state
    assert (
        isinstance(prospective, Prospective)
        and prospective.leader_id == 1
        and prospective.epoch == 1
    )
    q.deliver_all(
        lambda m: m.source == 2 and isinstance(m.out.message, VoteRequest) or m.destination == 2
    )
    state = q[2].client.state
    assert isinstance(state, Follower) and state.leader_id == 1 and state.epoch == 1
    assert q[3].client.epoch == 1 and isinstance(q[1].client.state, Leader)


def test_voter_rejects_a_vote_when_its_log_is_longer() -> None:
    q = Quorum(3)
    q.elect(1)
    q.append(1, b"x")
    q.replicate()
    # Node 3 asks with a log that stops before ours (same epoch, smaller offset).
    effects = q[2].client.handle_request(3, 5, vote_request(2, 3, 1, 1), q.now)
    reply = effects.outbound[0].message
    assert isinstance(reply, VoteResponse) and not reply.vote_granted
    assert q[2].client.epoch == 2 and isinstance(q[2].client.state, Unattached)


def test_voter_rejects_a_log_with_an_older_last_epoch_even_if_longer() -> None:
    q = Quorum(3)
    q.elect(1)
    q.append(1, b"x")
    q.replicate()
    effects = q[2].client.handle_request(3, 5, vote_request(3, 3, 0, 50), q.now)
    reply = effects.outbound[0].message
    assert isinstance(reply, VoteResponse) and not reply.vote_granted


def test_voter_grants_one_vote_per_epoch_and_repeats_it() -> None:
    q = Quorum(5)
    first = q[1].client.handle_request(2, 1, vote_request(1, 2, 0, 0), q.now).outbound[0].message
    second = q[1].client.handle_request(3, 1, vote_request(1, 3, 0, 0), q.now).outbound[0].message
    again = q[1].client.handle_request(2, 2, vote_request(1, 2, 0, 0), q.now).outbound[0].message
    assert isinstance(first, VoteResponse) and first.vote_granted
    assert isinstance(second, VoteResponse) and not second.vote_granted
    assert isinstance(again, VoteResponse) and again.vote_granted
    assert q[1].store.state == ElectionState(1, None, 2)


def test_vote_survives_a_restart() -> None:
    q = Quorum(3)
    q[1].client.handle_request(2, 1, vote_request(1, 2, 0, 0), q.now)
    restarted = q.restart(1)
    assert isinstance(restarted.client.state, Unattached) and restarted.client.state.voted_id == 2
    reply = (
        restarted.client.handle_request(3, 1, vote_request(1, 3, 0, 0), q.now).outbound[0].message
    )
    assert isinstance(reply, VoteResponse) and not reply.vote_granted


def test_stale_epoch_vote_is_fenced() -> None:
    q = Quorum(3)
    q.elect(1)
    reply = q[2].client.handle_request(3, 1, vote_request(1, 3, 0, 0), q.now).outbound[0].message
    # epoch 1 == current: the follower has a leader, so no.
    assert isinstance(reply, VoteResponse) and not reply.vote_granted
    reply = (
        q[2]
        .client.handle_request(3, 2, vote_request(0, 3, 0, 0, pre_vote=True), q.now)
        .outbound[0]
        .message
    )
    assert isinstance(reply, VoteResponse) and reply.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert reply.leader_epoch == 1 and reply.leader_id == 1


def test_rejected_candidate_backs_off_then_tries_a_pre_vote_again() -> None:
    q = Quorum(3)
    q.expire(1)
    q.deliver(q.take(lambda m: m.destination == 2)[0])
    q.deliver(q.take(lambda m: m.source == 2)[0])
    state = q[1].client.state
    assert isinstance(state, Candidate) and state.epoch == 1
    # Node 2 says no (it voted for someone else in epoch 1); node 3 never answers.
    q[2].client.handle_request(3, 50, vote_request(1, 3, 0, 0), q.now)
    q.deliver_all(
        lambda m: (
            m.destination == 2 and isinstance(m.out.message, VoteRequest) or m.destination == 1
        )
    )
    assert state.tally.rejected == {2}
    assert isinstance(q[1].client.state, Candidate)
    q.network = []
    q.advance(state.election_deadline_ms)
    assert state.backoff_until_ms is not None and state.backoff_until_ms - q.now <= 1000
    q.advance(state.backoff_until_ms)
    after = q[1].client.state
    assert isinstance(after, Prospective) and after.epoch == 1 and after.voted_id == 1
    assert q[1].store.state == ElectionState(1, None, 1)


def test_old_leader_with_smaller_epoch_becomes_follower() -> None:
    q = Quorum(3)
    q.elect(1)
    q.replicate()
    # Node 1 is partitioned away; the others elect node 2 in epoch 2.
    q.network = []
    q.advance(q.now + 2500)
    q.network = [m for m in q.network if 1 not in (m.source, m.destination)]
    q.deliver_all(lambda m: 1 not in (m.source, m.destination))
    if not isinstance(q[2].client.state, Leader):
        q.advance(q.now + 3000)
        q.network = [m for m in q.network if 1 not in (m.source, m.destination)]
        q.deliver_all(lambda m: 1 not in (m.source, m.destination))
    new_leader = next(n for n in (q[2], q[3]) if isinstance(n.client.state, Leader))
    assert new_leader.client.epoch >= 2
    # Node 1 comes back: the first message at the higher epoch demotes it.
    reply = (
        q[1]
        .client.handle_request(
            new_leader.node_id,
            7,
            BeginQuorumEpochRequest("test", 1, new_leader.node_id, new_leader.client.epoch),
            q.now,
        )
        .outbound[0]
        .message
    )
    assert isinstance(reply, BeginQuorumEpochResponse) and reply.error_code == ErrorCode.NONE
    assert isinstance(q[1].client.state, Follower) and q[1].client.leader_id == new_leader.node_id


def test_stale_leader_is_fenced_by_epoch() -> None:
    q = Quorum(3)
    q.elect(1)
    q[2].client.handle_request(3, 1, vote_request(5, 3, 1, 1), q.now)
    reply = (
        q[2]
        .client.handle_request(1, 2, BeginQuorumEpochRequest("test", 2, 1, 1), q.now)
        .outbound[0]
        .message
    )
    assert (
        isinstance(reply, BeginQuorumEpochResponse)
        and reply.error_code == ErrorCode.FENCED_LEADER_EPOCH
    )
    assert reply.leader_epoch == 5


def test_leader_restarts_resigned_and_cannot_vote_in_its_epoch() -> None:
    q = Quorum(3)
    q.elect(1)
    restarted = q.restart(1)
    assert isinstance(restarted.client.state, Resigned) and restarted.client.epoch == 1
    reply = (
        restarted.client.handle_request(2, 1, vote_request(1, 2, 1, 1), q.now).outbound[0].message
    )
    assert isinstance(reply, VoteResponse) and not reply.vote_granted


def test_candidate_restarts_as_candidate_of_its_epoch() -> None:
    q = Quorum(3)
    q.expire(1)
    q.deliver(q.take(lambda m: m.destination == 2)[0])
    q.deliver(q.take(lambda m: m.source == 2)[0])
    assert isinstance(q[1].client.state, Candidate)
    restarted = q.restart(1)
    assert isinstance(restarted.client.state, Candidate) and restarted.client.epoch == 1


def test_graceful_resignation_hands_over_to_the_most_caught_up_voter() -> None:
    q = Quorum(3)
    q.elect(1)
    q.append(1, b"x")
    q.replicate()
    q.record(q[1], q[1].client.resign(1, q.now))
    assert isinstance(q[1].client.state, Resigned)
    ends = q.pending(EndQuorumEpochRequest, source=1)
    assert sorted(m.destination for m in ends) == [2, 3]
    request = ends[0].out.message
    assert isinstance(request, EndQuorumEpochRequest) and sorted(request.preferred_successors) == [
        2,
        3,
    ]
    first = request.preferred_successors[0]
    q.deliver_all(lambda m: isinstance(m.out.message, EndQuorumEpochRequest) or m.destination == 1)
    # The first successor stands at once (its fetch timeout is overridden to 0 ms).
    standing = q[first].client.state
    assert isinstance(standing, Prospective) and standing.epoch == 1
    start = q.now
    while not any(isinstance(n.client.state, Leader) for n in q.nodes.values()):
        q.run_for(10)
    leader = next(n for n in q.nodes.values() if isinstance(n.client.state, Leader))
    assert leader.client.epoch == 2 and leader.node_id != 1
    assert q.now - start <= 1500
    q.run_for(100)
    assert isinstance(q[1].client.state, Follower) and q[1].client.leader_id == leader.node_id


def test_leader_resigns_when_a_majority_stops_fetching() -> None:
    q = Quorum(3)
    q.elect(1)
    q.replicate()
    q.network = []
    start = q.now
    while isinstance(q[1].client.state, Leader):
        q.advance(q.now + 100)
        q.network = [m for m in q.network if m.source != 1]
    assert isinstance(q[1].client.state, Resigned)
    assert 3000 <= q.now - start <= 3600  # 1.5 x controller.quorum.fetch.timeout.ms


def test_observer_never_votes_and_never_runs() -> None:
    q = Quorum(3, observers=1)
    observer = q[4]
    assert not observer.client.is_voter
    reply = (
        observer.client.handle_request(1, 1, vote_request(1, 1, 0, 0), q.now).outbound[0].message
    )
    assert isinstance(reply, VoteResponse) and reply.error_code == ErrorCode.INCONSISTENT_VOTER_SET
    q.advance(10_000)
    assert isinstance(observer.client.state, Unattached)
    assert not q.pending(VoteRequest, source=4)


def test_vote_from_a_non_voter_is_refused() -> None:
    q = Quorum(3, observers=1)
    reply = q[1].client.handle_request(4, 1, vote_request(1, 4, 0, 0), q.now).outbound[0].message
    assert isinstance(reply, VoteResponse) and reply.error_code == ErrorCode.INCONSISTENT_VOTER_SET
    assert q[1].client.epoch == 0


@pytest.mark.parametrize(
    "request_",
    [
        vote_request(1, 2, 1, 0),  # last epoch == candidate epoch on a real vote
        vote_request(1, 2, 2, 0, pre_vote=True),  # last epoch above the epoch
        vote_request(1, 2, 0, -1),
    ],
)
def test_malformed_vote_is_an_invalid_request(request_: VoteRequest) -> None:
    q = Quorum(3)
    reply = q[1].client.handle_request(2, 1, request_, q.now).outbound[0].message
    assert isinstance(reply, VoteResponse) and reply.error_code == ErrorCode.INVALID_REQUEST
    assert q[1].client.epoch == 0


def test_wrong_cluster_id_is_refused() -> None:
    q = Quorum(3)
    request = VoteRequest("other-cluster", -1, 1, 2, 0, 0, False)
    reply = q[1].client.handle_request(2, 1, request, q.now).outbound[0].message
    assert isinstance(reply, VoteResponse) and reply.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID


def test_lost_pre_vote_without_a_known_leader_waits_unattached() -> None:
    q = Quorum(3)
    q.expire(1)
    for request in q.take():
        reply = VoteResponse(ErrorCode.NONE, -1, 0, False)
        q.record(
            q[1],
            q[1].client.handle_response(
                request.destination, request.out.correlation_id, reply, q.now
            ),
        )
    state = q[1].client.state
    assert isinstance(state, Unattached) and state.epoch == 0
    assert state.election_deadline_ms > q.now


def test_candidate_follows_the_rival_that_won_its_epoch() -> None:
    q = Quorum(3)
    q.expire(1)
    q.deliver(q.take(lambda m: m.destination == 2)[0])
    q.deliver(q.take(lambda m: m.source == 2)[0])
    assert isinstance(q[1].client.state, Candidate)
    q.drop_all()
    # Node 3 also reached epoch 1 and won it with node 2's vote.
    q.record(
        q[1], q[1].client.handle_request(3, 9, BeginQuorumEpochRequest("test", 1, 3, 1), q.now)
    )
    state = q[1].client.state
    assert isinstance(state, Follower) and (state.epoch, state.leader_id, state.voted_id) == (
        1,
        3,
        1,
    )
    assert q[1].store.state == ElectionState(1, 3, 1)


def test_candidate_steps_back_for_a_higher_epoch() -> None:
    q = Quorum(3)
    q.expire(1)
    q.deliver(q.take(lambda m: m.destination == 2)[0])
    q.deliver(q.take(lambda m: m.source == 2)[0])
    q.drop_all()
    reply = q[1].client.handle_request(3, 9, vote_request(4, 3, 0, 0), q.now).outbound[0].message
    assert isinstance(reply, VoteResponse) and reply.vote_granted and reply.leader_epoch == 4
    state = q[1].client.state
    assert isinstance(state, Unattached) and (state.epoch, state.voted_id) == (4, 3)


def test_follower_restarts_following_the_same_leader() -> None:
    q = Quorum(3)
    q.elect(1)
    restarted = q.restart(2)
    state = restarted.client.state
    assert isinstance(state, Follower) and (state.epoch, state.leader_id) == (1, 1)
    assert not state.has_fetched_from_leader


def test_pre_vote_from_a_higher_epoch_does_not_move_the_voter() -> None:
    q = Quorum(3)
    q.elect(1)
    q.replicate()
    before = q[2].store.state
    reply = (
        q[2]
        .client.handle_request(3, 9, vote_request(5, 3, 1, 1, pre_vote=True), q.now)
        .outbound[0]
        .message
    )
    assert isinstance(reply, VoteResponse) and not reply.vote_granted and reply.leader_epoch == 1
    state = q[2].client.state
    assert isinstance(state, Follower) and (state.epoch, state.leader_id) == (1, 1)
    assert q[2].store.state == before


def test_leader_steps_down_at_the_first_higher_epoch_it_hears_of() -> None:
    q = Quorum(3)
    q.elect(1)
    q.replicate()
    assert isinstance(q[1].client.state, Leader)
    q.record(
        q[1], q[1].client.handle_request(2, 9, BeginQuorumEpochRequest("test", 1, 2, 2), q.now)
    )
    state = q[1].client.state
    assert isinstance(state, Follower) and (state.epoch, state.leader_id) == (2, 2)


def test_a_new_leader_knows_when_its_predecessor_last_answered() -> None:
    """What a new controller needs to fence a killed predecessor one session after its
    death: the time of the last fetch answer it had from the previous leader."""
    q = Quorum(3)
    q.elect(1)
    assert q[2].client.leader_contact is None
    q.replicate()
    last_answer = q.now
    assert q[2].client.leader_contact == (1, last_answer)
    assert q[3].client.leader_contact == (1, last_answer)
    q.stop(1)
    q.drop_all()
    leader = None
    while leader is None:  # fetch timeouts, then an election between 2 and 3
        q.advance(q.now + 100)
        q.deliver_all(lambda m: not isinstance(m.out.message, FetchRequest))
        leader = next((n for n in (q[2], q[3]) if isinstance(n.client.state, Leader)), None)
    assert q.now > last_answer
    assert leader.client.leader_contact == (1, last_answer)
