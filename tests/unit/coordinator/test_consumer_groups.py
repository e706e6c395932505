"""KIP-848 consumer groups on the pure coordinator: epochs, reconciliation, fencing,
static membership, timeouts, regex subscriptions, assignors and the coordinator records."""

from __future__ import annotations

import pytest

from moldau.coordinator.group import GroupConfig, GroupCoordinator
from moldau.coordinator.group.assignors import AssignmentMember, range_assign, uniform_assign
from moldau.coordinator.group.consumer_group import TopicMetadata
from moldau.coordinator.group.consumer_groups import ConsumerHeartbeat, HeartbeatResult
from moldau.coordinator.group.consumer_protocol import assignment_partitions, subscription_topics
from moldau.coordinator.group.results import OffsetCommit
from moldau.protocol.errors import ErrorCode

FOO = b"\x01" * 16
BAR = b"\x02" * 16
TOPICS = {"foo": TopicMetadata(FOO, "foo", 6), "bar": TopicMetadata(BAR, "bar", 3)}
CONFIG = GroupConfig(consumer_session_timeout_ms=45_000, consumer_heartbeat_interval_ms=5_000)


def hb(
    c: GroupCoordinator,
    member_id: str,
    epoch: int,
    now: int = 0,
    topics: dict[str, TopicMetadata] | None = None,
    **kw: object,
) -> HeartbeatResult:
    if epoch == 0:
        kw.setdefault("rebalance_timeout_ms", 30_000)
        if "subscribed_topic_regex" not in kw:
            kw.setdefault("subscribed_topic_names", ["foo"])
    result, _ = c.consumer_group_heartbeat(
        now, ConsumerHeartbeat("g", member_id, epoch, **kw), TOPICS if topics is None else topics
    )
    return result


def parts(result: HeartbeatResult, topic_id: bytes = FOO) -> set[int]:
    assert result.assignment is not None
    return set(result.assignment.get(topic_id, ()))


def test_lone_member_gets_everything_at_epoch_1() -> None:
    c = GroupCoordinator(CONFIG)
    r = hb(c, "a", 0)
    assert r.error is ErrorCode.NONE and r.member_epoch == 1
    assert parts(r) == set(range(6)) and r.heartbeat_interval_ms == 5_000
    assert c.consumer_groups["g"].state.value == "Stable"
    steady = hb(c, "a", 1)
    assert steady.assignment is None and steady.member_epoch == 1


def test_second_member_takes_only_released_partitions() -> None:
    c = GroupCoordinator(CONFIG)
    hb(c, "a", 0)
    b = hb(c, "b", 0)
    assert b.member_epoch == 2 and parts(b) == set()  # a still owns them all
    a = hb(c, "a", 1)
    kept = parts(a)
    assert len(kept) == 3 and a.member_epoch == 1  # revoking: epoch stays
    assert c.consumer_groups["g"].state.value == "Reconciling"
    a = hb(c, "a", 1, owned={FOO: frozenset(kept)})
    assert a.member_epoch == 2
    b = hb(c, "b", 2)
    assert parts(b) == set(range(6)) - kept
    assert c.consumer_groups["g"].state.value == "Stable"


def test_fencing_and_unknown_members() -> None:
    c = GroupCoordinator(CONFIG)
    hb(c, "a", 0)
    assert hb(c, "a", 5).error is ErrorCode.FENCED_MEMBER_EPOCH
    assert hb(c, "zz", 1).error is ErrorCode.UNKNOWN_MEMBER_ID
    hb(c, "b", 0)
    kept = parts(hb(c, "a", 1, owned={FOO: frozenset(range(6))}))  # revoke half
    a = hb(c, "a", 1, owned={FOO: frozenset(kept)})
    assert a.member_epoch == 2
    assert hb(c, "a", 0, subscribed_topic_names=[]).error is ErrorCode.NONE
    assert hb(c, "", 1).error is ErrorCode.INVALID_REQUEST


