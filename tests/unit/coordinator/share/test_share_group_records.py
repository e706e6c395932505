"""Share-group membership written as Kafka's records and restored from them."""

from __future__ import annotations

from moldau.coordinator.share.group import Heartbeat, ShareGroupCoordinator
from moldau.coordinator.share.group_records import changes, restore, view
from moldau.ids import SeededIds
from moldau.protocol.coordinator_record_serde import GROUP_RECORD_TYPES, deserialize
from moldau.protocol.errors import ErrorCode

SESSION = 45_000
TOPICS = {"jobs": (b"j" * 16, 2), "mail": (b"m" * 16, 1)}


def _shapes(names: object) -> dict[str, tuple[bytes, int]]:
    return {t: TOPICS[t] for t in names if t in TOPICS}  # type: ignore[attr-defined]


class _Recorded:
    """A coordinator whose heartbeats append their records to a log."""

    def __init__(self, seed: int = 1) -> None:
        self.coordinator = ShareGroupCoordinator(SeededIds(seed))
        self.log: list[tuple[bytes, bytes | None]] = []

    def beat(self, hb: Heartbeat, now: int) -> int:
        groups = self.coordinator.groups
        before = view(groups.get(hb.group_id))
        result = self.coordinator.heartbeat(hb, now, SESSION, _shapes)
        assert result.error == ErrorCode.NONE
        self.log.extend(
            (r.key, r.value) for r in changes(hb.group_id, before, view(groups.get(hb.group_id)))
        )
        return result.member_epoch

    def epoch(self, member_id: str) -> int:
        return self.coordinator.groups["g"].members[member_id].member_epoch


def _run(r: _Recorded) -> None:
    r.beat(Heartbeat("g", "a", 0, ("jobs",), client_id="ca", client_host="/h"), 0)
    r.beat(Heartbeat("g", "b", 0, ("jobs",), rack_id="r1"), 0)
    r.beat(Heartbeat("g", "b", r.epoch("b"), ("jobs", "mail")), 10)
    r.beat(Heartbeat("g", "c", 0, ("mail",)), 20)
    r.beat(Heartbeat("g", "c", -1), 30)  # leaves: tombstones
    r.beat(Heartbeat("g", "a", r.epoch("a")), 40)


def test_records_replay_into_the_same_group() -> None:
    r = _Recorded()
    _run(r)
    group = r.coordinator.groups["g"]
    kinds = [deserialize(GROUP_RECORD_TYPES, k, v).record_type for k, v in r.log]
    assert set(kinds) == {9, 10, 11, 12, 13, 14}
    gone = [deserialize(GROUP_RECORD_TYPES, k, v) for k, v in r.log if v is None]
    assert [(x.record_type, x.key.member_id) for x in gone] == [(14, "c"), (13, "c"), (10, "c")]

    restored = restore(r.log, 1_000, lambda group_id: SESSION)["g"]
    assert view(restored) == view(group)  # epochs, topics, target, assignments, members
    assert {
        m: (x.subscribed, x.rack_id, x.client_id, x.client_host)
        for m, x in restored.members.items()
    } == {
        "a": (("jobs",), None, "ca", "/h"),
        "b": (("jobs", "mail"), "r1", "", ""),
    }
    assert all(m.deadline_ms == 1_000 + SESSION for m in restored.members.values())


def test_failover_keeps_member_epochs_and_assignments() -> None:
    """A new coordinator restored from the records answers every member's next
    heartbeat as the old one would have: no fencing, no new group epoch; a member up to
    date is handed nothing again, one behind gets the newer target."""
    r = _Recorded()
    _run(r)
    epochs = {m: r.epoch(m) for m in ("a", "b")}
    group_epoch = r.coordinator.groups["g"].group_epoch
    assert epochs == {"a": group_epoch, "b": group_epoch - 2}  # b missed c's join and leave
    after = _Recorded(seed=2)
    after.coordinator.groups.update(restore(r.log, 1_000, lambda group_id: SESSION))
    for member_id, epoch in epochs.items():
        hb = Heartbeat("g", member_id, epoch)
        old = r.coordinator.heartbeat(hb, 2_000, SESSION, _shapes)
        new = after.coordinator.heartbeat(hb, 2_000, SESSION, _shapes)
        assert new == old
        assert (new.error, new.member_epoch) == (ErrorCode.NONE, group_epoch)
        assert (new.assignment is None) == (member_id == "a")
    assert view(after.coordinator.groups["g"]) == view(r.coordinator.groups["g"])
    # A member joining the restored group moves the epoch on from where it was.
    assert after.beat(Heartbeat("g", "d", 0, ("jobs",)), 2_000) == group_epoch + 1


def test_membership_only_records_come_back_at_the_group_epoch() -> None:
    """Records written before assignments were: the member's epoch is accepted once and
    the topics, looked up again, give everyone a new assignment in a new epoch."""
    r = _Recorded()
    _run(r)
    old = [
        (k, v) for k, v in r.log if deserialize(GROUP_RECORD_TYPES, k, v).record_type in (10, 11)
    ]
    restored = restore(old, 1_000, lambda group_id: SESSION)["g"]
    group_epoch = restored.group_epoch
    after = ShareGroupCoordinator(SeededIds(2))
    after.groups["g"] = restored
    result = after.heartbeat(Heartbeat("g", "a", group_epoch), 2_000, SESSION, _shapes)
    assert result.error == ErrorCode.NONE
    assert result.member_epoch == group_epoch + 1
    assert result.assignment == {"jobs": (0,)} or result.assignment == {"jobs": (1,)}


def test_state_partitions_round_trip_and_group_tombstone() -> None:
    r = _Recorded()
    r.beat(Heartbeat("g", "a", 0, ("jobs",)), 0)
    group = r.coordinator.groups["g"]
    before = view(group)
    group.initialized = {b"j" * 16: ("jobs", frozenset({0, 1}))}
    group.initializing = {b"m" * 16: ("mail", frozenset({0}))}
    group.deleting = {b"x" * 16: "gone"}
    records = changes("g", before, view(group))
    assert [deserialize(GROUP_RECORD_TYPES, x.key, x.value).record_type for x in records] == [15]
    log = r.log + [(x.key, x.value) for x in records]
    restored = restore(log, 0, lambda group_id: SESSION)["g"]
    assert (restored.initialized, restored.initializing, restored.deleting) == (
        group.initialized,
        group.initializing,
        group.deleting,
    )
    # The group deleted: every record of it is tombstoned, and it does not come back.
    dropped = changes("g", view(group), None)
    assert all(x.value is None for x in dropped)
    assert restore(log + [(x.key, x.value) for x in dropped], 0, lambda group_id: SESSION) == {}


def test_no_change_writes_nothing() -> None:
    coordinator = ShareGroupCoordinator(SeededIds(1))
    coordinator.heartbeat(Heartbeat("g", "a", 0, ("jobs",)), 0, SESSION, _shapes)
    before = view(coordinator.groups["g"])
    epoch = coordinator.groups["g"].members["a"].member_epoch
    coordinator.heartbeat(Heartbeat("g", "a", epoch), 5, SESSION, _shapes)
    assert changes("g", before, view(coordinator.groups["g"])) == []
