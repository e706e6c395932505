"""Fetch-based replication step by step: high watermark, divergence, long polls, DescribeQuorum."""

from __future__ import annotations

import pytest

from moldau.protocol.errors import ErrorCode
from moldau.raft import LeaderAndEpoch, NotLeaderError, OffsetAndEpoch, RaftInvariantError
from moldau.raft.memory_log import MemoryRaftLog
from moldau.raft.messages import BeginQuorumEpochRequest, FetchRequest, FetchResponse, VoteRequest
from moldau.raft.state import Follower, Leader
from tests.unit.raft.quorum import Message, Quorum


def fetch(
    epoch: int, offset: int, last_epoch: int, replica: int = 2, wait: int = 0
) -> FetchRequest:
    return FetchRequest("test", replica, wait, 1 << 20, epoch, offset, last_epoch, 0)


def test_high_watermark_moves_only_when_a_majority_has_fetched_past_an_offset() -> None:
    q = Quorum(5)
    leader = q.elect(1)
    q.drop_all()
    q.append(1, b"a", b"b")  # offsets 1, 2 after the LeaderChange at 0
    assert leader.client.high_watermark is None
    q[1].client.handle_request(2, 1, fetch(1, 3, 1, replica=2), q.now)
    assert leader.client.high_watermark is None, "leader + 1 of 5 is no majority"
    q[1].client.handle_request(3, 1, fetch(1, 2, 1, replica=3), q.now)
    assert leader.client.high_watermark == 2, "third largest of (3, 3, 2) is 2"
    q[1].client.handle_request(4, 1, fetch(1, 3, 1, replica=4), q.now)
    assert leader.client.high_watermark == 3


def test_observers_do_not_count_towards_the_high_watermark() -> None:
    q = Quorum(3, observers=2)
    leader = q.elect(1)
    q.drop_all()
    q.append(1, b"a")
    for observer in (4, 5):
        q[1].client.handle_request(observer, 1, fetch(1, 2, 1, replica=observer), q.now)
    assert leader.client.high_watermark is None
    q[1].client.handle_request(2, 1, fetch(1, 2, 1, replica=2), q.now)
    assert leader.client.high_watermark == 2


def test_old_epoch_records_commit_only_with_a_record_of_the_new_epoch() -> None:
    q = Quorum(3)
    q.elect(1)
    q.drop_all()
    q.append(1, b"old")  # offset 1, epoch 1; only the leader has it
    # Everyone restarts and node 1 (longest log) wins a later epoch, LeaderChange at 2.
    restarted = q.restart(1)
    q.restart(2)
    q.restart(3)
    q.drop_all()
    q.expire(1)
    q.deliver_all(lambda m: not isinstance(m.out.message, FetchRequest))
    state = restarted.client.state
    assert isinstance(state, Leader) and state.epoch >= 2 and state.epoch_start_offset == 2
    q.drop_all()
    # A majority holding the epoch-1 record is not enough (Raft's figure 8): the record
    # commits only with the new epoch's LeaderChange after it.
    q[1].client.handle_request(2, 9, fetch(state.epoch, 2, 1, replica=2), q.now)
    assert restarted.client.high_watermark is None
    q[1].client.handle_request(2, 10, fetch(state.epoch, 3, state.epoch, replica=2), q.now)
    assert restarted.client.high_watermark == 3


def test_followers_learn_the_high_watermark_from_fetch_responses() -> None:
    q = Quorum(3)
    q.elect(1)
    q.append(1, b"a", b"b")
    q.replicate()
    for node in q.nodes.values():
        assert node.client.high_watermark == 3
        assert node.data_values() == [b"a", b"b"]


def next_fetch(q: Quorum, node_id: int) -> Message:
    """Release the parked fetches and catch `node_id`'s next Fetch before the leader sees it."""
    q.advance(q.now + 500)
    q.deliver_all(lambda m: m.destination == node_id)
    return q.take(lambda m: m.source == node_id and isinstance(m.out.message, FetchRequest))[0]


