"""Online upgrade of a classic group to a consumer group (Kafka 4.0), on the pure
coordinator driven step by step: the conversion, classic members inside the consumer
group (JoinGroup/SyncGroup/Heartbeat/LeaveGroup, OffsetCommit), their session timeouts,
failover, and group.consumer.migration.policy."""

from __future__ import annotations

from moldau.coordinator.group import GroupCoordinator, MemberIdentity, OffsetCommit
from moldau.coordinator.group.consumer_group import TopicMetadata
from moldau.coordinator.group.consumer_groups import ConsumerHeartbeat, HeartbeatResult
from moldau.coordinator.group.consumer_protocol import (
    assignment_partitions,
    encode_assignment,
    encode_subscription,
)
from moldau.coordinator.group.offsets_records import encode_group_key
from moldau.protocol.errors import ErrorCode

from .conftest import Harness, subscription

FOO = b"\x01" * 16
TOPICS = {"foo": TopicMetadata(FOO, "foo", 6)}
SUB = subscription("foo")
PROTOCOLS = (("range", SUB),)


def classic_group(h: Harness) -> tuple[str, str, int]:
    """A Stable classic group: a owns foo-0..2, b foo-3..5, offsets committed."""
    (a, b), generation = h.stable_group(2, protocols=PROTOCOLS)
    leader = a if h.coordinator.groups["g"].leader_id == a else b
    other = b if leader == a else a
    h.join(leader, protocols=PROTOCOLS)  # leader rejoins: a rebalance to set real assignments
    h.join(other, protocols=PROTOCOLS)
    joined = h.completed[max(h.completed)]
    generation = joined.generation_id
    sync = {a: encode_assignment({"foo": [0, 1, 2]}), b: encode_assignment({"foo": [3, 4, 5]})}
    h.sync(leader, generation, sync)
    h.sync(other, generation)
    assert h.state() == "Stable"
    commits = h.commit(a, generation, OffsetCommit("foo", 0, 42))
    assert commits == {("foo", 0): ErrorCode.NONE}
    return a, b, generation


def consumer_hb(h: Harness, member_id: str, epoch: int, **kw: object) -> HeartbeatResult:
    if epoch == 0:
        kw.setdefault("rebalance_timeout_ms", 30_000)
        kw.setdefault("subscribed_topic_names", ["foo"])
    result, effects = h.coordinator.consumer_group_heartbeat(
        h.now, ConsumerHeartbeat("g", member_id, epoch, **kw), TOPICS
    )
    h._absorb(effects)
    return result


def rejoin(h: Harness, member_id: str) -> tuple[int, set[int]]:
    """A classic member's JoinGroup + SyncGroup: (generation, assigned partitions)."""
    joined = h.completed[h.join(member_id, protocols=PROTOCOLS, topics=TOPICS)]
    assert joined.error is ErrorCode.NONE, joined
    assert (joined.protocol_type, joined.protocol_name, joined.leader) == ("consumer", "range", "")
    synced = h.completed[h.sync(member_id, joined.generation_id, protocol_name="range")]
    assert synced.error is ErrorCode.NONE, synced
    return joined.generation_id, set(assignment_partitions(synced.assignment).get("foo", []))


def owners(h: Harness) -> dict[int, str]:
    """Every owned partition -> its member; fails if two members hold one."""
    seen: dict[int, str] = {}
    for m in h.coordinator.consumer_groups["g"].members.values():
        for ps in (m.assignment.assigned, m.assignment.pending_revocation):
            for p in ps.get(FOO, ()):
                assert p not in seen, f"foo-{p} owned by {seen[p]} and {m.member_id}"
                seen[p] = m.member_id
    return seen


def test_consumer_member_upgrades_a_classic_group_keeping_assignments_and_offsets() -> None:
    h = Harness()
    a, b, generation = classic_group(h)
    h.records.clear()
    c = consumer_hb(h, "c", 0)
    assert c.error is ErrorCode.NONE and c.member_epoch == generation + 1
    assert c.assignment == {}  # everything is still owned by the classic members
    group = h.coordinator.consumer_groups["g"]
    assert group.group_epoch == generation + 1
    assert group.members[a].member_epoch == generation and group.members[a].classic is not None
    assert owners(h) == {0: a, 1: a, 2: a, 3: b, 4: b, 5: b}
    assert [o.group_type for o in h.coordinator.list_groups()] == ["consumer"]
    assert h.coordinator.describe_group("g").protocol_type == "consumer"
    assert (encode_group_key("g"), None) in [(r.key, r.value) for r in h.records]
    assert h.coordinator.offsets.fetch_offsets("g", [("foo", 0)])[0].offset == 42


