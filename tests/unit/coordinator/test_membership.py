"""Heartbeats, session expiry, rebalance timeout, LeaveGroup and static membership."""

from __future__ import annotations

from moldau.coordinator.group import MemberIdentity, OffsetCommit
from moldau.protocol.errors import ErrorCode


def test_heartbeat_errors(h):
    (a,), generation = h.stable_group(1)
    assert h.heartbeat(a, generation) is ErrorCode.NONE
    assert h.heartbeat(a, generation - 1) is ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("ghost", generation) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat(a, generation, group="other") is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat(a, generation, group="") is ErrorCode.INVALID_GROUP_ID
    assert h.heartbeat(a, generation, instance="nobody") is ErrorCode.UNKNOWN_MEMBER_ID


def test_session_expiry_removes_member_and_rebalances(h):
    (a, b), generation = h.stable_group(2)
    for _ in range(2):
        h.advance(4_000)
        assert h.heartbeat(a, generation) is ErrorCode.NONE
    h.advance(1_999)
    assert b in h.coordinator.groups["g"].members
    h.advance(1)
    assert b not in h.coordinator.groups["g"].members  # b's 10s session ran out
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat(a, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    rejoin = h.completed[h.join(a)]
    assert (rejoin.generation_id, [m.member_id for m in rejoin.members]) == (generation + 1, [a])
    assert h.heartbeat(b, generation + 1) is ErrorCode.UNKNOWN_MEMBER_ID


def test_rebalance_timeout_removes_members_that_do_not_rejoin(h):
    (a, b), generation = h.stable_group(2)
    _, c = h.new_member()
    ra = h.join(a)
    for _ in range(5):  # b keeps heartbeating but never rejoins
        h.advance(5_000)
        assert h.heartbeat(b, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    assert ra not in h.completed
    h.advance(5_000)
    result = h.completed[ra]
    assert result.generation_id == generation + 1
    assert set(h.coordinator.groups["g"].members) == {a, h.completed[c].member_id}
    assert h.heartbeat(b, generation) is ErrorCode.UNKNOWN_MEMBER_ID


def test_members_awaiting_join_do_not_expire_on_session_timeout(h):
    (a, b), generation = h.stable_group(2, session=6_000)
    ra = h.join(a, protocols=(("range", b"changed"),))  # then a and b both go silent
    h.advance(6_000)
    assert h.completed[ra].generation_id == generation + 1  # b expired, a did not
    assert list(h.coordinator.groups["g"].members) == [a]
    assert h.state() == "CompletingRebalance"


def test_pending_member_expires_after_session_timeout(h):
    first = h.completed[h.join()]
    h.advance(10_000)
    late = h.completed[h.join(first.member_id)]
    assert late.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_pending_member_holds_back_early_join_completion(h):
    (a,), generation = h.stable_group(1)
    pending = h.completed[h.join()].member_id
    h.join(a)  # leader rejoin: every member has joined, but a member id is pending
    assert h.state() == "PreparingRebalance"
    joined = h.join(pending)
    assert h.completed[joined].generation_id == generation + 1


def test_new_member_join_times_out_after_five_minutes(h):
    (a,), generation = h.stable_group(1, rebalance=600_000)
    _, b = h.new_member(rebalance=600_000)
    for _ in range(60):
        h.advance(5_000)
        h.heartbeat(a, generation)
    assert h.completed[b].error is ErrorCode.UNKNOWN_MEMBER_ID


def test_leave_group_rebalances_and_last_leave_empties_group(h):
    (a, b), generation = h.stable_group(2)
    assert h.leave(MemberIdentity(a)) == [ErrorCode.NONE]
    assert h.state() == "PreparingRebalance"
    rb = h.join(b)
    assert h.completed[rb].generation_id == generation + 1
    before = len(h.records)
    assert h.leave(MemberIdentity(b), MemberIdentity("ghost")) == [
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_MEMBER_ID,
    ]
    assert h.state() == "Empty"
    assert h.coordinator.groups["g"].generation_id == generation + 2
    assert len(h.records) == before + 1  # the Empty generation is persisted


def test_leave_unknown_group_and_pending_member(h):
    assert h.leave(MemberIdentity("x"), group="nope") == [ErrorCode.UNKNOWN_MEMBER_ID]
    pending = h.completed[h.join()].member_id
    assert h.leave(MemberIdentity(pending)) == [ErrorCode.NONE]
    assert h.completed[h.join(pending)].error is ErrorCode.UNKNOWN_MEMBER_ID


def test_leave_completes_parked_join_of_others(h):
    (a, b), generation = h.stable_group(2)
    ra = h.join(a, protocols=(("range", b"changed"),))
    assert h.leave(MemberIdentity(b)) == [ErrorCode.NONE]
    assert h.completed[ra].generation_id == generation + 1


def static_group(h, *instances: str) -> tuple[list[str], int]:
    requests = [h.join(instance=i, client=f"client-{i}") for i in instances]
    h.advance(6_000)
    results = [h.completed[r] for r in requests]
    ids = [r.member_id for r in results]
    generation = results[0].generation_id
    for member_id, instance in zip(ids, instances, strict=True):
        assignments = {m: f"for-{i}".encode() for m, i in zip(ids, instances, strict=True)}
        is_leader = member_id == results[0].leader
        h.sync(member_id, generation, assignments if is_leader else None, instance=instance)
    assert h.state() == "Stable"
    return ids, generation


def test_static_member_needs_no_member_id_handshake(h):
    (a,), generation = static_group(h, "i-a")
    assert a.startswith("i-a-") and generation == 1


def test_static_member_restart_keeps_assignment_without_rebalance(h):
    (a, b), generation = static_group(h, "i-a", "i-b")
    leader = h.coordinator.groups["g"].leader_id
    records = len(h.records)
    restarted = h.completed[h.join(instance="i-a")]
    assert restarted.error is ErrorCode.NONE
    assert restarted.member_id not in (a, b) and restarted.member_id.startswith("i-a-")
    assert restarted.generation_id == generation
    assert restarted.members == ()
    assert restarted.leader == leader  # the old leader id: a restarted leader won't reassign
    assert h.state() == "Stable"
    assert len(h.records) == records + 1  # the new member id is persisted
    sync = h.completed[h.sync(restarted.member_id, generation, instance="i-a")]
    assert sync.assignment == b"for-i-a"
    assert h.heartbeat(restarted.member_id, generation, instance="i-a") is ErrorCode.NONE
    assert h.heartbeat(b, generation, instance="i-b") is ErrorCode.NONE


def test_duplicate_static_member_is_fenced(h):
    (a, b), generation = static_group(h, "i-a", "i-b")
    new_a = h.completed[h.join(instance="i-a")].member_id
    assert h.heartbeat(a, generation, instance="i-a") is ErrorCode.FENCED_INSTANCE_ID
    assert h.completed[h.sync(a, generation, instance="i-a")].error is ErrorCode.FENCED_INSTANCE_ID
    assert h.completed[h.join(a, instance="i-a")].error is ErrorCode.FENCED_INSTANCE_ID
    assert h.leave(MemberIdentity(a, "i-a")) == [ErrorCode.FENCED_INSTANCE_ID]
    committed = h.commit(a, generation, OffsetCommit("t1", 0, 5), instance="i-a")
    assert committed == {("t1", 0): ErrorCode.FENCED_INSTANCE_ID}
    assert h.heartbeat(new_a, generation, instance="i-a") is ErrorCode.NONE


def test_static_replacement_fences_the_parked_join_of_the_old_member(h):
    (a, b), generation = static_group(h, "i-a", "i-b")
    old_join = h.join(a, instance="i-a", protocols=(("range", b"new"),))
    assert h.state() == "PreparingRebalance"
    new_join = h.join(instance="i-a", protocols=(("range", b"new"),))
    assert h.completed[old_join].error is ErrorCode.FENCED_INSTANCE_ID
    h.join(b, instance="i-b")
    assert h.completed[new_join].generation_id == generation + 1


def test_static_member_not_rejoined_is_kept_through_rebalance(h):
    (a, b), generation = static_group(h, "i-a", "i-b")
    ra = h.join(a, instance="i-a", protocols=(("range", b"new"),))
    for _ in range(6):  # b keeps its session alive but never rejoins
        h.advance(5_000)
        h.heartbeat(b, generation, instance="i-b")
    result = h.completed[ra]
    assert (result.generation_id, result.leader) == (generation + 1, a)
    assert {m.member_id for m in result.members} == {a, b}  # unlike dynamic members
    assert h.heartbeat(b, generation, instance="i-b") is ErrorCode.ILLEGAL_GENERATION


def test_leave_by_instance_id_without_member_id(h):
    (a, b), generation = static_group(h, "i-a", "i-b")
    assert h.leave(MemberIdentity("", "i-b"), MemberIdentity("", "i-zz")) == [
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_MEMBER_ID,
    ]
    assert b not in h.coordinator.groups["g"].members
    assert h.state() == "PreparingRebalance"
