"""Online upgrade of a classic group to a consumer group (Kafka 4.0), on the pure
coordinator driven step by step: the conversion, classic members inside the consumer
group (JoinGroup/SyncGroup/Heartbeat/LeaveGroup, OffsetCommit), their session timeouts,
failover, and group.consumer.migration.policy."""

from __future__ import annotations

from moldau.coordinator.group import GroupConfig, GroupCoordinator, MemberIdentity, OffsetCommit
from moldau.coordinator.group.consumer_group import TopicMetadata
from moldau.coordinator.group.consumer_groups import ConsumerHeartbeat, HeartbeatResult
from moldau.coordinator.group.consumer_protocol import (
    assignment_partitions,
    encode_assignment,
    encode_subscription,
)
from moldau.coordinator.group.offsets_records import decode_group_value, encode_group_key
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
    TopicPartition,
)

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
    # Written at the next generation: reloaded, its members must rejoin, so nobody's
    # partitions (the leaving member's) are left unassigned in a Stable group.
    written = [r for r in h.records if r.key == encode_group_key("g")]
    assert len(written) == 1 and decode_group_value(written[0].value).generation == epoch + 1
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
    assert h.records[-1].key == encode_group_key("g") and h.records[-1].value is not None


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
    old_id, generation = static_classic_group(h)
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


def owned_subscription(*partitions: int) -> bytes:
    """A ConsumerProtocolSubscription v1 of foo reporting owned partitions (cooperative)."""
    sub = ConsumerProtocolSubscription(
        topics=["foo"], owned_partitions=[TopicPartition("foo", list(partitions))]
    )
    return b"\x00\x01" + b"".join(bytes(part) for part in sub.encode(1))


def classic_partitions(h: Harness, member_id: str) -> list[int]:
    return sorted(
        assignment_partitions(h.coordinator.groups["g"].members[member_id].assignment)["foo"]
    )


