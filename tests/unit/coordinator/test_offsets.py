"""OffsetCommit/OffsetFetch/OffsetDelete, retention, DeleteGroups and reloading from records."""

from __future__ import annotations

import pytest

from moldau.coordinator.group import (
    GroupConfig,
    GroupCoordinator,
    MemberIdentity,
    OffsetCommit,
    PartitionOffset,
)
from moldau.coordinator.group.offsets_records import (
    GroupMetadataKey,
    OffsetKey,
    decode_group_value,
    decode_key,
    encode_offset_key,
)
from moldau.protocol.errors import ErrorCode

from .conftest import Harness, subscription

T0, T1 = ("t1", 0), ("t1", 1)


def keys(records):
    return [(decode_key(r.key), r.value is None) for r in records]


def test_member_commit_and_fetch(h):
    (a,), generation = h.stable_group(1)
    results = h.commit(a, generation, OffsetCommit("t1", 0, 42, 3, "m"), OffsetCommit("t1", 1, 7))
    assert results == {T0: ErrorCode.NONE, T1: ErrorCode.NONE}
    assert h.coordinator.offsets.fetch_offsets("g", [T0, T1, ("t2", 0)]) == [
        PartitionOffset("t1", 0, 42, 3, "m"),
        PartitionOffset("t1", 1, 7, -1, ""),
        PartitionOffset("t2", 0, -1, -1, ""),
    ]
    assert sorted(h.coordinator.offsets.fetch_offsets("g")) == [
        PartitionOffset("t1", 0, 42, 3, "m"),
        PartitionOffset("t1", 1, 7, -1, ""),
    ]
    assert h.coordinator.offsets.fetch_offsets("none", [T0]) == [
        PartitionOffset("t1", 0, -1, -1, "")
    ]
    assert h.coordinator.offsets.fetch_offsets("none") == []
    assert [k for k, _ in keys(h.records[-2:])] == [OffsetKey("g", *T0), OffsetKey("g", *T1)]


def test_commit_validation(h):
    (a, b), generation = h.stable_group(2)
    one = OffsetCommit("t1", 0, 1)
    assert h.commit(a, generation - 1, one) == {T0: ErrorCode.ILLEGAL_GENERATION}
    assert h.commit("ghost", generation, one) == {T0: ErrorCode.UNKNOWN_MEMBER_ID}
    assert h.commit("", -1, one) == {T0: ErrorCode.UNKNOWN_MEMBER_ID}  # group has members
    assert h.commit(a, 5, one, group="nope") == {T0: ErrorCode.ILLEGAL_GENERATION}
    big = OffsetCommit("t1", 0, 1, metadata="x" * 4097)
    assert h.commit(a, generation, big, OffsetCommit("t1", 1, 1)) == {
        T0: ErrorCode.OFFSET_METADATA_TOO_LARGE,
        T1: ErrorCode.NONE,
    }
    h.new_member()  # PreparingRebalance: commits from the current generation still land
    assert h.commit(a, generation, one) == {T0: ErrorCode.NONE}
    h.join(a)
    h.join(b)
    assert h.state() == "CompletingRebalance"
    assert h.commit(a, generation + 1, one) == {T0: ErrorCode.REBALANCE_IN_PROGRESS}
    assert h.commit(a, generation, one) == {T0: ErrorCode.ILLEGAL_GENERATION}


def test_simple_commit_creates_group_without_members(h):
    assert h.commit("", -1, OffsetCommit("t1", 0, 9)) == {T0: ErrorCode.NONE}
    assert h.coordinator.offsets.fetch_offsets("g", [T0])[0].offset == 9
    assert h.coordinator.describe_group("g").state == "Empty"
    assert h.coordinator.list_groups() == [("g", "", "Empty", "classic")]


def test_commit_resets_member_session(h):
    (a,), generation = h.stable_group(1)
    for _ in range(3):
        h.advance(6_000)
        assert h.commit(a, generation, OffsetCommit("t1", 0, 1))[T0] is ErrorCode.NONE
    assert h.state() == "Stable"


def expiry_harness() -> Harness:
    return Harness(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1_000)


