"""Join and sync phases of the classic group protocol, step by step on a fake clock."""

from __future__ import annotations

from moldau.coordinator.group import JoinGroupMember
from moldau.protocol.errors import ErrorCode

from .conftest import SUB, subscription


def test_single_member_join_waits_initial_delay_then_syncs(h):
    first = h.completed[h.join(client="app")]
    assert first.error is ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("app-") and first.generation_id == -1
    member_id = first.member_id

    rejoin = h.join(member_id, client="app")
    assert rejoin not in h.completed
    assert h.state() == "PreparingRebalance"
    assert h.coordinator.next_timer_ms() == h.now + 3_000

    h.advance(2_999)
    assert rejoin not in h.completed
    h.advance(1)
    joined = h.completed[rejoin]
    assert joined.error is ErrorCode.NONE
    assert (joined.generation_id, joined.leader, joined.protocol_name) == (1, member_id, "range")
    assert joined.protocol_type == "consumer"
    assert joined.members == (JoinGroupMember(member_id, None, SUB),)
    assert h.state() == "CompletingRebalance"

    synced = h.completed[h.sync(member_id, 1, {member_id: b"assignment"})]
    assert (synced.error, synced.assignment, synced.protocol_name) == (
        ErrorCode.NONE,
        b"assignment",
        "range",
    )
    assert h.state() == "Stable"
    assert len(h.records) == 1 and h.records[0].value is not None
    assert h.heartbeat(member_id, 1) is ErrorCode.NONE


def test_join_v3_gets_member_id_without_handshake(h):
    request = h.join(version=3)
    assert request not in h.completed
    h.advance(3_000)
    assert h.completed[request].error is ErrorCode.NONE
    assert h.completed[request].member_id.startswith("client-")


def test_initial_delay_is_extended_by_new_members_up_to_rebalance_timeout(h):
    _, a = h.new_member(rebalance=10_000)
    for _ in range(4):  # a new member every 2s keeps extending the delay
        h.advance(2_000)
        h.new_member(rebalance=10_000)
    h.advance(1_999)
    assert a not in h.completed
    h.advance(1)  # 10s after the first join: the rebalance timeout caps the delay
    assert h.completed[a].error is ErrorCode.NONE
    assert len(h.completed[a].members) in (0, 5)
    assert h.completed[a].generation_id == 1


def test_initial_delay_extension_stops_once_no_one_new_joins(h):
    _, a = h.new_member()
    h.advance(1_000)
    h.new_member()
    h.advance(2_000)  # first delay expires; a member was added, so wait another 3s
    assert a not in h.completed
    h.advance(3_000)
    assert h.completed[a].generation_id == 1


def test_three_members_leader_gets_metadata_and_distributes_assignments(h):
    ids, requests = zip(*(h.new_member(client=f"c{i}") for i in range(3)), strict=True)
    h.advance(3_000)  # the later joins extended the initial delay once
    assert not any(r in h.completed for r in requests)
    h.advance(3_000)
    results = [h.completed[r] for r in requests]
    leader = results[0].leader
    assert {r.leader for r in results} == {leader} and {r.generation_id for r in results} == {1}
    for member_id, result in zip(ids, results, strict=True):
        if member_id == leader:
            assert {m.member_id for m in result.members} == set(ids)
        else:
            assert result.members == ()

    followers = [m for m in ids if m != leader]
    parked = [h.sync(m, 1) for m in followers]
    assert not any(p in h.completed for p in parked)
    assert h.heartbeat(followers[0], 1) is ErrorCode.NONE  # allowed while CompletingRebalance
    leader_sync = h.sync(leader, 1, {m: f"for-{m}".encode() for m in ids})
    for member_id, request in zip([*followers, leader], [*parked, leader_sync], strict=True):
        assert h.completed[request].assignment == f"for-{member_id}".encode()
    assert h.state() == "Stable"


def test_leader_fills_missing_assignments_with_empty(h):
    (a, b), generation = h.stable_group(2)
    leader = h.coordinator.groups["g"].leader_id
    follower = b if leader == a else a
    h.join(leader)  # leader rejoin forces a rebalance
    h.join(follower)
    h.sync(follower, generation + 1)
    parked = h.sync(follower, generation + 1)  # a retried sync supersedes the first
    h.sync(leader, generation + 1, {leader: b"x"})
    assert h.completed[parked].assignment == b""


def test_protocol_selected_by_votes_among_commonly_supported(h):
    both = (("roundrobin", SUB), ("range", SUB))
    prefs = [both, (("range", SUB), ("roundrobin", SUB)), both]
    requests = [h.new_member(protocols=p)[1] for p in prefs]
    h.advance(6_000)
    assert {h.completed[r].protocol_name for r in requests} == {"roundrobin"}


