"""KIP-848 server-side assignors: ``uniform`` (Kafka's UniformAssignor) and ``range``
(its RangeAssignor), chosen through ``group.consumer.assignors`` and a member's
``group.remote.assignor``.

An assignor maps the members' subscriptions (topic ids) and the topics' partition counts
to a target assignment. ``uniform`` is sticky: a partition stays with its current target
owner while that keeps the member counts balanced, so a rebalance moves only what must
move. ``range`` gives each subscribed member a contiguous range of every topic.

Rack awareness (members' ``client.rack``, partitions' replica racks): when some member's
rack holds replicas of some partition, and the partitions do not all live on the same
racks, both assignors prefer giving a member partitions with a replica in its rack.
Balance comes first, then racks, then stickiness (the order of Kafka's rack-aware uniform
assignor and of KIP-881's range assignor), so a member fetches from its own rack
(KIP-392) where the counts allow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

Assignment = dict[bytes, frozenset[int]]
"""Partitions by topic id."""


@dataclass(frozen=True)
class AssignmentMember:
    member_id: str
    instance_id: str | None
    subscribed_topic_ids: frozenset[bytes]
    current: Mapping[bytes, frozenset[int]]
    """The member's current target assignment (what ``uniform`` keeps where it can)."""
    rack: str | None = None


PartitionRacks = Mapping[bytes, Sequence[frozenset[str]]]
"""By topic id, per partition, the racks of its replicas (missing: unknown)."""
NO_RACKS: PartitionRacks = {}

Assignor = Callable[
    [Sequence[AssignmentMember], Mapping[bytes, int], PartitionRacks], dict[str, Assignment]
]


class _Racks:
    """Whether a member's rack holds a replica of a partition, when racks matter at all."""

    def __init__(self, members: Sequence[AssignmentMember], racks: PartitionRacks) -> None:
        self._member = {m.member_id: m.rack for m in members if m.rack}
        self._racks = racks
        sets = {r for per_topic in racks.values() for r in per_topic}
        member_racks = set(self._member.values())
        # Kafka's test: some member could be rack-aligned and racks differ by partition.
        self.active = len(sets) > 1 and any(member_racks & r for r in sets)

    def match(self, member_id: str, topic_id: bytes, partition: int) -> bool:
        rack = self._member.get(member_id)
        per_topic = self._racks.get(topic_id, ())
        return rack is not None and partition < len(per_topic) and rack in per_topic[partition]

    def mismatch(
        self, member_id: str, topic_id: bytes, partition: int, candidates: Sequence[str]
    ) -> bool:
        """The member is in the wrong rack for the partition and one of ``candidates`` is
        in a right one (an unknown rack is never wrong)."""
        return (
            self.active
            and member_id in self._member
            and not self.match(member_id, topic_id, partition)
            and any(self.match(c, topic_id, partition) for c in candidates)
        )


def uniform_assign(
    members: Sequence[AssignmentMember],
    partitions: Mapping[bytes, int],
    partition_racks: PartitionRacks = NO_RACKS,
) -> dict[str, Assignment]:
    """Balanced counts per member (within one partition among members of equal
    subscriptions), rack-aligned where the counts allow, keeping current owners first."""
    racks = _Racks(members, partition_racks)
    owned: dict[str, set[tuple[bytes, int]]] = {m.member_id: set() for m in members}
    subscribers: dict[bytes, list[str]] = {}
    for m in sorted(members, key=lambda m: m.member_id):
        for topic_id in m.subscribed_topic_ids:
            if topic_id in partitions:
                subscribers.setdefault(topic_id, []).append(m.member_id)
    taken: set[tuple[bytes, int]] = set()
    for m in members:
        for topic_id, parts in m.current.items():
            if topic_id in m.subscribed_topic_ids and topic_id in partitions:
                for p in parts:
                    if (
                        p < partitions[topic_id]
                        and (topic_id, p) not in taken
                        and not racks.mismatch(m.member_id, topic_id, p, subscribers[topic_id])
                    ):
                        owned[m.member_id].add((topic_id, p))
                        taken.add((topic_id, p))
    for topic_id in sorted(subscribers):
        for p in range(partitions[topic_id]):
            if (topic_id, p) not in taken:
                fewest = min(
                    subscribers[topic_id],
                    key=lambda mid: (len(owned[mid]), not racks.match(mid, topic_id, p)),
                )
                aligned = [mid for mid in subscribers[topic_id] if racks.match(mid, topic_id, p)]
                if aligned:
                    # A rack-aligned member may take it while that costs no more balance
                    # than the next step can restore.
                    best = min(aligned, key=lambda mid: len(owned[mid]))
                    if len(owned[best]) <= len(owned[fewest]) + 1:
                        fewest = best
                owned[fewest].add((topic_id, p))
    _balance(owned, subscribers, racks)
    return {mid: _by_topic(tps) for mid, tps in owned.items()}


