"""WE-26 (KRaft vote), step by step, with Kafka's pre-vote in front of it."""

from __future__ import annotations

import pytest

from moldau.protocol.errors import ErrorCode
from moldau.raft.messages import BeginQuorumEpochRequest, VoteRequest, VoteResponse
from moldau.raft.state import Candidate, Follower, Leader
from tests.unit.raft.quorum import Quorum


def standard_votes_from(q: Quorum, candidate: int) -> list[VoteRequest]:
    return [
        m.out.message
        for m in q.pending(VoteRequest, source=candidate)
        if isinstance(m.out.message, VoteRequest) and not m.out.message.pre_vote
    ]


@pytest.mark.parametrize(("voters", "needed"), [(3, 2), (5, 3)])
def test_we26_candidate_needs_more_than_half_counting_itself(voters: int, needed: int) -> None:
    q = Quorum(voters)
    q.expire(1)
    q.deliver_all(lambda m: m.source == 1 and m.out.message.pre_vote or m.destination == 1)  # type: ignore[union-attr]
    candidate = q[1].client.state
    assert isinstance(candidate, Candidate)
    # Step 1: candidateEpoch = last epoch + 1, own vote, VoteRequest(epoch, last offset, its epoch).
    requests = standard_votes_from(q, 1)
    assert len(requests) == voters - 1
    assert {(r.replica_epoch, r.last_offset, r.last_offset_epoch) for r in requests} == {(1, 0, 0)}
    assert candidate.tally.granted == {1}
    granted = 1
    for message in q.take(lambda m: m.source == 1 and isinstance(m.out.message, VoteRequest)):
        if granted == needed:
            break
        q.deliver(message)
        q.deliver(q.take(lambda m: m.destination == 1)[0])
        granted += 1
        won = isinstance(q[1].client.state, Leader)
        assert won == (granted >= needed), (granted, needed)
    # Step 3: the winner ends the election with BeginQuorumEpoch.
    assert q.pending(BeginQuorumEpochRequest, source=1)


def test_we26_voter_says_no_to_an_epoch_it_has_already_passed() -> None:
    q = Quorum(3)
    q[2].client.handle_request(3, 1, VoteRequest("test", 2, 4, 3, 0, 0, False), q.now)
    reply = (
        q[2]
        .client.handle_request(1, 2, VoteRequest("test", 2, 3, 1, 0, 0, False), q.now)
        .outbound[0]
        .message
    )
    assert isinstance(reply, VoteResponse) and not reply.vote_granted
    assert reply.error_code == ErrorCode.FENCED_LEADER_EPOCH and reply.leader_epoch == 4


def test_we26_voter_says_no_after_voting_for_someone_else_in_that_epoch() -> None:
    q = Quorum(3)
    yes = (
        q[2]
        .client.handle_request(3, 1, VoteRequest("test", 2, 1, 3, 0, 0, False), q.now)
        .outbound[0]
        .message
    )
    no = (
        q[2]
        .client.handle_request(1, 2, VoteRequest("test", 2, 1, 1, 0, 0, False), q.now)
        .outbound[0]
        .message
    )
    assert isinstance(yes, VoteResponse) and yes.vote_granted
    assert isinstance(no, VoteResponse) and not no.vote_granted and no.error_code == ErrorCode.NONE


def test_we26_voter_says_no_when_the_candidate_log_is_behind() -> None:
    q = Quorum(3)
    q.elect(1)
    q.append(1, b"a", b"b")
    q.replicate()
    behind = VoteRequest("test", 2, 2, 3, 1, 2, False)  # offset 2 < our 3, same last epoch
    reply = q[2].client.handle_request(3, 1, behind, q.now).outbound[0].message
    assert isinstance(reply, VoteResponse) and not reply.vote_granted
    level = VoteRequest("test", 2, 3, 3, 1, 3, False)
    reply = q[2].client.handle_request(3, 2, level, q.now).outbound[0].message
    assert isinstance(reply, VoteResponse) and reply.vote_granted


def test_we26_returning_old_leader_with_smaller_epoch_follows() -> None:
    q = Quorum(3)
    q.elect(1)
    q.replicate()
    old = q.stop(1)
    q.run_for(6000)
    new = next(n for n in q.nodes.values() if isinstance(n.client.state, Leader))
    assert new.client.epoch > 1
    q.nodes[1] = q.stopped.pop(1)  # it was only unreachable, not restarted
    assert isinstance(old.client.state, Leader) and old.client.epoch == 1
    q.run_for(3000)
    state = old.client.state
    assert isinstance(state, Follower) and state.leader_id == new.node_id
    assert old.log.entries() == new.log.entries()