def test_upgrade_holds_a_partition_the_cooperative_assignor_withheld() -> None:
    """a owned foo-0..2 and reported them; the cooperative leader gave it only foo-0..1
    (foo-2 moves once a gives it up). Found by the migration simulation: the upgrade
    took foo-2 for free and handed it to the consumer member while a still had it."""
    h = Harness()
    a, b, _ = classic_group(h)
    leader = h.coordinator.groups["g"].leader_id
    other = b if leader == a else a
    owned = {a: (0, 1, 2), b: (3, 4, 5)}
    h.join(leader, protocols=(("range", owned_subscription(*owned[leader])),))
    h.join(other, protocols=(("range", owned_subscription(*owned[other])),))
    generation = h.completed[max(h.completed)].generation_id
    sync = {a: encode_assignment({"foo": [0, 1]}), b: encode_assignment({"foo": [3, 4, 5]})}
    h.sync(leader, generation, sync)
    h.sync(other, generation)
    c = consumer_hb(h, "c", 0)
    assert owners(h)[2] == a and 2 not in (c.assignment or {}).get(FOO, ())
    group = h.coordinator.consumer_groups["g"]
    assert group.members[a].state.name == "UNREVOKED_PARTITIONS"
    assert h.heartbeat(a, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    rejoin(h, a)  # a rejoins owning what SyncGroup gave it: foo-2 is released
    c = consumer_hb(h, "c", group.members["c"].member_epoch)
    assert 2 not in owners(h) or owners(h)[2] != a


def test_downgrade_gives_members_what_they_hold_not_their_target() -> None:
    """c joins (the target moves a partition from a and one from b to c) and leaves
    before a and b gave them up: the classic group's assignments are what a and b still
    hold, so a quick upgrade back cannot hand those partitions out twice."""
    h = Harness()
    a, b, _ = classic_group(h)
    consumer_hb(h, "c", 0)
    group = h.coordinator.consumer_groups["g"]
    assert len(group.target_assignment[a][FOO]) == 2  # c's share comes from a and b
    consumer_hb(h, "c", -1)
    assert classic_partitions(h, a) == [0, 1, 2] and classic_partitions(h, b) == [3, 4, 5]
    assert h.state() == "PreparingRebalance"


def test_classic_joiner_must_share_a_protocol_with_the_classic_members() -> None:
    """Kafka's supportsClassicProtocols: else the downgrade could not choose a protocol."""
    h = Harness()
    classic_group(h)
    consumer_hb(h, "c", 0)
    alone = h.completed[h.join(protocols=(("roundrobin", SUB),), topics=TOPICS)]
    assert alone.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    both = h.completed[h.join(protocols=(("roundrobin", SUB), ("range", SUB)), topics=TOPICS)]
    assert both.error is ErrorCode.MEMBER_ID_REQUIRED


def static_consumer_upgrade(h: Harness) -> tuple[str, str, int]:
    """classic_group upgraded by static consumer member c (i-c), all reconciled."""
    a, b, generation = classic_group(h)
    consumer_hb(h, "c", 0, instance_id="i-c")
    for member in (a, b):
        rejoin(h, member)
        rejoin(h, member)
    consumer_hb(h, "c", generation + 1, instance_id="i-c")
    assert sorted(owners(h)) == list(range(6))
    return a, b, generation + 1


def test_classic_static_member_replacing_the_last_consumer_member_downgrades() -> None:
    """The static consumer member restarts with group.protocol=classic (same instance
    id): the group becomes classic at once, Stable (no rebalance), as in Kafka."""
    h = Harness()
    a, b, epoch = static_consumer_upgrade(h)
    held = owners(h)
    c_parts = sorted(p for p, m in held.items() if m == "c")
    joined = h.completed[h.join("", protocols=PROTOCOLS, instance="i-c", topics=TOPICS)]
    assert joined.error is ErrorCode.NONE and joined.generation_id == epoch
    assert "g" not in h.coordinator.consumer_groups
    group = h.coordinator.groups["g"]
    assert h.state() == "Stable" and group.generation_id == epoch
    assert set(group.members) == {a, b, joined.member_id}
    assert group.static_members["i-c"] == joined.member_id
    synced = h.completed[h.sync(joined.member_id, epoch, instance="i-c")]
    assert synced.error is ErrorCode.NONE
    assert sorted(assignment_partitions(synced.assignment)["foo"]) == c_parts
    assert h.heartbeat(a, epoch) is ErrorCode.NONE and h.heartbeat(b, epoch) is ErrorCode.NONE
    assert h.records[-1].key == encode_group_key("g") and h.records[-1].value is not None
    assert h.coordinator.offsets.fetch_offsets("g", [("foo", 0)])[0].offset == 42


def test_no_downgrade_beyond_the_classic_group_max_size() -> None:
    h = Harness(group_max_size=2)
    a, b, epoch = static_consumer_upgrade(h)
    joined = h.completed[h.join("", protocols=PROTOCOLS, instance="i-c", topics=TOPICS)]
    assert joined.error is ErrorCode.NONE  # it joins the consumer group as a classic member
    group = h.coordinator.consumer_groups["g"]
    assert set(group.members) == {a, b, joined.member_id}
    assert not h.coordinator.groups["g"].members  # (it holds the offsets)
    h2 = Harness()
    a, b, _ = upgraded_and_settled(h2)  # then a restart lowers group.max.size
    h2.coordinator = GroupCoordinator(GroupConfig(group_max_size=1), now_ms=h2.now)
    h2.coordinator.load([(r.key, r.value) for r in h2.records], h2.now)
    consumer_hb(h2, "c", -1)  # leaves two classic members: more than group.max.size
    assert set(h2.coordinator.consumer_groups["g"].members) == {a, b}


def test_classic_member_told_to_rejoin_is_fenced_after_its_rebalance_timeout() -> None:
    """Kafka's join timeout: heartbeating is not enough, the member must rejoin."""
    h = Harness()
    a, _, generation = classic_group(h)
    consumer_hb(h, "c", 0)
    for _ in range(6):  # a heartbeats every 5 s but never rejoins; 30 s rebalance timeout
        assert h.heartbeat(a, generation) is ErrorCode.REBALANCE_IN_PROGRESS
        h.advance(4_900)
    assert a in h.coordinator.consumer_groups["g"].members
    h.advance(1_000)
    assert h.heartbeat(a, generation) is ErrorCode.UNKNOWN_MEMBER_ID
    assert a not in h.coordinator.consumer_groups["g"].members


def test_classic_member_that_joins_but_never_syncs_is_fenced() -> None:
    h = Harness()
    a, _, _ = classic_group(h)
    consumer_hb(h, "c", 0)
    joined = h.completed[h.join(a, protocols=PROTOCOLS, topics=TOPICS)]
    assert joined.error is ErrorCode.NONE
    for _ in range(6):  # heartbeats keep its session, but SyncGroup is owed within 30 s
        h.heartbeat(a, joined.generation_id)
        h.advance(4_900)
    assert a in h.coordinator.consumer_groups["g"].members
    h.advance(1_000)
    assert a not in h.coordinator.consumer_groups["g"].members


def static_classic_group(h: Harness) -> tuple[str, int]:
    """A Stable classic group of one static member (i-a) owning foo-0..5."""
    first = h.join(protocols=PROTOCOLS, instance="i-a")
    h.advance(h.coordinator.config.group_initial_rebalance_delay_ms)
    joined = h.completed[first]
    member_id, generation = joined.member_id, joined.generation_id
    assignment = {member_id: encode_assignment({"foo": list(range(6))})}
    assert h.completed[h.sync(member_id, generation, assignment, instance="i-a")].error is (
        ErrorCode.NONE
    )
    return member_id, generation


def test_a_refused_upgrade_leaves_the_group_classic() -> None:
    """The consumer member's static id is held by a live classic member: the heartbeat
    fails, and (as Kafka reverts the failed operation) nothing was converted or written.
    Found by the migration simulation: the group stayed a consumer group of classic
    members only, which nothing would ever downgrade."""
    h = Harness()
    member_id, generation = static_classic_group(h)
    h.records.clear()
    refused = consumer_hb(h, "c", 0, instance_id="i-a")
    assert refused.error is ErrorCode.UNRELEASED_INSTANCE_ID
    assert "g" not in h.coordinator.consumer_groups and h.records == []
    assert set(h.coordinator.groups["g"].members) == {member_id} and h.state() == "Stable"
    assert h.heartbeat(member_id, generation, instance="i-a") is ErrorCode.NONE


def test_restarted_classic_static_member_takes_over_a_revoking_predecessor() -> None:
    """Its predecessor was giving partitions up when it restarted: the new member must
    not stay at epoch 0 (its next JoinGroup was refused UNRELEASED_INSTANCE_ID)."""
    h = Harness()
    old_id, generation = static_classic_group(h)
    consumer_hb(h, "c", 0)
    rejoin(h, old_id)  # the target moved: it must give three partitions up
    group = h.coordinator.consumer_groups["g"]
    assert group.members[old_id].state.name == "UNREVOKED_PARTITIONS"
    restarted = h.completed[h.join("", protocols=PROTOCOLS, instance="i-a", topics=TOPICS)]
    assert restarted.error is ErrorCode.NONE and restarted.generation_id > generation
    again = h.completed[
        h.join(restarted.member_id, protocols=PROTOCOLS, instance="i-a", topics=TOPICS)
    ]
    assert again.error is ErrorCode.NONE
    owners(h)