def test_inconsistent_protocols_rejected(h):
    h.new_member(protocols=(("range", SUB),))
    other = h.join(protocols=(("sticky", SUB),))
    assert h.completed[other].error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    wrong_type = h.join(protocol_type="connect")
    assert h.completed[wrong_type].error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    no_protocols = h.join(group="g2", protocols=())
    assert h.completed[no_protocols].error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_join_validation_errors(h):
    assert h.completed[h.join(group="")].error is ErrorCode.INVALID_GROUP_ID
    assert h.completed[h.join(session=5_999)].error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.completed[h.join(session=1_800_001)].error is ErrorCode.INVALID_SESSION_TIMEOUT
    unknown = h.completed[h.join("ghost", group="nope")]
    assert (unknown.error, unknown.member_id) == (ErrorCode.UNKNOWN_MEMBER_ID, "ghost")
    h.stable_group(1)
    assert h.completed[h.join("ghost")].error is ErrorCode.UNKNOWN_MEMBER_ID


def test_stable_follower_rejoin_with_same_metadata_returns_current_generation(h):
    (a, b), generation = h.stable_group(2)
    leader = h.coordinator.groups["g"].leader_id
    follower = b if leader == a else a
    result = h.completed[h.join(follower)]
    assert (result.error, result.generation_id, result.leader, result.members) == (
        ErrorCode.NONE,
        generation,
        leader,
        (),
    )
    assert h.state() == "Stable"


def test_stable_leader_rejoin_or_changed_metadata_rebalances(h):
    (a, b), generation = h.stable_group(2)
    leader = h.coordinator.groups["g"].leader_id
    follower = b if leader == a else a
    h.join(follower, protocols=(("range", subscription("t1", "t2")),))
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat(leader, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    rejoin = h.join(leader)
    assert h.completed[rejoin].generation_id == generation + 1  # everyone joined: no wait
    assert len(h.completed[rejoin].members) == 2


def test_completing_rebalance_rejoin_repeats_join_response(h):
    (a,), generation = h.stable_group(1)
    h.join(a)
    result = h.completed[h.join(a)]
    assert (result.generation_id, result.leader, len(result.members)) == (generation + 1, a, 1)
    assert h.state() == "CompletingRebalance"


def test_new_member_joining_stable_group_triggers_rebalance(h):
    (a, b), generation = h.stable_group(2)
    _, c = h.new_member()
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat(a, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    assert h.heartbeat(b, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    ra, rb = h.join(a), h.join(b)
    assert {h.completed[r].generation_id for r in (ra, rb, c)} == {generation + 1}


def test_sync_errors(h):
    (a, b), generation = h.stable_group(2)
    assert h.completed[h.sync(a, generation + 1)].error is ErrorCode.ILLEGAL_GENERATION
    assert h.completed[h.sync("ghost", generation)].error is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.completed[h.sync(a, generation, group="other")].error is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.completed[h.sync(a, generation, group="")].error is ErrorCode.INVALID_GROUP_ID
    wrong = h.sync(a, generation, protocol_name="roundrobin")
    assert h.completed[wrong].error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    h.new_member()
    assert h.completed[h.sync(a, generation)].error is ErrorCode.REBALANCE_IN_PROGRESS


def test_sync_in_stable_returns_assignment(h):
    (a, b), generation = h.stable_group(2)
    assert h.completed[h.sync(b, generation)].assignment == b.encode()


def test_rejoin_during_completing_rebalance_fails_parked_syncs(h):
    (a, b), generation = h.stable_group(2)
    leader = h.coordinator.groups["g"].leader_id
    follower = b if leader == a else a
    h.join(leader)
    h.join(follower)
    parked = h.sync(follower, generation + 1)
    h.join(leader, protocols=(("range", subscription("t9")),))  # changed metadata
    assert h.completed[parked].error is ErrorCode.REBALANCE_IN_PROGRESS
    assert h.state() == "PreparingRebalance"


def test_member_that_never_syncs_is_removed_after_rebalance_timeout(h):
    (a, b), generation = h.stable_group(2)
    leader = h.coordinator.groups["g"].leader_id
    follower = b if leader == a else a
    h.join(leader)
    h.join(follower)
    parked = h.sync(follower, generation + 1)
    for _ in range(5):  # the follower heartbeats but the leader neither syncs nor beats
        h.advance(5_000)
        h.heartbeat(follower, generation + 1)
    h.advance(5_000)
    assert h.completed[parked].error is ErrorCode.REBALANCE_IN_PROGRESS
    assert leader not in h.coordinator.groups["g"].members
    assert h.heartbeat(leader, generation + 1) is ErrorCode.UNKNOWN_MEMBER_ID


def test_cooperative_back_to_back_rebalances(h):
    """KIP-429 clients rejoin right after a sync that revoked partitions: plain generations."""
    ids, generation = h.stable_group(3)
    for round_ in (1, 2):
        joins = [h.join(m, protocols=(("cooperative-sticky", SUB), ("range", SUB))) for m in ids]
        results = [h.completed[j] for j in joins]
        assert {r.generation_id for r in results} == {generation + round_}
        assert {r.protocol_name for r in results} == {"cooperative-sticky"}
        leader = results[0].leader
        syncs = [
            h.sync(m, generation + round_, {x: b"a" for x in ids} if m == leader else None)
            for m in ids
        ]
        assert all(h.completed[s].assignment == b"a" for s in syncs)
        assert h.state() == "Stable"
