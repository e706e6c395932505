"""``group.max.size`` on classic groups: Kafka's acceptJoiningMember, step by step."""

from __future__ import annotations

from moldau.coordinator.group import GroupConfig, GroupCoordinator
from moldau.protocol.errors import ErrorCode

from .conftest import Harness


def test_full_stable_group_refuses_a_new_member_and_keeps_its_own(make_harness):
    h: Harness = make_harness(group_max_size=2)
    (a, b), generation = h.stable_group(2)

    refused = h.completed[h.join(client="third")]
    assert (refused.error, refused.member_id) == (ErrorCode.GROUP_MAX_SIZE_REACHED, "")
    assert h.state() == "Stable"  # no rebalance for a refused member
    assert set(h.coordinator.groups["g"].members) == {a, b}
    assert not h.coordinator.groups["g"].pending_members
    assert h.heartbeat(a, generation) is ErrorCode.NONE

    h.join(a)  # an existing member is always let back in
    assert h.state() == "PreparingRebalance"
    rejoined = h.join(b)
    assert h.completed[rejoined].error is ErrorCode.NONE
    assert h.completed[rejoined].generation_id == generation + 1


def test_group_with_room_accepts_up_to_the_limit(make_harness):
    h: Harness = make_harness(group_max_size=3)
    (a, b), generation = h.stable_group(2)
    first = h.completed[h.join(client="third")]
    assert first.error is ErrorCode.MEMBER_ID_REQUIRED
    third = h.join(first.member_id, client="third")
    h.join(a)
    h.join(b)
    assert h.completed[third].error is ErrorCode.NONE
    assert len(h.coordinator.groups["g"].members) == 3
    assert h.completed[h.join(client="fourth")].error is ErrorCode.GROUP_MAX_SIZE_REACHED


def test_rebalance_counts_rejoined_members_and_refuses_a_pending_one(make_harness):
    h: Harness = make_harness(group_max_size=2)
    (a, b), generation = h.stable_group(2)
    h.join(a)  # PreparingRebalance, one member rejoined: a newcomer may still get an id
    pending = h.completed[h.join(client="late")]
    assert pending.error is ErrorCode.MEMBER_ID_REQUIRED
    b_join = h.join(b)  # now two have rejoined: the group is full
    late = h.completed[h.join(pending.member_id, client="late")]
    assert late.error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert pending.member_id not in h.coordinator.groups["g"].pending_members
    assert h.completed[b_join].generation_id == generation + 1  # the join phase completed
    assert set(h.coordinator.groups["g"].members) == {a, b}


def test_loaded_group_over_a_lowered_limit_is_shrunk_by_a_rebalance(make_harness):
    h: Harness = make_harness(group_max_size=3)
    members, generation = h.stable_group(3)

    loaded = GroupCoordinator(GroupConfig(group_max_size=2), now_ms=h.now)
    loaded.load([(r.key, r.value) for r in h.records], h.now)
    h.coordinator = loaded
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat(members[0], generation) is ErrorCode.REBALANCE_IN_PROGRESS

    kept = [h.join(m) for m in members[:2]]
    dropped = h.completed[h.join(members[2])]  # the last to rejoin is left out
    assert dropped.error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert [h.completed[k].generation_id for k in kept] == [generation + 1] * 2
    assert set(loaded.groups["g"].members) == set(members[:2])
    assert h.heartbeat(members[2], generation + 1) is ErrorCode.UNKNOWN_MEMBER_ID