def test_lost_response_is_tolerated_when_owning_nothing_extra() -> None:
    c = GroupCoordinator(CONFIG)
    hb(c, "a", 0)
    hb(c, "b", 0)
    kept = frozenset(parts(hb(c, "a", 1)))
    a = hb(c, "a", 1, owned={FOO: kept})
    assert a.member_epoch == 2
    # The member never saw epoch 2 and heartbeats with 1, owning what it should.
    assert hb(c, "a", 1, owned={FOO: kept}).error is ErrorCode.NONE
    assert hb(c, "a", 1, owned={FOO: frozenset(range(6))}).error is ErrorCode.FENCED_MEMBER_EPOCH


def test_session_timeout_fences_and_others_take_over() -> None:
    c = GroupCoordinator(CONFIG)
    hb(c, "a", 0)
    hb(c, "b", 0, now=0)
    kept = frozenset(parts(hb(c, "a", 1, now=1)))
    hb(c, "a", 1, now=2, owned={FOO: kept})
    for now in range(5_000, 60_000, 5_000):
        hb(c, "b", 2, now=now)
    c.tick(c.next_timer_ms())
    assert "a" not in c.consumer_groups["g"].members
    b = hb(c, "b", 2, now=60_000)
    assert b.member_epoch == 3 and parts(b) == set(range(6))