def test_follower_high_watermark_never_passes_its_own_log_end() -> None:
    q = Quorum(3)
    q.elect(1)
    q.replicate()
    request = next_fetch(q, 2)
    follower = q[2]
    response = FetchResponse(0, 1, 1, 50, 0, ())
    q.record(
        follower, follower.client.handle_response(1, request.out.correlation_id, response, q.now)
    )
    assert follower.client.high_watermark == follower.log.log_end_offset == 1


def test_leader_parks_an_empty_fetch_until_records_arrive() -> None:
    q = Quorum(3)
    q.elect(1)
    q.replicate()
    assert not q.network, "followers' fetches wait at the leader"
    q.append(1, b"x")
    answered = q.pending(FetchResponse, source=1)
    assert sorted(m.destination for m in answered) == [2, 3]
    response = answered[0].out.message
    assert isinstance(response, FetchResponse) and response.records


def test_followers_learn_a_commit_without_waiting_for_their_long_poll() -> None:
    """The fetch that moves the high watermark, and every other follower's next fetch, is
    answered with the new high watermark at once instead of parking for fetch.max.wait."""
    q = Quorum(3)
    q.elect(1)
    q.replicate()
    q.append(1, b"x")
    q.deliver_all()  # records out, fetches past them back, new HW out: no time passes
    for node in q.nodes.values():
        assert node.client.high_watermark == 2, node.node_id
    assert not q.network, "once told, the followers' fetches park again"


def test_parked_fetch_expires_after_max_wait() -> None:
    q = Quorum(3)
    q.elect(1)
    q.replicate()
    q.advance(q.now + 499)
    assert not q.pending(FetchResponse)
    q.advance(q.now + 2)
    assert len(q.pending(FetchResponse, source=1)) == 2


def test_diverging_epoch_makes_the_follower_truncate() -> None:
    q = Quorum(3)
    q.elect(1)
    q.replicate()
    # Node 1 writes records nobody else gets, then loses leadership to node 2.
    q.drop_all()
    q.append(1, b"lost-1", b"lost-2")
    assert q[1].log.log_end_offset == 3
    q.restart(1)
    q.drop_all()
    q.expire(2)
    q.deliver_all(
        lambda m: 1 not in (m.source, m.destination) and not isinstance(m.out.message, FetchRequest)
    )
    new = next(n for n in (q[2], q[3]) if isinstance(n.client.state, Leader))
    q.append(new.node_id, b"kept")
    epoch = new.client.epoch
    # Node 1 hears of the new leader and fetches with (offset 3, last epoch 1).
    q.drop_all()
    q.record(
        q[1],
        q[1].client.handle_request(
            new.node_id, 1, BeginQuorumEpochRequest("test", 1, new.node_id, epoch), q.now
        ),
    )
    request = q.pending(FetchRequest, source=1)[0].out.message
    assert isinstance(request, FetchRequest) and (
        request.fetch_offset,
        request.last_fetched_epoch,
    ) == (3, 1)
    q.deliver_all(lambda m: m.source == 1 or m.destination == 1)
    q.replicate()
    values = [e.value for e in q[1].log.entries()]
    assert b"lost-1" not in values and b"kept" in values
    assert q[1].log.entries() == new.log.entries()


def test_truncation_below_the_high_watermark_is_refused() -> None:
    q = Quorum(3)
    q.elect(1)
    q.append(1, b"a")
    q.replicate()
    request = next_fetch(q, 2)
    assert q[2].client.high_watermark == 2
    bad = FetchResponse(0, 1, 1, 2, 0, None, diverging_epoch=OffsetAndEpoch(0, 1))
    with pytest.raises(RaftInvariantError):
        q[2].client.handle_response(1, request.out.correlation_id, bad, q.now)


def test_fetch_with_a_stale_epoch_is_fenced_and_teaches_the_leader() -> None:
    q = Quorum(3, observers=1)
    q.elect(1)
    q.drop_all()
    reply = q[1].client.handle_request(4, 1, fetch(0, 0, 0, replica=4), q.now).outbound[0].message
    assert isinstance(reply, FetchResponse) and reply.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (reply.leader_id, reply.leader_epoch) == (1, 1)