def _balance(
    owned: dict[str, set[tuple[bytes, int]]],
    subscribers: Mapping[bytes, list[str]],
    racks: _Racks,
) -> None:
    """Move partitions from the fullest members to subscribed ones with two or more fewer,
    until no such move exists (each move shrinks the spread, so this ends); a giver hands
    over first what is off its rack, or on the taker's."""

    def taker_of(tp: tuple[bytes, int]) -> str:
        return min(subscribers[tp[0]], key=lambda mid: (len(owned[mid]), mid))

    moved = True
    while moved:
        moved = False
        for giver in sorted(owned, key=lambda mid: (-len(owned[mid]), mid)):
            order = sorted(
                owned[giver],
                key=lambda tp: (
                    racks.match(giver, *tp) and not racks.match(taker_of(tp), *tp),
                    tp,
                ),
            )
            for tp in order:
                taker = taker_of(tp)
                if len(owned[taker]) < len(owned[giver]) - 1:
                    owned[giver].discard(tp)
                    owned[taker].add(tp)
                    moved = True
                    break
            if moved:
                break


def range_assign(
    members: Sequence[AssignmentMember],
    partitions: Mapping[bytes, int],
    partition_racks: PartitionRacks = NO_RACKS,
) -> dict[str, Assignment]:
    """Per topic, its subscribers sorted by (instance id or member id) take consecutive
    ranges; the first ``count % subscribers`` take one more. With racks in play each
    member first takes, up to the same count, partitions with a replica in its rack, and
    the rest are handed out in order (KIP-881's range)."""
    racks = _Racks(members, partition_racks)
    result: dict[str, dict[bytes, set[int]]] = {m.member_id: {} for m in members}
    ordered = sorted(members, key=lambda m: (m.instance_id or m.member_id, m.member_id))
    for topic_id in sorted(partitions):
        subs = [m.member_id for m in ordered if topic_id in m.subscribed_topic_ids]
        if not subs:
            continue
        count = partitions[topic_id]
        per, extra = divmod(count, len(subs))
        quota = {mid: per + (1 if i < extra else 0) for i, mid in enumerate(subs)}
        got: dict[str, set[int]] = {mid: set() for mid in subs}
        free = list(range(count))
        if racks.active:
            for mid in subs:
                mine = [p for p in free if racks.match(mid, topic_id, p)][: quota[mid]]
                got[mid].update(mine)
                free = [p for p in free if p not in got[mid]]
        for mid in subs:
            need = quota[mid] - len(got[mid])
            got[mid].update(free[:need])
            free = free[need:]
        for mid, ps in got.items():
            if ps:
                result[mid][topic_id] = ps
    return {mid: {t: frozenset(ps) for t, ps in a.items()} for mid, a in result.items()}


def _by_topic(tps: set[tuple[bytes, int]]) -> Assignment:
    out: dict[bytes, set[int]] = {}
    for topic_id, p in tps:
        out.setdefault(topic_id, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assign, "range": range_assign}

_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def assignor_names(configured: Sequence[str]) -> list[str]:
    """``group.consumer.assignors`` entries (Kafka's class names or short names) as names;
    raises ValueError for an assignor Moldau does not have."""
    names = []
    for entry in configured:
        name = _CLASS_NAMES.get(entry.strip(), entry.strip())
        if name not in ASSIGNORS:
            raise ValueError(f"unknown group.consumer.assignors entry {entry!r}")
        names.append(name)
    return names