def test_the_groups_own_session_timeout_and_heartbeat_interval_win() -> None:
    """consumer.session.timeout.ms / consumer.heartbeat.interval.ms set on the GROUP
    resource override the broker's group.consumer.* defaults."""
    c = GroupCoordinator(CONFIG)
    own = {"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "7000"}
    result, _ = c.consumer_group_heartbeat(
        0,
        ConsumerHeartbeat("g", "a", 0, rebalance_timeout_ms=1, subscribed_topic_names=["foo"]),
        TOPICS,
        own,
    )
    assert result.heartbeat_interval_ms == 7_000
    c.tick(45_001)  # past the broker default, within the group's own timeout
    assert "a" in c.consumer_groups["g"].members
    c.tick(50_001)
    assert "a" not in c.consumer_groups["g"].members


class CountingTopics(dict[str, TopicMetadata]):
    """A topics view that counts full scans (what a regex evaluation does)."""

    scans = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        CountingTopics.scans += 1
        return super().__iter__()


def test_a_regex_is_evaluated_once_per_view_of_the_topics() -> None:
    c = GroupCoordinator(CONFIG)
    view = CountingTopics(TOPICS)
    CountingTopics.scans = 0
    r = hb(c, "a", 0, topics=view, subscribed_topic_regex="f.*")
    for now in (1, 2, 3):
        hb(c, "a", r.member_epoch, now=now, topics=view)
    hb(c, "b", 0, topics=view, subscribed_topic_regex="f.*")
    assert CountingTopics.scans == 1
    grown = CountingTopics({**TOPICS, "fizz": TopicMetadata(b"\x03" * 16, "fizz", 2)})
    hb(c, "a", r.member_epoch, now=4, topics=grown)
    assert CountingTopics.scans == 2
    assert "fizz" in c.consumer_groups["g"].subscription_metadata


def test_static_member_leave_and_rejoin_keeps_assignment() -> None:
    c = GroupCoordinator(CONFIG)
    hb(c, "a", 0, instance_id="i1")
    hb(c, "b", 0, instance_id="i2")
    held = parts(hb(c, "a", 1, instance_id="i1", owned={FOO: frozenset(range(6))}))
    assert hb(c, "a", 1, instance_id="i1", owned={FOO: frozenset(held)}).member_epoch == 2
    assert hb(c, "a2", 0, instance_id="i1").error is ErrorCode.UNRELEASED_INSTANCE_ID
    left = hb(c, "a", -2, instance_id="i1")
    assert left.member_epoch == -2
    back = hb(c, "a2", 0, instance_id="i1")
    assert back.error is ErrorCode.NONE and back.member_epoch == 2 and parts(back) == held
    assert hb(c, "a", 2, instance_id="i1").error is ErrorCode.UNKNOWN_MEMBER_ID


def test_regex_and_topic_growth_bump_the_group_epoch() -> None:
    c = GroupCoordinator(CONFIG)
    assert hb(c, "a", 0, subscribed_topic_regex="(").error is ErrorCode.INVALID_REGULAR_EXPRESSION
    r = hb(c, "a", 0, subscribed_topic_regex="fo.*")
    assert r.member_epoch == 1 and set(r.assignment or {}) == {FOO}
    grown = dict(
        TOPICS, foo=TopicMetadata(FOO, "foo", 8), fox=TopicMetadata(b"\x03" * 16, "fox", 1)
    )
    r = hb(c, "a", 1, topics=grown)
    assert r.member_epoch == 2 and parts(r) == set(range(8))
    assert parts(r, b"\x03" * 16) == {0}


def test_unsupported_assignor_and_max_size() -> None:
    c = GroupCoordinator(GroupConfig(consumer_max_size=1))
    assert hb(c, "a", 0, server_assignor="sticky").error is ErrorCode.UNSUPPORTED_ASSIGNOR
    assert hb(c, "a", 0, server_assignor="range").error is ErrorCode.NONE
    assert hb(c, "b", 0).error is ErrorCode.GROUP_MAX_SIZE_REACHED


def test_offset_commit_checks_member_epoch() -> None:
    c = GroupCoordinator(CONFIG)
    hb(c, "a", 0)

    def commit(member: str, epoch: int) -> ErrorCode:
        results, _ = c.offsets.commit_offsets(
            0,
            group_id="g",
            member_id=member,
            generation_id=epoch,
            group_instance_id=None,
            offsets=[OffsetCommit("foo", 0, 10)],
        )
        return results[("foo", 0)]

    assert commit("a", 0) is ErrorCode.STALE_MEMBER_EPOCH
    assert commit("x", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert commit("a", 1) is ErrorCode.NONE
    assert c.offsets.fetch_offsets("g", [("foo", 0)])[0].offset == 10
    assert [(o.group_id, o.group_type, o.state) for o in c.list_groups()] == [
        ("g", "consumer", "Stable")
    ]


def test_group_survives_reload_from_its_records() -> None:
    c = GroupCoordinator(CONFIG)
    written = []
    for step in (
        lambda: c.consumer_group_heartbeat(
            0,
            ConsumerHeartbeat("g", "a", 0, rebalance_timeout_ms=1, subscribed_topic_names=["foo"]),
            TOPICS,
        ),
        lambda: c.consumer_group_heartbeat(
            1,
            ConsumerHeartbeat(
                "g", "b", 0, rebalance_timeout_ms=1, subscribed_topic_names=["foo", "bar"]
            ),
            TOPICS,
        ),
        lambda: c.consumer_group_heartbeat(2, ConsumerHeartbeat("g", "a", 1), TOPICS),
    ):
        _, effects = step()
        written += [(r.key, r.value) for r in effects.records]
    loaded = GroupCoordinator(CONFIG)
    loaded.load(written, 10)
    before, after = c.consumer_groups["g"], loaded.consumer_groups["g"]
    assert after.group_epoch == before.group_epoch == 2
    assert after.target_assignment == before.target_assignment
    assert {m: x.assignment for m, x in after.members.items()} == {
        m: x.assignment for m, x in before.members.items()
    }
    assert after.subscription_metadata == before.subscription_metadata
    assert hb(loaded, "b", 2, now=11).error is ErrorCode.NONE


@pytest.mark.parametrize("assign", [uniform_assign, range_assign])
def test_assignors_cover_every_partition_once(assign: object) -> None:
    members = [
        AssignmentMember(f"m{i}", None, frozenset({FOO, BAR}) if i % 2 else frozenset({FOO}), {})
        for i in range(4)
    ]
    result = assign(members, {FOO: 7, BAR: 3})  # type: ignore[operator]
    seen = [(t, p) for a in result.values() for t, ps in a.items() for p in ps]
    assert sorted(seen) == sorted([(FOO, p) for p in range(7)] + [(BAR, p) for p in range(3)])
    assert all(BAR not in result[f"m{i}"] for i in (0, 2))


def test_uniform_is_sticky_and_balanced() -> None:
    first = uniform_assign([AssignmentMember("a", None, frozenset({FOO}), {})], {FOO: 6})
    both = uniform_assign(
        [
            AssignmentMember("a", None, frozenset({FOO}), first["a"]),
            AssignmentMember("b", None, frozenset({FOO}), {}),
        ],
        {FOO: 6},
    )
    assert len(both["a"][FOO]) == len(both["b"][FOO]) == 3
    assert both["a"][FOO] <= first["a"][FOO]


# Six partitions, each with its one replica in rack r0, r1 or r2 in turn.
RACKS = {FOO: tuple(frozenset({f"r{p % 3}"}) for p in range(6))}


def rack_member(name: str, rack: str | None, current: dict[bytes, frozenset[int]] | None = None):
    return AssignmentMember(name, None, frozenset({FOO}), current or {}, rack)


@pytest.mark.parametrize("assign", [uniform_assign, range_assign])
def test_assignors_give_members_the_partitions_of_their_rack(assign: object) -> None:
    members = [rack_member(f"m{i}", f"r{i}") for i in range(3)]
    result = assign(members, {FOO: 6}, RACKS)  # type: ignore[operator]
    assert {m: set(a[FOO]) for m, a in result.items()} == {
        "m0": {0, 3},
        "m1": {1, 4},
        "m2": {2, 5},
    }
    # Balance comes before racks: two members in r0 still split the partitions 3/3.
    crowded = assign([rack_member("a", "r0"), rack_member("b", "r0")], {FOO: 6}, RACKS)  # type: ignore[operator]
    assert sorted(len(a[FOO]) for a in crowded.values()) == [3, 3]
    # Without racks on the members the assignment is the plain one.
    plain = [rack_member(f"m{i}", None) for i in range(3)]
    assert assign(plain, {FOO: 6}, RACKS) == assign(plain, {FOO: 6})  # type: ignore[operator]


def test_uniform_moves_a_partition_to_its_rack_over_stickiness() -> None:
    """A partition held off its rack moves to an aligned member; aligned ones stay."""
    current = {FOO: frozenset({0, 1})}  # 0 is on r0, 1 is on r1
    result = uniform_assign(
        [rack_member("a", "r0", current), rack_member("b", "r1")], {FOO: 2}, RACKS
    )
    assert result == {"a": {FOO: frozenset({0})}, "b": {FOO: frozenset({1})}}


def test_heartbeats_rack_id_reaches_the_assignor() -> None:
    c = GroupCoordinator(CONFIG)
    racked = {"foo": TopicMetadata(FOO, "foo", 6, RACKS[FOO])}
    hb(c, "a", 0, topics=racked, rack_id="r1")
    b = hb(c, "b", 0, topics=racked, rack_id="r0")
    assert b.member_epoch == 2
    target = c.consumer_groups["g"].target_assignment
    assert target["a"][FOO] == {1, 2, 4} or target["a"][FOO] == {1, 4, 5}
    assert {0, 3} <= target["b"][FOO]


def test_describe_groups_shows_a_consumer_group_in_consumer_protocol_blobs() -> None:
    c = GroupCoordinator(CONFIG)
    hb(c, "a", 0, server_assignor="range", client_id="cid")
    d = c.describe_group("g")
    assert (d.state, d.protocol_type, d.protocol) == ("Stable", "consumer", "range")
    (m,) = d.members
    assert (m.member_id, m.client_id) == ("a", "cid")
    assert subscription_topics(m.metadata) == ["foo"]
    assert assignment_partitions(m.assignment) == {"foo": list(range(6))}


def test_offset_fetch_checks_a_members_epoch() -> None:
    c = GroupCoordinator(CONFIG)
    hb(c, "a", 0)
    assert c.offsets.validate_member("g", "a", 1) is None
    assert c.offsets.validate_member("g", "a", 0) is ErrorCode.STALE_MEMBER_EPOCH
    assert c.offsets.validate_member("g", "b", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert c.offsets.validate_member("classic", "b", 1) is None


def test_empty_groups_are_deleted_with_their_records() -> None:
    c = GroupCoordinator(CONFIG)
    hb(c, "a", 0)
    assert c.delete_groups(0, ["g"])[0] == {"g": ErrorCode.NON_EMPTY_GROUP}
    assert hb(c, "a", -1).member_epoch == -1
    assert c.consumer_groups["g"].state.value == "Empty"
    results, effects = c.delete_groups(1, ["g"])
    assert results == {"g": ErrorCode.NONE} and "g" not in c.consumer_groups
    assert effects.records and all(r.value is None for r in effects.records)
    hb(c, "b", 0)
    hb(c, "b", -1)
    c.tick(c.next_timer_ms())  # the retention check: no offsets, no members
    assert "g" not in c.consumer_groups


def test_an_empty_group_changes_protocol_and_keeps_its_offsets() -> None:
    c = GroupCoordinator(CONFIG)
    hb(c, "a", 0)
    c.offsets.commit_offsets(
        0,
        group_id="g",
        member_id="a",
        generation_id=1,
        group_instance_id=None,
        offsets=[OffsetCommit("foo", 0, 7)],
    )

    def join(member_id: str = "") -> ErrorCode:
        effects = c.join_group(
            "r",
            0,
            group_id="g",
            member_id=member_id,
            group_instance_id=None,
            client_id="c",
            client_host="h",
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            protocol_type="consumer",
            protocols=[("range", b"")],
            require_known_member_id=False,
        )
        return (
            [x.result.error for x in effects.completions][0]
            if effects.completions
            else ErrorCode.NONE
        )

    assert join() is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    hb(c, "a", -1)
    assert join() is ErrorCode.NONE  # parked in the join phase: a classic group now
    assert "g" not in c.consumer_groups and c.groups["g"].members
    assert hb(c, "b", 0).error is ErrorCode.GROUP_ID_NOT_FOUND
    assert c.offsets.fetch_offsets("g", [("foo", 0)])[0].offset == 7


def test_transactional_commit_checks_the_member_epoch() -> None:
    c = GroupCoordinator(CONFIG)
    hb(c, "a", 0)

    def txn_commit(member: str, epoch: int) -> ErrorCode:
        results, _ = c.offsets.txn_commit_offsets(
            0,
            group_id="g",
            producer_id=5,
            producer_epoch=0,
            member_id=member,
            generation_id=epoch,
            group_instance_id=None,
            offsets=[OffsetCommit("foo", 1, 3)],
        )
        return results[("foo", 1)]

    assert txn_commit("a", 0) is ErrorCode.ILLEGAL_GENERATION
    assert txn_commit("x", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert txn_commit("a", 1) is ErrorCode.NONE


def test_a_replaced_static_member_survives_a_reload() -> None:
    c = GroupCoordinator(CONFIG)
    log = []
    for member_id, epoch in (("a", 0), ("a", -2), ("a2", 0)):
        kw = {"rebalance_timeout_ms": 1, "subscribed_topic_names": ["foo"]} if epoch == 0 else {}
        _, effects = c.consumer_group_heartbeat(
            0, ConsumerHeartbeat("g", member_id, epoch, instance_id="i", **kw), TOPICS
        )
        log += [(r.key, r.value) for r in effects.records]
    loaded = GroupCoordinator(CONFIG)
    loaded.load(log, 1)
    (member,) = loaded.consumer_groups["g"].members.values()
    assert (member.member_id, member.subscribed_topic_names) == ("a2", ("foo",))
    assert member.assignment == c.consumer_groups["g"].members["a2"].assignment