def test_offsets_expire_a_retention_after_the_group_became_empty():
    h = expiry_harness()
    (a,), generation = h.stable_group(1)
    h.commit(a, generation, OffsetCommit("t1", 0, 1))
    for _ in range(24):  # a subscribed, live member's old commit never expires
        h.advance(5_000)
        assert h.heartbeat(a, generation) is ErrorCode.NONE
    h.leave(MemberIdentity(a))
    assert h.state() == "Empty"
    h.records.clear()
    h.advance(59_999)
    assert h.coordinator.offsets.fetch_offsets("g", [T0])[0].offset == 1
    h.advance(1_000)  # the next retention check after 60s of emptiness
    assert keys(h.records) == [(OffsetKey("g", *T0), True), (GroupMetadataKey("g"), True)]
    assert "g" not in h.coordinator.groups
    assert h.coordinator.describe_group("g").state == "Dead"


def test_stable_consumer_group_expires_only_unsubscribed_topics():
    h = expiry_harness()
    (a,), generation = h.stable_group(1)  # subscribed to t1
    h.commit(a, generation, OffsetCommit("t1", 0, 1), OffsetCommit("old", 0, 2))
    for _ in range(13):
        h.advance(5_000)
        h.heartbeat(a, generation)
    assert h.coordinator.offsets.fetch_offsets("g", [T0, ("old", 0)]) == [
        PartitionOffset("t1", 0, 1, -1, ""),
        PartitionOffset("old", 0, -1, -1, ""),
    ]


def test_simple_group_offsets_expire_per_commit_without_metadata_tombstone():
    h = expiry_harness()
    h.commit("", -1, OffsetCommit("t1", 0, 1))
    h.advance(30_000)
    h.commit("", -1, OffsetCommit("t1", 1, 1))
    h.records.clear()
    h.advance(31_000)
    assert keys(h.records) == [(OffsetKey("g", *T0), True)]
    h.advance(30_000)
    assert keys(h.records) == [(OffsetKey("g", *T0), True), (OffsetKey("g", *T1), True)]
    assert "g" not in h.coordinator.groups  # generation 0: no group metadata tombstone


def test_explicit_retention_time_of_old_commit_versions():
    h = expiry_harness()
    (a,), generation = h.stable_group(1)
    h.commit(a, generation, OffsetCommit("t1", 0, 1), retention=5_000)
    h.leave(MemberIdentity(a))
    h.advance(4_000)
    assert h.coordinator.offsets.fetch_offsets("g", [T0])[0].offset == 1
    h.advance(2_000)
    assert h.coordinator.offsets.fetch_offsets("g", [T0])[0].offset == -1


def test_delete_groups(h):
    (a,), generation = h.stable_group(1)
    h.commit(a, generation, OffsetCommit("t1", 0, 1))
    h.commit("", -1, OffsetCommit("t1", 0, 1), group="simple")
    results, _ = h.coordinator.delete_groups(h.now, ["g", "nope"])
    assert results == {"g": ErrorCode.NON_EMPTY_GROUP, "nope": ErrorCode.GROUP_ID_NOT_FOUND}
    h.leave(MemberIdentity(a))
    results, effects = h.coordinator.delete_groups(h.now, ["g", "simple"])
    assert results == {"g": ErrorCode.NONE, "simple": ErrorCode.NONE}
    assert keys(effects.records) == [
        (OffsetKey("g", *T0), True),
        (GroupMetadataKey("g"), True),
        (OffsetKey("simple", *T0), True),
    ]
    assert h.coordinator.list_groups() == []
    assert h.coordinator.offsets.fetch_offsets("g", [T0])[0].offset == -1


def test_offset_delete(h):
    (a,), generation = h.stable_group(1)
    h.commit(a, generation, OffsetCommit("t1", 0, 1), OffsetCommit("t2", 0, 1))
    error, results, effects = h.coordinator.offsets.delete_offsets(
        h.now, "g", [T0, ("t2", 0), ("t3", 0)]
    )
    assert error is ErrorCode.NONE
    assert results == {
        T0: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
        ("t2", 0): ErrorCode.NONE,
        ("t3", 0): ErrorCode.NONE,
    }
    assert keys(effects.records) == [(OffsetKey("g", "t2", 0), True)]
    assert h.coordinator.offsets.delete_offsets(h.now, "nope", [T0])[:2] == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        {},
    )
    assert h.coordinator.offsets.delete_offsets(h.now, "", [T0])[0] is ErrorCode.INVALID_GROUP_ID


def test_offset_delete_of_last_offsets_of_empty_group_removes_it(h):
    (a,), generation = h.stable_group(1)
    h.commit(a, generation, OffsetCommit("t1", 0, 1))
    h.leave(MemberIdentity(a))
    _, results, effects = h.coordinator.offsets.delete_offsets(h.now, "g", [T0])
    assert results == {T0: ErrorCode.NONE}
    assert keys(effects.records) == [(OffsetKey("g", *T0), True), (GroupMetadataKey("g"), True)]