def test_classic_members_reconcile_through_rejoins_and_never_share_a_partition() -> None:
    h = Harness()
    a, b, generation = classic_group(h)
    consumer_hb(h, "c", 0)
    epoch = generation + 1
    for member in (a, b):
        assert h.heartbeat(member, generation) is ErrorCode.REBALANCE_IN_PROGRESS
        gen, kept = rejoin(h, member)  # first rejoin: gives up what moves
        assert gen == generation and len(kept) == 2
        owners(h)
        assert h.heartbeat(member, gen) is ErrorCode.REBALANCE_IN_PROGRESS
        gen, assigned = rejoin(h, member)  # revocation reported: on to the new epoch
        assert gen == epoch and assigned == kept
        assert h.heartbeat(member, gen) is ErrorCode.NONE
    c = consumer_hb(h, "c", epoch)
    assert c.assignment is not None and len(c.assignment[FOO]) == 2
    assert sorted(owners(h)) == list(range(6))
    assert h.coordinator.consumer_groups["g"].state.value == "Stable"
    assert h.commit(a, generation, OffsetCommit("foo", 0, 43)) == {
        ("foo", 0): ErrorCode.ILLEGAL_GENERATION
    }
    assert h.commit(a, epoch, OffsetCommit("foo", 0, 43)) == {("foo", 0): ErrorCode.NONE}


def test_classic_member_leaves_and_expires_on_its_own_session_timeout() -> None:
    h = Harness()
    a, b, generation = classic_group(h)
    consumer_hb(h, "c", 0)
    assert h.leave(MemberIdentity(a)) == [ErrorCode.NONE]
    group = h.coordinator.consumer_groups["g"]
    assert a not in group.members and group.group_epoch == generation + 2
    assert h.leave(MemberIdentity("c")) == [ErrorCode.UNKNOWN_MEMBER_ID]  # not classic
    h.advance(9_000)
    consumer_hb(h, "c", generation + 1)
    h.advance(1_001)  # b's classic session (10 s) ran out; c heartbeated within its 45 s
    assert set(group.members) == {"c"}


def test_upgraded_group_survives_failover_with_classic_metadata() -> None:
    h = Harness()
    a, _, generation = classic_group(h)
    consumer_hb(h, "c", 0)
    fresh = GroupCoordinator(h.coordinator.config, now_ms=h.now)
    fresh.load([(r.key, r.value) for r in h.records], h.now)
    member = fresh.consumer_groups["g"].members[a]
    assert member.classic is not None and member.classic.session_timeout_ms == 10_000
    assert member.classic.protocols == PROTOCOLS
    assert fresh.groups["g"].offsets[("foo", 0)].offset == 42
    assert fresh.heartbeat(h.now, group_id="g", member_id=a, generation_id=generation) is (
        ErrorCode.REBALANCE_IN_PROGRESS
    )


def test_pending_joins_are_told_to_rejoin_when_the_group_upgrades() -> None:
    h = Harness()
    a, b, _ = classic_group(h)
    parked = h.join(a, protocols=(("range", subscription("foo", version=1)),))
    assert parked not in h.completed and h.state() == "PreparingRebalance"
    consumer_hb(h, "c", 0)
    assert h.completed[parked].error is ErrorCode.REBALANCE_IN_PROGRESS
    assert "g" in h.coordinator.consumer_groups


def test_policy_disabled_or_foreign_protocol_keeps_the_classic_group() -> None:
    h = Harness(consumer_migration_policy="downgrade")  # type: ignore[arg-type]
    classic_group(h)
    refused = consumer_hb(h, "c", 0)
    assert refused.error is ErrorCode.GROUP_ID_NOT_FOUND and "disabled" in (
        refused.error_message or ""
    )
    assert "g" not in h.coordinator.consumer_groups and h.state() == "Stable"
    other = Harness()
    other.stable_group(1, protocols=PROTOCOLS, protocol_type="connect")
    result, _ = other.coordinator.consumer_group_heartbeat(
        other.now,
        ConsumerHeartbeat("g", "c", 0, rebalance_timeout_ms=1, subscribed_topic_names=["foo"]),
        TOPICS,
    )
    assert result.error is ErrorCode.GROUP_ID_NOT_FOUND


def test_classic_join_to_consumer_group_validates_like_kafka() -> None:
    h = Harness()
    classic_group(h)
    consumer_hb(h, "c", 0)
    first = h.completed[h.join(protocols=PROTOCOLS, topics=TOPICS)]
    assert first.error is ErrorCode.MEMBER_ID_REQUIRED and first.member_id
    gen, assigned = rejoin(h, first.member_id)  # a new classic member joins the consumer group
    assert assigned == set()  # its partitions are still held by others
    wrong = h.completed[h.join(protocols=PROTOCOLS, protocol_type="connect", topics=TOPICS)]
    assert wrong.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.completed[h.sync(first.member_id, gen + 7)].error is ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("nobody", gen) is ErrorCode.UNKNOWN_MEMBER_ID
    assert encode_subscription(["foo"], None)  # the describe blobs stay decodable


