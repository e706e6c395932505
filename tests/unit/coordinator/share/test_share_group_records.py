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


def test_membership_changes_replay_into_the_same_group() -> None:
    coordinator = ShareGroupCoordinator(SeededIds(1))
    log: list[tuple[bytes, bytes | None]] = []

    def beat(hb: Heartbeat, now: int) -> int:
        before = view(coordinator.groups.get(hb.group_id))
        result = coordinator.heartbeat(hb, now, SESSION, _shapes)
        assert result.error == ErrorCode.NONE
        after = view(coordinator.groups.get(hb.group_id))
        log.extend((r.key, r.value) for r in changes(hb.group_id, before, after))
        return result.member_epoch

    beat(Heartbeat("g", "a", 0, ("jobs",), client_id="ca", client_host="/h"), 0)
    b_epoch = beat(Heartbeat("g", "b", 0, ("jobs",), rack_id="r1"), 0)
    beat(Heartbeat("g", "b", b_epoch, ("jobs", "mail")), 10)
    beat(Heartbeat("g", "c", 0, ("mail",)), 20)
    beat(Heartbeat("g", "c", -1), 30)  # leaves: a tombstone
    a_epoch = beat(Heartbeat("g", "a", coordinator.groups["g"].members["a"].member_epoch), 40)
    group = coordinator.groups["g"]
    kinds = [deserialize(GROUP_RECORD_TYPES, k, v).record_type for k, v in log]
    assert set(kinds) == {10, 11}
    assert None in [v for _, v in log]  # the leave's tombstone

    restored = restore(log, 1_000, lambda group_id: SESSION)["g"]
    assert restored.group_epoch == group.group_epoch
    assert {
        m: (x.subscribed, x.rack_id, x.client_id, x.client_host)
        for m, x in restored.members.items()
    } == {
        "a": (("jobs",), None, "ca", "/h"),
        "b": (("jobs", "mail"), "r1", "", ""),
    }
    assert all(m.deadline_ms == 1_000 + SESSION for m in restored.members.values())

    # A member heartbeating with the epoch it had is accepted by the restored group and
    # gets a new assignment (the topics are looked up again: a new epoch).
    after = ShareGroupCoordinator(SeededIds(2))
    after.groups["g"] = restored
    result = after.heartbeat(Heartbeat("g", "a", a_epoch), 2_000, SESSION, _shapes)
    assert result.error == ErrorCode.NONE
    assert result.member_epoch == group.group_epoch + 1
    assert result.assignment == {"jobs": (0,)} or result.assignment == {"jobs": (1,)}


def test_no_change_writes_nothing() -> None:
    coordinator = ShareGroupCoordinator(SeededIds(1))
    coordinator.heartbeat(Heartbeat("g", "a", 0, ("jobs",)), 0, SESSION, _shapes)
    before = view(coordinator.groups["g"])
    epoch = coordinator.groups["g"].members["a"].member_epoch
    coordinator.heartbeat(Heartbeat("g", "a", epoch), 5, SESSION, _shapes)
    assert changes("g", before, view(coordinator.groups["g"])) == []