def test_offset_delete_in_non_consumer_group_with_members(h):
    h.stable_group(1, protocol_type="connect")
    assert h.coordinator.offsets.delete_offsets(h.now, "g", [T0])[0] is ErrorCode.NON_EMPTY_GROUP


def test_list_and_describe_groups(h):
    (a, b), generation = h.stable_group(2)
    h.commit("", -1, OffsetCommit("t1", 0, 1), group="simple")
    assert sorted(h.coordinator.list_groups()) == [
        ("g", "consumer", "Stable", "classic"),
        ("simple", "", "Empty", "classic"),
    ]
    assert h.coordinator.list_groups(["STABLE"]) == [("g", "consumer", "Stable", "classic")]
    assert h.coordinator.list_groups(["Dead"]) == []
    described = h.coordinator.describe_group("g")
    assert (described.state, described.protocol_type, described.protocol) == (
        "Stable",
        "consumer",
        "range",
    )
    assert {(m.member_id, m.metadata, m.assignment) for m in described.members} == {
        (a, subscription("t1"), a.encode()),
        (b, subscription("t1"), b.encode()),
    }
    h.new_member()
    rebalancing = h.coordinator.describe_group("g")
    assert rebalancing.protocol == "" and all(m.metadata == b"" for m in rebalancing.members)


def replay(h: Harness, now_ms: int) -> GroupCoordinator:
    restarted = GroupCoordinator(h.coordinator.config, now_ms=now_ms)
    restarted.load(h.records, now_ms)
    return restarted


def test_persistence_round_trip_of_empty_group(h):
    (a, b), generation = h.stable_group(2)
    h.commit(a, generation, OffsetCommit("t1", 0, 42, 5, "meta"), OffsetCommit("t1", 1, 1))
    h.commit(a, generation, OffsetCommit("t1", 1, 8))
    h.commit("", -1, OffsetCommit("x", 3, 3), group="simple")
    h.leave(MemberIdentity(a), MemberIdentity(b))
    final_generation = h.coordinator.groups["g"].generation_id
    restarted = replay(h, h.now + 1)
    assert sorted(restarted.offsets.fetch_offsets("g")) == sorted(
        h.coordinator.offsets.fetch_offsets("g")
    )
    assert restarted.offsets.fetch_offsets("simple") == [PartitionOffset("x", 3, 3, -1, "")]
    group = restarted.groups["g"]
    assert (group.state.value, group.generation_id, group.protocol_type) == (
        "Empty",
        final_generation,
        "consumer",
    )
    assert group.state_timestamp_ms == h.coordinator.groups["g"].state_timestamp_ms


def test_persistence_round_trip_of_stable_group_keeps_members(h):
    (a, b), generation = h.stable_group(2)
    restarted = replay(h, h.now)
    assert restarted.describe_group("g") == h.coordinator.describe_group("g")
    assert restarted.heartbeat(h.now, group_id="g", member_id=a, generation_id=generation) is (
        ErrorCode.NONE
    )
    effects = restarted.tick(h.now + 10_000)  # b went away with the old broker
    assert b not in restarted.groups["g"].members
    assert effects.completions == []


def test_load_applies_tombstones(h):
    (a,), generation = h.stable_group(1)
    h.commit(a, generation, OffsetCommit("t1", 0, 1))
    h.commit("", -1, OffsetCommit("t1", 0, 1), group="kept")
    h.leave(MemberIdentity(a))
    _, effects = h.coordinator.delete_groups(h.now, ["g"])
    h.records += effects.records
    restarted = replay(h, h.now)
    assert list(restarted.groups) == ["kept"]


def test_load_rejects_unknown_value_version():
    coordinator = GroupCoordinator(GroupConfig())
    with pytest.raises(ValueError):
        coordinator.load([(encode_offset_key("g", "t", 0), b"\x00\x09")], 0)


def test_group_metadata_record_contents(h):
    (a, b), generation = h.stable_group(2)
    value = decode_group_value(h.records[-1].value)
    assert (value.protocol_type, value.generation, value.protocol) == (
        "consumer",
        generation,
        "range",
    )
    assert value.leader == h.coordinator.groups["g"].leader_id
    assert {
        (m.member_id, m.assignment, m.session_timeout, m.rebalance_timeout) for m in value.members
    } == {
        (a, a.encode(), 10_000, 30_000),
        (b, b.encode(), 10_000, 30_000),
    }