def upgraded_and_settled(h: Harness) -> tuple[str, str, int]:
    """classic_group upgraded by consumer member c, everyone reconciled: (a, b, epoch)."""
    a, b, generation = classic_group(h)
    consumer_hb(h, "c", 0)
    for member in (a, b):
        rejoin(h, member)
        rejoin(h, member)
    consumer_hb(h, "c", generation + 1)
    assert sorted(owners(h)) == list(range(6))
    return a, b, generation + 1


def test_last_consumer_member_leaving_downgrades_to_a_classic_group_that_rebalances() -> None:
    h = Harness()
    a, b, epoch = upgraded_and_settled(h)
    h.records.clear()
    assert consumer_hb(h, "c", -1).error is ErrorCode.NONE
    assert "g" not in h.coordinator.consumer_groups
    assert [o.group_type for o in h.coordinator.list_groups()] == ["classic"]
    assert h.state() == "PreparingRebalance"
    group = h.coordinator.groups["g"]
    assert group.generation_id == epoch and group.offsets[("foo", 0)].offset == 42
    assert (encode_group_key("g"), None) not in [(r.key, r.value) for r in h.records]
    assert h.records[-1].key == encode_group_key("g") and h.records[-1].value is not None
    assert h.heartbeat(a, epoch) is ErrorCode.REBALANCE_IN_PROGRESS
    joins = [h.join(m, protocols=PROTOCOLS) for m in (a, b)]
    results = [h.completed[j] for j in joins]
    assert {r.generation_id for r in results} == {epoch + 1}
    leader = next(r for r in results if r.members)
    assert {m.member_id for m in leader.members} == {a, b}
    assert h.completed[h.sync(leader.leader, epoch + 1, {a: b"x", b: b"y"})].error is (
        ErrorCode.NONE
    )
    assert h.state() == "Stable"


def test_downgrade_keeps_the_consumer_group_when_the_policy_only_upgrades() -> None:
    h = Harness(consumer_migration_policy="upgrade")  # type: ignore[arg-type]
    a, _, epoch = upgraded_and_settled(h)
    consumer_hb(h, "c", -1)
    assert set(h.coordinator.consumer_groups["g"].members) == {a, *owners(h).values()}
    assert h.heartbeat(a, epoch) is ErrorCode.REBALANCE_IN_PROGRESS  # the epoch moved on


def test_consumer_member_session_expiry_downgrades_too() -> None:
    h = Harness()
    a, b, epoch = upgraded_and_settled(h)
    for _ in range(10):  # the classic members heartbeat, c stays silent past its 45 s
        h.advance(5_000)
        if "g" in h.coordinator.consumer_groups:
            assert h.heartbeat(a, epoch) is ErrorCode.NONE
            assert h.heartbeat(b, epoch) is ErrorCode.NONE
    assert "g" not in h.coordinator.consumer_groups
    assert set(h.coordinator.groups["g"].members) == {a, b}


def test_restarted_classic_static_member_replaces_its_old_self() -> None:
    h = Harness()
    first = h.join(protocols=PROTOCOLS, instance="i-a")
    h.advance(h.coordinator.config.group_initial_rebalance_delay_ms)
    joined = h.completed[first]
    old_id, generation = joined.member_id, joined.generation_id
    assignment = {old_id: encode_assignment({"foo": list(range(6))})}
    assert h.completed[h.sync(old_id, generation, assignment, instance="i-a")].error is (
        ErrorCode.NONE
    )
    consumer_hb(h, "c", 0)
    # The classic process restarts (a static member sends no LeaveGroup) and rejoins.
    restarted = h.completed[h.join("", protocols=PROTOCOLS, instance="i-a", topics=TOPICS)]
    assert restarted.error is ErrorCode.NONE and restarted.member_id != old_id
    group = h.coordinator.consumer_groups["g"]
    assert old_id not in group.members and group.static_members["i-a"] == restarted.member_id
    synced = h.completed[h.sync(restarted.member_id, restarted.generation_id, instance="i-a")]
    assert synced.error is ErrorCode.NONE
    assert len(assignment_partitions(synced.assignment)["foo"]) == 3  # its target share
    c = consumer_hb(h, "c", group.members["c"].member_epoch)
    assert c.assignment is not None and len(c.assignment[FOO]) == 3
    owners(h)
