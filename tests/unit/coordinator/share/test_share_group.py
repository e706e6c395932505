"""Share-group membership: epochs, fencing, session timeout and the simple assignor."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from moldau.coordinator.share.group import (
    Heartbeat,
    ShareGroupCoordinator,
    ShareMember,
    assign_simple,
)
from moldau.ids import SeededIds
from moldau.protocol.errors import ErrorCode

SESSION = 1_000


def counts(topics: Iterable[str]) -> Mapping[str, tuple[bytes, int]]:
    return {t: (t.encode(), {"t": 2, "u": 1}[t]) for t in topics if t in ("t", "u")}


def test_join_assigns_every_member_work_even_with_more_members_than_partitions() -> None:
    c = ShareGroupCoordinator(SeededIds(1))
    results = [c.heartbeat(Heartbeat("g", "", 0, ("t",)), 0, SESSION, counts) for _ in range(3)]
    assert all(r.error == ErrorCode.NONE and r.member_id for r in results)
    first = results[0]
    assert first.assignment == {"t": (0, 1)} and first.member_epoch == 1
    # the first member learns its new, smaller assignment at the new epoch
    r = c.heartbeat(Heartbeat("g", first.member_id, 1), 10, SESSION, counts)
    assert r.member_epoch == 3 and r.assignment is not None and len(r.assignment["t"]) == 1
    # then nothing changes
    again = c.heartbeat(Heartbeat("g", first.member_id, 3), 20, SESSION, counts)
    assert again.error == ErrorCode.NONE and again.assignment is None
    group = c.groups["g"]
    parts = [p for m in group.members.values() for p in m.assignment.get("t", ())]
    assert sorted(set(parts)) == [0, 1] and len(parts) == 3  # one partition shared


def test_wrong_epoch_is_fenced_and_unknown_members_are_rejected() -> None:
    c = ShareGroupCoordinator(SeededIds(1))
    r = c.heartbeat(Heartbeat("g", "m1", 0, ("t",)), 0, SESSION, counts)
    assert r.member_id == "m1"  # a client-chosen member id is kept (KIP-1082)
    assert c.heartbeat(Heartbeat("g", "m1", 7), 0, SESSION, counts).error == (
        ErrorCode.FENCED_MEMBER_EPOCH
    )
    assert c.heartbeat(Heartbeat("g", "zz", 1), 0, SESSION, counts).error == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
    # rejoining with epoch 0 gives the whole assignment again
    assert c.heartbeat(Heartbeat("g", "m1", 0), 0, SESSION, counts).assignment == {"t": (0, 1)}
    assert c.heartbeat(Heartbeat("g", "", 0), 0, SESSION, counts).error == ErrorCode.INVALID_REQUEST


def test_leave_and_session_timeout_remove_members() -> None:
    c = ShareGroupCoordinator(SeededIds(1))
    a = c.heartbeat(Heartbeat("g", "a", 0, ("t",)), 0, SESSION, counts)
    c.heartbeat(Heartbeat("g", "b", 0, ("t",)), 500, SESSION, counts)
    assert c.expire(999) == []
    assert c.expire(1_000) == [("g", "a")]
    assert c.heartbeat(Heartbeat("g", "a", a.member_epoch), 1_000, SESSION, counts).error == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
    assert c.heartbeat(Heartbeat("g", "b", -1), 1_100, SESSION, counts).member_epoch == -1
    assert c.groups["g"].members == {}


def test_simple_assignor_spreads_partitions_and_shares_them_when_short() -> None:
    def member(name: str, *topics: str) -> ShareMember:
        return ShareMember(name, 0, "", "", None, topics, 0)

    members = [member("a", "t", "u"), member("b", "t"), member("c", "u")]
    target = assign_simple(members, {"t": 5, "u": 1})
    assert target == {"a": {"t": (0, 2, 4), "u": (0,)}, "b": {"t": (1, 3)}, "c": {"u": (0,)}}


def test_a_topic_created_again_gives_members_a_new_assignment() -> None:
    c = ShareGroupCoordinator(SeededIds(1))
    r = c.heartbeat(Heartbeat("g", "m", 0, ("t",)), 0, SESSION, counts)
    same = c.heartbeat(Heartbeat("g", "m", r.member_epoch), 0, SESSION, counts)
    assert same.assignment is None
    recreated = c.heartbeat(
        Heartbeat("g", "m", r.member_epoch), 0, SESSION, lambda topics: {"t": (b"new", 2)}
    )
    assert recreated.member_epoch == r.member_epoch + 1 and recreated.assignment == {"t": (0, 1)}
