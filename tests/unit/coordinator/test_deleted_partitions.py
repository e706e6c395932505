"""Offsets of deleted topics (Kafka's onPartitionsDeleted) on the pure group coordinator:
tombstoned in every group whatever its state, pending transactional ones included, the
same after a reload of the records written."""

from __future__ import annotations

from moldau.coordinator.group import GroupCoordinator, MemberIdentity, OffsetCommit
from moldau.coordinator.group.consumer_group import TopicMetadata
from moldau.coordinator.group.consumer_groups import ConsumerHeartbeat
from moldau.coordinator.group.offsets_records import GroupMetadataKey, OffsetKey, decode_key
from moldau.protocol.errors import ErrorCode

from .conftest import Harness

GONE = frozenset({("gone", 0), ("gone", 1), ("gone", 2)})


def delete(h: Harness, partitions=GONE) -> list[tuple[object, bool]]:
    """Run the deletion as the service does; the tombstones it wrote, decoded."""
    groups = h.coordinator.offsets.groups_with_offsets(partitions)
    effects = h.coordinator.offsets.on_partitions_deleted(h.now, groups, partitions)
    h.records += effects.records
    assert effects.completions == [] and effects.txn is None
    return [(decode_key(r.key), r.value is None) for r in effects.records]


def offset(c: GroupCoordinator, group: str, tp: tuple[str, int], stable: bool = False) -> int:
    (o,) = c.offsets.fetch_offsets(group, [tp], require_stable=stable)
    assert not o.unstable
    return o.offset


def reloaded(h: Harness) -> GroupCoordinator:
    c = GroupCoordinator(h.coordinator.config, now_ms=h.now)
    c.load([(r.key, r.value) for r in h.records], h.now)
    return c


def test_every_group_loses_the_deleted_partitions_offsets_only(h):
    (a,), generation = h.stable_group(1)
    h.commit(a, generation, OffsetCommit("gone", 0, 500), OffsetCommit("kept", 0, 7))
    h.join(group="empty")
    h.commit("", -1, OffsetCommit("gone", 1, 9), OffsetCommit("gone", 2, 3), group="simple")
    h.commit("", -1, OffsetCommit("kept", 1, 1), group="other")
    assert h.coordinator.offsets.groups_with_offsets(GONE) == ["g", "simple"]

    assert delete(h) == [
        (OffsetKey("g", "gone", 0), True),
        (OffsetKey("simple", "gone", 1), True),
        (OffsetKey("simple", "gone", 2), True),
    ]
    for c in (h.coordinator, reloaded(h)):
        assert offset(c, "g", ("gone", 0)) == -1
        assert offset(c, "g", ("kept", 0)) == 7
        assert offset(c, "other", ("kept", 1)) == 1
        assert offset(c, "simple", ("gone", 1)) == -1
        assert "simple" not in c.groups  # nothing left to keep it
    # Kafka leaves a Stable group's members alone: they rejoin when the topic leaves
    # their metadata; a commit of theirs keeps working.
    assert h.state() == "Stable" and h.heartbeat(a, generation) is ErrorCode.NONE
    assert h.commit(a, generation, OffsetCommit("kept", 0, 8)) == {("kept", 0): ErrorCode.NONE}
    assert delete(h) == []


def test_an_empty_group_left_without_offsets_goes(h):
    (a,), generation = h.stable_group(1)
    h.commit(a, generation, OffsetCommit("gone", 0, 5))
    h.leave(MemberIdentity(a))
    assert h.state() == "Empty"
    assert delete(h) == [(OffsetKey("g", "gone", 0), True), (GroupMetadataKey("g"), True)]
    assert h.state() == "Dead" and "g" not in reloaded(h).groups


def test_pending_transactional_offsets_of_deleted_partitions_go(h):
    def txn_commit(pid: int, *offsets: OffsetCommit) -> None:
        results, effects = h.coordinator.offsets.txn_commit_offsets(
            h.now, group_id="g", producer_id=pid, producer_epoch=0, member_id="",
            generation_id=-1, group_instance_id=None, offsets=offsets,
        )  # fmt: skip
        assert set(results.values()) == {ErrorCode.NONE}
        h.records += effects.records

    txn_commit(7, OffsetCommit("gone", 0, 10), OffsetCommit("kept", 0, 20))
    txn_commit(8, OffsetCommit("gone", 1, 30))
    assert delete(h) == [(OffsetKey("g", "gone", 0), True), (OffsetKey("g", "gone", 1), True)]
    # the transactions stay open: the group waits for their markers
    assert offset(h.coordinator, "g", ("gone", 0), stable=True) == -1
    assert h.coordinator.offsets.groups_with_pending(7) == ["g"]
    for pid in (7, 8):
        h.coordinator.offsets.complete_transaction(h.now, pid, 0, True, 1)
    assert offset(h.coordinator, "g", ("gone", 0)) == -1
    assert offset(h.coordinator, "g", ("gone", 1)) == -1
    assert offset(h.coordinator, "g", ("kept", 0)) == 20


def test_a_consumer_group_loses_the_deleted_partitions_offsets(h):
    topics = {"gone": TopicMetadata(b"\x01" * 16, "gone", 3)}
    result, _ = h.coordinator.consumer_group_heartbeat(
        h.now,
        ConsumerHeartbeat(
            "cg", "m", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["gone"]
        ),
        topics,
    )
    assert result.error is ErrorCode.NONE
    committed, effects = h.coordinator.offsets.commit_offsets(
        h.now, group_id="cg", member_id="m", generation_id=result.member_epoch,
        group_instance_id=None, offsets=[OffsetCommit("gone", 2, 44)],
    )  # fmt: skip
    assert committed == {("gone", 2): ErrorCode.NONE}
    h.records += effects.records
    assert delete(h) == [(OffsetKey("cg", "gone", 2), True)]
    assert offset(h.coordinator, "cg", ("gone", 2)) == -1
    assert "m" in h.coordinator.consumer_groups["cg"].members