def test_fetch_to_a_follower_points_at_the_leader() -> None:
    q = Quorum(3)
    q.elect(1)
    q.drop_all()
    reply = q[2].client.handle_request(4, 1, fetch(1, 0, 0, replica=4), q.now).outbound[0].message
    assert isinstance(reply, FetchResponse) and reply.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert reply.leader_id == 1


def test_observer_finds_the_leader_and_replicates() -> None:
    q = Quorum(3, observers=1)
    q.elect(1)
    q.append(1, b"a")
    q.run_for(1500)
    observer = q[4]
    assert isinstance(observer.client.state, Follower) and observer.client.leader_id == 1
    assert observer.data_values() == [b"a"]
    assert not q.pending(VoteRequest, source=4)


def test_append_needs_the_leader_of_that_epoch() -> None:
    q = Quorum(3)
    q.elect(1)
    with pytest.raises(NotLeaderError):
        q[2].client.append(1, [b"x"], q.now)
    with pytest.raises(NotLeaderError):
        q[1].client.append(0, [b"x"], q.now)


def test_leader_learns_it_leads_only_after_committing_in_its_epoch() -> None:
    q = Quorum(3)
    leader = q.elect(1)
    assert LeaderAndEpoch(1, 1) not in leader.leader_changes
    q.replicate()
    assert leader.leader_changes[-1] == LeaderAndEpoch(1, 1)
    assert q[2].leader_changes[-1] == LeaderAndEpoch(1, 1)


def test_describe_quorum_reports_voters_and_observers() -> None:
    q = Quorum(3, observers=1)
    q.elect(1)
    q.append(1, b"a")
    q.run_for(1500)
    info = q[1].client.describe_quorum(q.now)
    assert (info.leader_id, info.leader_epoch, info.high_watermark) == (1, 1, 2)
    assert [r.replica_id for r in info.current_voters] == [1, 2, 3]
    assert all(r.log_end_offset == 2 for r in info.current_voters)
    assert all(0 <= r.last_fetch_timestamp <= q.now for r in info.current_voters)
    assert all(r.last_caught_up_timestamp > 0 for r in info.current_voters)
    assert [(r.replica_id, r.log_end_offset) for r in info.observers] == [(4, 2)]
    with pytest.raises(NotLeaderError):
        q[2].client.describe_quorum(q.now)


def test_restarted_follower_rejoins_and_catches_up() -> None:
    q = Quorum(3)
    q.elect(1)
    q.append(1, b"a")
    q.replicate()
    q.restart(3)
    q.append(1, b"b")
    q.run_for(3000)
    assert q[3].data_values() == [b"a", b"b"]
    assert isinstance(q[1].client.state, Leader) and q[1].client.epoch == 1


def test_memory_log_follower_append_must_continue_the_log() -> None:
    log = MemoryRaftLog()
    other = MemoryRaftLog()
    other.append_as_leader([b"a", b"b"], 1)
    records = other.read(1, 1 << 20)
    with pytest.raises(ValueError):
        log.append_as_follower(records)


def test_leader_that_steps_down_answers_its_parked_fetches() -> None:
    q = Quorum(3)
    q.elect(1)
    q.replicate()
    assert not q.network
    q.record(q[1], q[1].client.resign(1, q.now))
    answers = [m.out.message for m in q.pending(FetchResponse, source=1)]
    assert len(answers) == 2
    assert all(
        isinstance(a, FetchResponse) and a.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        for a in answers
    )


def test_failed_request_is_retried_after_the_retry_backoff() -> None:
    q = Quorum(3)
    q.elect(1)
    request = next_fetch(q, 2)
    effects = q.record(q[2], q[2].client.request_failed(1, request.out.correlation_id, q.now))
    assert not effects.outbound
    assert effects.deadline_ms == q.now + 20  # controller.quorum.retry.backoff.ms
    q.advance(q.now + 20)
    assert q.pending(FetchRequest, source=2)
